"""`port_for_later`: a TCP port on this machine for a server that starts (or restarts) later.

A port from bind(0) comes from the kernel's ephemeral range (`net.ipv4.ip_local_port_range`);
once the probing socket closes, any outgoing connect() on the machine may take it as its local
port before the server binds it, and the server then fails with "address in use". A port below
that range is never handed to a connect(), so it stays free until something binds it on
purpose. Local etcd keeps its ports across restarts for that reason, and tests reserve ports for
brokers they start later the same way.

Thread-safety: stateless; any thread.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Collection
from pathlib import Path

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_DEFAULT_EPHEMERAL_LOW = 32768  # Linux's default when the range cannot be read
_SPAN = 12000  # how far below the ephemeral range to look
_TRIES = 200


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range."""
    try:
        return int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _DEFAULT_EPHEMERAL_LOW


def port_for_later(host: str = "127.0.0.1", avoid: Collection[int] = ()) -> int:
    """A TCP port free on `host` now, below the ephemeral range and not in `avoid` (ports already
    picked for other servers that have not bound them yet); RuntimeError when none of a few
    hundred random candidates is free."""
    low = ephemeral_low()
    candidates = [p for p in range(max(1024, low - _SPAN), low) if p not in avoid]
    random.shuffle(candidates)
    for port in candidates[:_TRIES]:
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port on {host} below the ephemeral range (which starts at {low})")
