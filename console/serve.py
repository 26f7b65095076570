"""Serving the console: waitress (a production WSGI server, pure Python, a pool of worker threads)
on `bind_address:port` and nothing else, the sampler thread, and a clean stop on SIGINT or
SIGTERM.

When it listens it prints one line, `rocketstore console ready: http://HOST:PORT/ ...` (the port
the OS chose when `port` is 0), on stdout. A bind address beyond loopback gets a warning in the
log: the console speaks plain HTTP, so anything else should sit behind a TLS proxy.

Runs on the calling thread until stopped.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from types import FrameType

from waitress import create_server

from .accounts import Accounts
from .config import ConsoleConfig
from .fleet import Fleet
from .history import History
from .sampler import Sampler
from .web import create_app

log = logging.getLogger("rocketstore.console")


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def serve(config: ConsoleConfig, accounts: Accounts, *, ready: Callable[[str], None] = print) -> None:
    fleet = Fleet(
        config.endpoints, config.admin_secret, timeout_s=config.request_timeout_s, tls_ca_file=config.tls_ca_file
    )
    sampler = Sampler(fleet, History(config.history_ms), config.sample_interval_ms)
    try:
        app = create_app(config, sampler, accounts)
        server = create_server(
            app,
            host=config.bind_address,
            port=config.port,
            threads=8,
            ident="rocketstore-console",
            clear_untrusted_proxy_headers=True,
            max_request_body_size=1024 * 1024,
        )
        host = config.bind_address if ":" not in config.bind_address else f"[{config.bind_address}]"
        port = server.effective_port
        if not config.loopback_only:
            log.warning(
                "the console listens on %s, beyond this machine, in plain HTTP: put a TLS proxy in front of it",
                config.bind_address,
            )
        sampler.start()
        previous = signal.signal(signal.SIGTERM, _stop)
        ready(
            f"rocketstore console ready: http://{host}:{port}/ (brokers {', '.join(config.endpoints)}; "
            f"log-in: {'the accounts file' if not accounts.uses_secret else 'admin with the admin secret'})"
        )
        try:
            server.run()  # waitress ends its loop on KeyboardInterrupt (SIGINT, or SIGTERM here)
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
            server.close()
            log.info("console stopped")
    finally:
        sampler.stop()
        fleet.close()
