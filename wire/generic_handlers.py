"""Services added to a `grpc.aio` server through generic handlers only.

The `add_*Servicer_to_server` functions that grpcio-tools generates register a service twice: as a
generic handler (`add_generic_rpc_handlers`) and as registered methods
(`add_registered_method_handlers`). A `grpc.aio` server keeps one pending request per registered
method, plus one for everything else, and awaits `asyncio.wait` over all of them for every call it
accepts: each call adds and removes a done-callback on every pending request (18 for the
MessagingService). Served through the generic handler alone the server keeps one pending request,
and every method still resolves (the generic handler serves the same table). `bench.put_switches
--transport grpc` measured 1.04-1.10x the calls per second at 64 clients and 1.04-1.05x at 8, the
master's CPU per message 3-5% lower (docs/benchmarks.md, "eleventh round").

`generic_only(server)` is what to pass to a generated `add_*_to_server` instead of the server.

Thread-safety: as the server's own registration calls (before the server starts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc


class _GenericOnly:
    __slots__ = ("_server",)

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        """Dropped: the generic handler added beside them serves the same methods."""


def generic_only(server: grpc.aio.Server) -> Any:
    """`server` as a generated `add_*_to_server` sees it, registering generic handlers only."""
    return _GenericOnly(server)
