"""How a subcommand reaches a broker: its `--endpoint` (one, or several of one broker group;
default the ROCKETSTORE_ENDPOINT environment variable, else 127.0.0.1:10911), `--json`,
`--tls-ca-file`, `--request-timeout-s` and, for the admin API, `--secret-file` or the
ROCKETSTORE_ADMIN_SECRET environment variable (the secret never appears on a command line or in
output); and an admin call run with the client's errors turned into one-line `CommandError`s.

Runs on the command's main thread; stateless.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from client import DEFAULT_ENDPOINT, AdminClient, Endpoint, EndpointError, RocketStoreError, parse_endpoint
from client.convert import MAX_BATCH

from .args import parsed, seconds, whole_number
from .common import CommandError

SECRET_ENV = "ROCKETSTORE_ADMIN_SECRET"
ENDPOINT_ENV = "ROCKETSTORE_ENDPOINT"
T = TypeVar("T")


# -- argument types ----------------------------------------------------------------------------


def endpoint_arg(text: str) -> Endpoint:
    return parsed(text, parse_endpoint, errors=(EndpointError,))


class EndpointGroup(tuple):
    """produce's `--endpoint`: one endpoint, or several of one broker group in the order given
    (the producer follows the group's master among them)."""

    __slots__ = ()

    @property
    def target(self) -> str:
        return ";".join(e.target for e in self)


def endpoint_group(text: str) -> EndpointGroup:
    parts = [part for part in text.replace(",", ";").split(";") if part.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"no endpoint in {text!r} (expected HOST:PORT[;HOST:PORT...])")
    group: list[Endpoint] = []
    for part in parts:
        one = endpoint_arg(part)
        if one not in group:
            group.append(one)
    return EndpointGroup(group)


def batch_size(text: str) -> int:
    """Messages in one request (or requests in flight): 1 to the client's batch limit."""
    return whole_number(text, 1, MAX_BATCH)


# -- the options -------------------------------------------------------------------------------


def default_endpoint() -> str:
    """What --endpoint is when not given: $ROCKETSTORE_ENDPOINT, else the default listenPort here."""
    return os.environ.get(ENDPOINT_ENV, "").strip() or DEFAULT_ENDPOINT


def add_connection_arguments(
    p: argparse.ArgumentParser, *, admin: bool = False, several: bool = False, json: bool = True
) -> None:
    default = f"${ENDPOINT_ENV}, else {DEFAULT_ENDPOINT}"
    if several:
        p.add_argument(
            "--endpoint",
            type=endpoint_group,
            default=default_endpoint(),
            metavar="HOST:PORT[;HOST:PORT...]",
            help=f"the broker's client endpoint, or several of one broker group separated by ';' or ',' "
            f"to follow its master across failovers (default {default}; IPv6 as [::1]:10911)",
        )
    else:
        p.add_argument(
            "--endpoint",
            type=endpoint_arg,
            default=default_endpoint(),
            metavar="HOST:PORT",
            help=f"the broker's client endpoint (default {default}; IPv6 as [::1]:10911)",
        )
    if json:
        p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("--tls-ca-file", metavar="FILE", help="use TLS, trusting this CA certificate")
    p.add_argument(
        "--request-timeout-s", type=seconds, default=10.0, metavar="S", help="deadline of each call (default 10)"
    )
    if admin:
        p.add_argument(
            "--secret-file",
            metavar="FILE",
            help=f"file holding the broker's admin secret (default: the {SECRET_ENV} variable)",
        )


def admin_action(actions, name: str, text: str) -> argparse.ArgumentParser:
    """An ACTION subparser of an admin command (`topic create`, `consumer reset`, ...) with the
    connection options."""
    parser = actions.add_parser(name, help=text, description=text)
    add_connection_arguments(parser, admin=True)
    parser.set_defaults(parser=parser)
    return parser


# -- using them --------------------------------------------------------------------------------


def check_tls_file(args: argparse.Namespace) -> None:
    if args.tls_ca_file is not None and not Path(args.tls_ca_file).is_file():
        args.parser.error(f"argument --tls-ca-file: {args.tls_ca_file}: no such file")


def admin_secret(args: argparse.Namespace, environ: dict[str, str] | None = None) -> bytes:
    """The admin secret from --secret-file or the environment; a usage error when neither."""
    from wire.auth import load_secret

    env = os.environ if environ is None else environ
    try:
        if args.secret_file is not None:
            if not Path(args.secret_file).is_file():
                args.parser.error(f"argument --secret-file: {args.secret_file}: no such file")
            secret = load_secret(secret_file=args.secret_file)
        else:
            secret = load_secret(secret=env.get(SECRET_ENV, ""))
    except ValueError as exc:
        raise CommandError(f"admin secret: {exc}") from None
    if not secret:
        source = f"{args.secret_file} is empty" if args.secret_file else f"no --secret-file and {SECRET_ENV} is not set"
        args.parser.error(f"the admin API needs the broker's shared secret: {source}")
    return secret


def failure(exc: RocketStoreError) -> CommandError:
    return CommandError(str(exc))


def with_admin(args: argparse.Namespace, work: Callable[[AdminClient], T], secret: bytes | None = None) -> T:
    """`work` on an admin client of `--endpoint` (signing with `secret`, else the one the options
    give); the client's errors (and a ValueError of bad input it found) become CommandErrors."""
    secret = admin_secret(args) if secret is None else secret
    check_tls_file(args)
    try:
        with AdminClient(
            args.endpoint, secret, timeout_s=args.request_timeout_s, tls_ca_file=args.tls_ca_file
        ) as admin:
            return work(admin)
    except RocketStoreError as exc:
        raise failure(exc) from None
    except ValueError as exc:
        raise CommandError(str(exc)) from None
