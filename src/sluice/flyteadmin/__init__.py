"""Flyte's gRPC API in `sluice serve`: what flyteadmin answers to pyflyte, FlyteRemote and
flytectl (AdminService, DataProxyService, AuthMetadataService), as an adapter over the service
layer (service/flyte): each RPC parses its request, calls one verb, renders protobufs.

Needs the `flyte` extra (grpcio and flyteidl come with flytekit); `sluice serve` loads it only
when it serves the Flyte API.
"""
