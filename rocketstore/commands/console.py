"""`rocketstore console` and `rocketstore console-account`: the operators' web console (the
`console` package) and its accounts file.

    rocketstore console --endpoint HOST:PORT[;HOST:PORT...] [--secret-file F] [--accounts FILE]
        [--bind ADDRESS] [--port N] [--sample-interval-s S] [--history-minutes M] [--audit-log FILE]
    rocketstore console --local-pair [DIR]          # a SYNC_MASTER and its slave started for it
    rocketstore console-account --accounts FILE --name NAME [--role admin|read-only] [--password-stdin]

`console` serves until Ctrl-C or SIGTERM; its log (and the audit log of every change, with the
account) goes to stderr, and the audit log also to `--audit-log` when given. `console-account`
adds an account or changes its role and password; the password is asked twice on the terminal,
or read as one line from stdin with `--password-stdin`, and never appears on a command line.
Both need the `console` extra (Flask, waitress). Run on the command's main thread.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import sys
from pathlib import Path

from .args import seconds, whole_number
from .common import EXIT_OK, CommandError
from .connection import SECRET_ENV, add_connection_arguments, admin_secret, check_tls_file

EXTRA_HINT = "the console needs the `console` extra: pip install 'rocketstore[console]'"


def _require_extra() -> None:
    try:
        import flask  # noqa: F401
        import waitress  # noqa: F401
    except ImportError as exc:
        raise CommandError(f"{EXTRA_HINT} ({exc})") from None


def _port(text: str) -> int:
    return whole_number(text, 0, 65535)


def console_arguments(p: argparse.ArgumentParser) -> None:
    add_connection_arguments(p, admin=True, several=True, json=False)
    p.add_argument(
        "--accounts",
        type=Path,
        metavar="FILE",
        help="accounts with hashed passwords (rocketstore console-account); without: log in as admin with the "
        f"admin secret (--secret-file or {SECRET_ENV})",
    )
    p.add_argument("--bind", default="127.0.0.1", metavar="ADDRESS", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8080, metavar="N", help="port (default 8080; 0: the OS chooses)")
    p.add_argument(
        "--sample-interval-s", type=seconds, default=5.0, metavar="S", help="how often brokers are polled (default 5)"
    )
    p.add_argument(
        "--history-minutes", type=seconds, default=15.0, metavar="M", help="what the charts keep (default 15)"
    )
    p.add_argument(
        "--session-idle-minutes", type=seconds, default=60.0, metavar="M", help="log out after M unused minutes"
    )
    p.add_argument("--audit-log", type=Path, metavar="FILE", help="append the audit log to FILE too")
    p.add_argument(
        "--local-pair",
        nargs="?",
        const="",
        metavar="DIR",
        help="start a SYNC_MASTER and its slave on 127.0.0.1 first (files in DIR, else a temporary directory) "
        "and serve the console on them, instead of --endpoint and --secret-file; both stop with the console",
    )


def run_console(args: argparse.Namespace) -> int:
    _require_extra()
    check_tls_file(args)
    if args.local_pair is not None:
        return _on_a_local_pair(args)
    return _serve(args, admin_secret(args))


def _on_a_local_pair(args: argparse.Namespace) -> int:
    """The console on a master and a slave of its own (`demos.local_brokers`), like `demo`'s."""
    import tempfile

    from client import parse_endpoint
    from demos.local_brokers import BrokerStartError, LocalCluster

    base = Path(args.local_pair) if args.local_pair else Path(tempfile.mkdtemp(prefix="rocketstore-console-"))
    cluster = LocalCluster(base, master_role="SYNC_MASTER", flush_disk_type="SYNC_FLUSH", slaves=1)
    try:
        cluster.start()
        args.endpoint = [parse_endpoint(b.client_endpoint) for b in cluster.brokers]
        print(
            f"local pair in {base}: master {cluster.master.client_endpoint}, slave "
            f"{cluster.slave_brokers[0].client_endpoint}; the admin secret is in {cluster.secret_file}",
            flush=True,
        )
        return _serve(args, cluster.admin_secret())
    except BrokerStartError as exc:
        raise CommandError(f"the local pair did not start: {exc}") from None
    finally:
        cluster.stop()


def _serve(args: argparse.Namespace, secret: bytes) -> int:
    from console.accounts import Accounts, AccountsError
    from console.config import ConsoleConfig
    from console.serve import serve

    try:
        accounts = Accounts.from_file(args.accounts) if args.accounts else Accounts.from_secret(secret)
        config = ConsoleConfig(
            endpoints=tuple(e.target for e in args.endpoint),
            admin_secret=secret,
            accounts_file=args.accounts,
            bind_address=args.bind,
            port=args.port,
            sample_interval_ms=int(args.sample_interval_s * 1000),
            history_ms=int(args.history_minutes * 60_000),
            request_timeout_s=args.request_timeout_s,
            tls_ca_file=args.tls_ca_file,
            session_idle_ms=int(args.session_idle_minutes * 60_000),
        )
    except (AccountsError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    _log_to_stderr(args.audit_log)
    serve(config, accounts, ready=lambda line: print(line, flush=True))
    return EXIT_OK


def _log_to_stderr(audit_file: Path | None) -> None:
    """The console's own log, its events and the audit log at INFO on stderr (and the audit log to
    `audit_file`), whatever -v says of the rest."""
    logger = logging.getLogger("rocketstore.console")
    logger.setLevel(logging.INFO)
    if not logging.getLogger().isEnabledFor(logging.INFO):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    if audit_file is not None:
        try:
            to_file = logging.FileHandler(audit_file, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"--audit-log {audit_file}: {exc.strerror}") from None
        to_file.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        logging.getLogger("rocketstore.console.audit").addHandler(to_file)


def account_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--accounts", type=Path, required=True, metavar="FILE", help="the accounts file (made when missing)")
    p.add_argument("--name", required=True, help="the account's name")
    p.add_argument("--role", choices=("admin", "read-only"), default="read-only", help="default read-only")
    p.add_argument("--password-stdin", action="store_true", help="read the password as one line from stdin")


def run_account(args: argparse.Namespace) -> int:
    _require_extra()
    from console.accounts import AccountsError, Role, set_account

    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass(f"password for {args.name}: ")
        if getpass.getpass("again: ") != password:
            raise CommandError("the two passwords differ; nothing changed")
    try:
        new = set_account(args.accounts, args.name, Role.parse(args.role), password)
    except (AccountsError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    print(f"{'added' if new else 'changed'} account {args.name} ({args.role}) in {args.accounts}")
    return EXIT_OK
