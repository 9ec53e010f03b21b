"""Projects, domains and the server's version (AdminService), the auth metadata a Flyte client
asks for before anything else (AuthMetadataService), and upload locations (DataProxyService).
"""

from __future__ import annotations

from typing import Any

from flyteidl.admin import project_pb2, version_pb2
from flyteidl.service import auth_pb2, auth_pb2_grpc, dataproxy_pb2, dataproxy_pb2_grpc
from google.protobuf import timestamp_pb2

from sluice.errors import NotFoundError
from sluice.flyteadmin.calls import METADATA_KEY, Caller, rpc
from sluice.service import Sluice

CLIENT_ID = "sluice"
UPLOAD_ROUTE = "/flyte/data"
"""Where the HTTP server takes uploads (http/flyte_data.py)."""


class ProjectRpcs:
    caller: Caller

    @rpc
    async def ListProjects(self, request: Any, service: Sluice) -> Any:
        found = await service.flyte.projects()
        return project_pb2.Projects(projects=[_project(p, d) for p, d in found])

    @rpc
    async def GetProject(self, request: Any, service: Sluice) -> Any:
        for project, domains in await service.flyte.projects():
            if project == request.id:
                return _project(project, domains)
        raise NotFoundError(f"project {request.id!r} does not exist")

    @rpc
    async def GetDomains(self, request: Any, service: Sluice) -> Any:
        domains = [project_pb2.Domain(id=d, name=d) for d in service.flyte.domains()]
        return project_pb2.GetDomainsResponse(domains=domains)

    @rpc
    async def GetVersion(self, request: Any, service: Sluice) -> Any:
        from importlib.metadata import version

        build = version_pb2.Version(Version=f"sluice {version('sluice')}", Build="sluice")
        return version_pb2.GetVersionResponse(control_plane_version=build)


def _project(name: str, domains: list[str]) -> Any:
    return project_pb2.Project(
        id=name, name=name, domains=[project_pb2.Domain(id=d, name=d) for d in domains]
    )


class AuthMetadata(auth_pb2_grpc.AuthMetadataServiceServicer):  # type: ignore[misc]
    """What flytekit reads before it authenticates: sluice takes bearer tokens (no OAuth2
    flow), in the `authorization` metadata. Answered without credentials, as flyteadmin."""

    def __init__(self, http_url: str) -> None:
        self.http_url = http_url

    async def GetOAuth2Metadata(self, request: Any, context: Any) -> Any:
        return auth_pb2.OAuth2MetadataResponse(
            issuer=self.http_url,
            token_endpoint=f"{self.http_url}/oauth2/token",
            authorization_endpoint=f"{self.http_url}/oauth2/authorize",
            grant_types_supported=["client_credentials"],
            token_endpoint_auth_methods_supported=["client_secret_basic"],
        )

    async def GetPublicClientConfig(self, request: Any, context: Any) -> Any:
        return auth_pb2.PublicClientAuthConfigResponse(
            client_id=CLIENT_ID,
            redirect_uri="http://localhost:53593/callback",
            scopes=["all"],
            authorization_metadata_key=METADATA_KEY,
            service_http_endpoint=self.http_url,
        )


class DataProxy(dataproxy_pb2_grpc.DataProxyServiceServicer):  # type: ignore[misc]
    """Upload locations: signed URLs of sluice's HTTP server, which writes into the data
    directory (service/flyte/code.py)."""

    def __init__(self, caller: Caller, http_url: str) -> None:
        self.caller = caller
        self.http_url = http_url

    @rpc
    async def CreateUploadLocation(self, request: Any, service: Sluice) -> Any:
        from urllib.parse import urlencode

        expires_in = request.expires_in.ToTimedelta().total_seconds() or None
        grant = service.flyte.upload_location(
            request.project,
            request.domain,
            request.filename,
            request.content_md5,
            request.filename_root,
            expires_in,
        )
        signed = {"expires": repr(grant.expires), "md5": grant.md5, "signature": grant.signature}
        query = urlencode(signed)
        expires_at = timestamp_pb2.Timestamp()
        expires_at.FromNanoseconds(int(grant.expires * 1e9))
        return dataproxy_pb2.CreateUploadLocationResponse(
            signed_url=f"{self.http_url}{UPLOAD_ROUTE}/{grant.path}?{query}",
            native_url=grant.native_url,
            expires_at=expires_at,
        )
