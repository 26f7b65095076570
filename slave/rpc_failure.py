"""How the slave's adapters describe a failed call to their master: the status code (None when
the error carries none) and "CODE: details" for logs and status. Over TLS, gRPC reports a refused
certificate as a bare UNAVAILABLE ("Socket closed", "handshake failed"): that is named for what it
most likely is, with the settings to check; so is an address that is another port of the master
(its client or metrics port: `wire.ports`), when the caller names the address. Stateless,
thread-safe."""

from __future__ import annotations

import grpc

from wire.ports import REPLICATION, wrong_port

# What gRPC's details say when the TLS handshake fails or the peer drops the connection during it.
_TLS_SIGNS = ("socket closed", "handshake", "ssl", "certificate", "connection reset")


def describe(exc: grpc.RpcError, *, tls: bool = False, address: str = "") -> tuple[grpc.StatusCode | None, str]:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    text = f"{code.name if code is not None else 'UNKNOWN'}: {details}"
    hint = wrong_port(code.name, details or "", f"haMasterAddress {address}", REPLICATION) if address and code else None
    if hint and not tls:
        return code, f"{hint} ({text})"
    if tls and code is grpc.StatusCode.UNAVAILABLE and any(sign in (details or "").lower() for sign in _TLS_SIGNS):
        text = (
            "the TLS handshake with the master failed: it most likely refused this slave's certificate "
            "(haTlsCertFile must be signed by a CA in the master's haTlsCaFile), or this slave does not trust "
            f"the master's (haTlsCaFile) ({text})"
        )
    return code, text
