"""Secrets and TLS credentials of RocketStore's own endpoints: `load_secret` reads the shared
secrets of replication and the admin API (whose signatures are `wire/admin_auth.py`; replication's
mutual authentication is `ha/peer_auth.py`), and the mutual TLS credentials of replication and the
client API. The secret itself never crosses the wire and is never logged. Stateless, thread-safe.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import grpc

MIN_SECRET_BYTES = 16


def wall_clock_ms() -> int:
    # Not store.clock's: the client imports this module and must not load the store package.
    return time.time_ns() // 1_000_000


def check_private_file(path: str | os.PathLike[str], what: str) -> None:
    """ValueError when users other than the file's owner may read or write it (like ssh with a
    private key); OSError when it cannot be asked."""
    mode = os.stat(path).st_mode
    if mode & 0o077:
        raise ValueError(
            f"{what} {path} is accessible by group or others (mode {mode & 0o777:o}): run chmod 600 {path}"
        )


def load_secret(secret: str = "", secret_file: str = "") -> bytes:
    """The shared secret from the config: inline, or the first line of a file. Empty when
    neither is set. ValueError for one shorter than MIN_SECRET_BYTES (it would be guessable) and
    for a file that users other than its owner may read or write (like ssh with a private key)."""
    if secret_file:
        check_private_file(secret_file, "the secret file")
        text = Path(secret_file).read_text(encoding="utf-8").strip()
    else:
        text = secret
    raw = text.encode("utf-8")
    if raw and len(raw) < MIN_SECRET_BYTES:
        raise ValueError(f"a shared secret needs at least {MIN_SECRET_BYTES} bytes")
    return raw


# -- mutual TLS ----------------------------------------------------------------------------------


def _read(path: str) -> bytes:
    return Path(path).read_bytes()


def server_credentials(cert_file: str, key_file: str, ca_file: str = "") -> grpc.ServerCredentials:
    """TLS for a server; with `ca_file`, clients must present a certificate signed by it."""
    return grpc.ssl_server_credentials(
        [(_read(key_file), _read(cert_file))],
        root_certificates=_read(ca_file) if ca_file else None,
        require_client_auth=bool(ca_file),
    )


def channel_credentials(ca_file: str, cert_file: str = "", key_file: str = "") -> grpc.ChannelCredentials:
    """TLS for a client trusting `ca_file`; with a certificate and key, it presents them."""
    return grpc.ssl_channel_credentials(
        root_certificates=_read(ca_file),
        private_key=_read(key_file) if key_file else None,
        certificate_chain=_read(cert_file) if cert_file else None,
    )
