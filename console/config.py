"""`ConsoleConfig`: what the console serves on and whom it asks. A frozen value, validated when
made; the admin secret stays out of its repr.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_PORT = 8080


@dataclass(frozen=True)
class ConsoleConfig:
    # Client endpoints of the brokers to start from (host:port): one of any group is enough.
    endpoints: tuple[str, ...]
    admin_secret: bytes = field(repr=False)
    # Accounts with hashed passwords (`console.accounts`); None: log in with the admin secret.
    accounts_file: Path | None = None
    bind_address: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    sample_interval_ms: int = 5_000
    history_ms: int = 15 * 60_000
    request_timeout_s: float = 5.0
    tls_ca_file: str | None = None
    # A session unused this long must log in again.
    session_idle_ms: int = 60 * 60_000

    def __post_init__(self) -> None:
        if not self.endpoints:
            raise ValueError("the console needs at least one broker endpoint")
        if not self.admin_secret:
            raise ValueError("the console needs the brokers' admin secret")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {self.port}")
        if not self.bind_address:
            raise ValueError("bind_address cannot be empty")
        if not 200 <= self.sample_interval_ms <= 600_000:
            raise ValueError(f"sample_interval_ms must be in 200..600000, got {self.sample_interval_ms}")
        if self.history_ms < 2 * self.sample_interval_ms:
            raise ValueError("history_ms must hold at least two samples")
        if not self.request_timeout_s > 0:
            raise ValueError(f"request_timeout_s must be positive, got {self.request_timeout_s}")
        if self.session_idle_ms <= 0:
            raise ValueError(f"session_idle_ms must be positive, got {self.session_idle_ms}")

    @property
    def loopback_only(self) -> bool:
        """Whether the bind address keeps the console on this machine."""
        if self.bind_address == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.bind_address).is_loopback
        except ValueError:
            return False
