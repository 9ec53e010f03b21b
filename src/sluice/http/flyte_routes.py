"""What Flyte's clients reach over HTTP:

- uploads: the signed URLs the Flyte gRPC API hands out (DataProxyService CreateUploadLocation)
  point here. The signature in the query is the credential (as an S3 presigned URL's), so the
  route needs no token; the file lands in the data directory (see service/flyte/code.py). A
  wrong signature or an expired one is 403, a wrong MD5 422;
- the console links flytekit prints (`console.endpoint` set to this server): redirected to
  the execution's page of the web UI.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from sluice.http.problems import problem
from sluice.service import Sluice

ROUTE = "/flyte/data"


CONSOLE = "/console/projects/{project}/domains/{domain}/executions/{name}"


def flyte_router() -> APIRouter:
    router = APIRouter()
    router.add_api_route(f"{ROUTE}/{{path:path}}", upload, methods=["PUT"])
    router.add_api_route(CONSOLE, console, methods=["GET"])
    return router


async def console(request: Request, project: str, domain: str, name: str) -> RedirectResponse:
    """Flyte's console link of an execution: its page in sluice's web UI."""
    root = request.scope.get("root_path", "")
    return RedirectResponse(f"{root}/executions/{name}", status_code=307)


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
