"""The gRPC server of `sluice serve` that Flyte's clients talk to as to flyteadmin, in the
running event loop (grpc.aio), beside the HTTP server whose URL signs uploads and serves logs.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
from flyteidl.service import admin_pb2_grpc, auth_pb2_grpc, dataproxy_pb2_grpc

from sluice.errors import InvalidArgumentError
from sluice.flyteadmin.calls import Caller
from sluice.flyteadmin.entities import EntityRpcs
from sluice.flyteadmin.executions import ExecutionRpcs
from sluice.flyteadmin.projects import AuthMetadata, DataProxy, ProjectRpcs
from sluice.service import Sluice

DEFAULT_PORT = 8089
"""flyteadmin's own gRPC port."""
MAX_MESSAGE = 20 * 1024 * 1024
"""flytekit's limit on what it receives (and flyteadmin's)."""
STOP_GRACE = 3.0


class AdminService(
    EntityRpcs,
    ExecutionRpcs,
    ProjectRpcs,
    admin_pb2_grpc.AdminServiceServicer,  # type: ignore[misc]
):
    """flyteadmin's AdminService: what pyflyte, FlyteRemote and flytectl call. RPCs not
    implemented here answer UNIMPLEMENTED (the generated base class)."""

    def __init__(self, caller: Caller, http_url: str) -> None:
        self.caller = caller
        self.http_url = http_url


@dataclass(frozen=True)
class FlyteListening:
    endpoint: str
    """host:port, what `admin.endpoint` of a flytekit config names (dns:///host:port)."""
    needs_token: bool


def _bind(server: Any, host: str, port: int, fall_forward: int) -> int:
    """Bind the first free port of port .. port + fall_forward; the port bound."""
    for candidate in range(port, port + fall_forward + 1):
        address = f"[{host}]:{candidate}" if ":" in host else f"{host}:{candidate}"
        try:
            bound: int = int(server.add_insecure_port(address))
        except RuntimeError as exc:
            error = f"{exc}"
            bound = 0
        else:
            error = "the port is taken"
        if bound:
            return bound
    raise InvalidArgumentError(f"cannot listen on {host}:{port} (Flyte gRPC): {error}")


@contextlib.asynccontextmanager
async def flyteadmin_server(
    sluice: Sluice,
    host: str,
    port: int,
    *,
    http_url: str,
    token_required: bool,
    fall_forward: int = 0,
) -> AsyncIterator[FlyteListening]:
    """Serve Flyte's gRPC API on host:port for the block (port 0: any free port; with
    `fall_forward`, the next free port of the `fall_forward` after a taken one)."""
    options = [
        ("grpc.max_receive_message_length", MAX_MESSAGE),
        ("grpc.max_send_message_length", MAX_MESSAGE),
        ("grpc.so_reuseport", 0),
        # flytekit pings every 30 s to keep its channel alive; a server refusing pings that
        # often answers GOAWAY "too_many_pings"
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
    ]
    server = grpc.aio.server(options=options)
    caller = Caller(sluice, token_required=token_required)
    admin_pb2_grpc.add_AdminServiceServicer_to_server(AdminService(caller, http_url), server)
    dataproxy_pb2_grpc.add_DataProxyServiceServicer_to_server(DataProxy(caller, http_url), server)
    auth_pb2_grpc.add_AuthMetadataServiceServicer_to_server(AuthMetadata(http_url), server)
    bound = _bind(server, host, port, fall_forward)
    await server.start()
    try:
        shown = f"[{host}]" if ":" in host else host
        yield FlyteListening(f"{shown}:{bound}", needs_token=token_required)
    finally:
        await server.stop(STOP_GRACE)
