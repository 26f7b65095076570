"""How the broker's gRPC servers bind their ports and name the endpoints they advertise.

`bind` turns gRPC's two ways of failing to listen (an exception, or port 0 returned) into one
`ConfigError` that names the config key; `host_port` writes an IPv6 host in brackets.

Thread-safety: plain functions; `bind` is called by whoever owns the server, before it starts.
"""

from __future__ import annotations

import grpc

from store.properties import ConfigError


def host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind(
    server: grpc.Server | grpc.aio.Server,
    host: str,
    port: int,
    credentials: grpc.ServerCredentials | None,
    what: str,
    key: str,
) -> int:
    """Add a listening port to `server` (TLS when `credentials`): the port bound, or ConfigError
    naming `what` and the config `key`."""
    address = host_port(host, port)
    try:
        bound = (
            server.add_secure_port(address, credentials)
            if credentials is not None
            else server.add_insecure_port(address)
        )
    except RuntimeError as exc:
        raise ConfigError(f"cannot listen for the {what} on {address} ({key}): {exc}") from None
    if bound == 0:
        raise ConfigError(f"cannot listen for the {what} on {address} ({key}): address in use or not local")
    return bound
