"""Who may call the Flyte gRPC API, and the uploads it signs, in process: a server that needs
tokens refuses a call without one (UNAUTHENTICATED, what makes flytekit fetch a token) and
scopes a token to its projects, as the HTTP API does; the auth metadata flytekit reads first is
answered without one; flytekit's ExternalCommand auth gets through. An upload needs the
signature of this server, before it expires, and the bytes it was signed for."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import grpc
import pytest
from flyteidl.admin import project_pb2, task_pb2
from flyteidl.core import identifier_pb2
from flyteidl.service import (
    admin_pb2_grpc,
    auth_pb2,
    auth_pb2_grpc,
    dataproxy_pb2,
    dataproxy_pb2_grpc,
)

from sluice.flyteadmin.server import FlyteListening, flyteadmin_server
from sluice.service import Sluice
from support.http_world import client_for, open_sluice

HTTP = "http://127.0.0.1:9"


@pytest.fixture
async def sluice(sqlite_url: str) -> AsyncIterator[Sluice]:
    opened = await open_sluice(sqlite_url, "alpha")
    yield opened
    await opened.close()


@pytest.fixture
async def guarded(sluice: Sluice) -> AsyncIterator[FlyteListening]:
    async with flyteadmin_server(
        sluice, "127.0.0.1", 0, http_url=HTTP, token_required=True
    ) as listening:
        yield listening


def _admin(channel: grpc.aio.Channel) -> admin_pb2_grpc.AdminServiceStub:
    return admin_pb2_grpc.AdminServiceStub(channel)


def _bearer(secret: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {secret}"),)


async def test_a_server_that_needs_tokens_refuses_calls_without_one(
    sluice: Sluice, guarded: FlyteListening
) -> None:
    issued = await sluice.tokens.create(["alpha"])
    async with grpc.aio.insecure_channel(guarded.endpoint) as channel:
        admin = _admin(channel)
        request = project_pb2.ProjectListRequest(limit=10)
        for metadata in ((), _bearer("sluice_nope_nope")):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await admin.ListProjects(request, metadata=metadata)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        listed = await admin.ListProjects(request, metadata=_bearer(issued.secret))
        assert [p.id for p in listed.projects] == ["alpha"]
        auth = auth_pb2_grpc.AuthMetadataServiceStub(channel)  # asked before any token
        config = await auth.GetPublicClientConfig(auth_pb2.PublicClientAuthConfigRequest())
        assert config.authorization_metadata_key == "authorization"


async def test_a_token_acts_only_in_its_projects(sluice: Sluice, guarded: FlyteListening) -> None:
    issued = await sluice.tokens.create(["alpha"])
    reader = await sluice.tokens.create(["beta"], read_only=True)
    task = identifier_pb2.Identifier(
        resource_type=identifier_pb2.TASK, project="beta", domain="development", name="t",
        version="1",
    )  # fmt: skip
    request = task_pb2.TaskCreateRequest(id=task, spec=task_pb2.TaskSpec())
    async with grpc.aio.insecure_channel(guarded.endpoint) as channel:
        admin = _admin(channel)
        with pytest.raises(grpc.aio.AioRpcError) as elsewhere:
            await admin.CreateTask(request, metadata=_bearer(issued.secret))
        assert elsewhere.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as read_only:
            await admin.CreateTask(request, metadata=_bearer(reader.secret))
        assert read_only.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_flytekit_external_command_auth_gets_a_token_and_is_scoped(
    sluice: Sluice, guarded: FlyteListening, tmp_path: Path
) -> None:
    from flytekit.clients.friendly import SynchronousFlyteClient
    from flytekit.configuration import PlatformConfig

    issued = await sluice.tokens.create(["alpha"])
    token_file = tmp_path / "token"
    token_file.write_text(issued.secret)
    config = PlatformConfig(
        endpoint=guarded.endpoint,
        insecure=True,
        auth_mode="ExternalCommand",
        command=["cat", str(token_file)],
    )

    def projects() -> list[str]:
        client = SynchronousFlyteClient(config)
        found, _ = client.list_projects_paginated(limit=10)
        return [p.id for p in found]

    assert await asyncio.to_thread(projects) == ["alpha"]


async def test_uploads_need_this_servers_signature_in_time_and_the_signed_bytes(
    sluice: Sluice, tmp_path: Path
) -> None:
    data = b"the code archive"
    md5 = hashlib.md5(data).digest()
    server = flyteadmin_server(sluice, "127.0.0.1", 0, http_url=HTTP, token_required=False)
    async with server as listening, grpc.aio.insecure_channel(listening.endpoint) as channel:
        proxy = dataproxy_pb2_grpc.DataProxyServiceStub(channel)
        request = dataproxy_pb2.CreateUploadLocationRequest(
            project="alpha", domain="development", filename="code.tar.gz", content_md5=md5
        )
        location = await proxy.CreateUploadLocation(request)
        request.expires_in.FromMilliseconds(1)
        brief = await proxy.CreateUploadLocation(request)
    signed = urlsplit(location.signed_url)
    assert f"{signed.scheme}://{signed.netloc}" == HTTP
    target = Path(location.native_url)
    assert _files(target) == []
    headers = {"Content-MD5": base64.b64encode(md5).decode()}
    async with client_for(sluice) as client:
        forged = signed.query.replace("signature=", "signature=0")
        answer = await client.put(f"{signed.path}?{forged}", content=data, headers=headers)
        assert answer.status_code == 403 and _files(target) == []
        await asyncio.sleep(0.05)
        expired = urlsplit(brief.signed_url)
        answer = await client.put(f"{expired.path}?{expired.query}", content=data, headers=headers)
        assert answer.status_code == 403 and "expired" in answer.text
        answer = await client.put(f"{signed.path}?{signed.query}", content=b"other bytes")
        assert answer.status_code == 422 and _files(target) == []  # nor a partial file
        answer = await client.put(f"{signed.path}?{signed.query}", content=data, headers=headers)
        assert answer.status_code == 201
    assert _files(target) == [(target.name, data)]


def _files(target: Path) -> list[tuple[str, bytes]]:
    """The files in the upload's directory, with their bytes."""
    folder = target.parent
    return sorted((f.name, f.read_bytes()) for f in folder.iterdir()) if folder.is_dir() else []
