"""Uploads from Flyte's clients: the signed URLs the Flyte gRPC API hands out (DataProxyService
CreateUploadLocation) point here. The signature in the query is the credential (as an S3
presigned URL's), so the route needs no token; the file lands in the data directory (see
service/flyte/code.py). A wrong signature or an expired one is 403, a wrong MD5 422."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from sluice.http.problems import problem
from sluice.service import Sluice

ROUTE = "/flyte/data"


def flyte_data_router() -> APIRouter:
    router = APIRouter()
    router.add_api_route(f"{ROUTE}/{{path:path}}", upload, methods=["PUT"])
    return router


async def upload(
    request: Request, path: str, expires: float, signature: str, md5: str = ""
) -> Response:
    """Store one upload; 201 once it is written under its final name."""
    sluice: Sluice = request.app.state.sluice
    header = request.headers.get("content-md5", "")
    if md5 and header and header != md5:
        return problem(422, f"Content-MD5 {header} is not the signed {md5}", "invalid-argument")
    await sluice.flyte.store_upload(path, expires, md5, signature, request.stream())
    return Response(status_code=201)
