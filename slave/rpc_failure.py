"""How the slave's adapters describe a failed call to their master: the status code (None when
the error carries none) and "CODE: details" for logs and status. Stateless, thread-safe."""

from __future__ import annotations

import grpc


def describe(exc: grpc.RpcError) -> tuple[grpc.StatusCode | None, str]:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return code, f"{code.name if code is not None else 'UNKNOWN'}: {details}"
