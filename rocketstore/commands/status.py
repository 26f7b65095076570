"""`rocketstore status` and `rocketstore health`, over the admin API.

status: the asked broker and, for a master, each of its slaves (each asked in turn at its client
endpoint) as one table (`client.report`); exit 1 when a slave is unreachable or unfit, or a slave
is cut off from its master. health: exit 0 when the broker answers its admin status call, with one
line of its role and offsets (its peers are not asked; container health checks run it). With
`-c broker.conf` it asks the broker that file describes: its listenPort on this machine and the
admin secret the file names; with `--broker-args FILE`, the broker started with the arguments in
FILE (NUL-separated, `-c` and `--key=value` as `rocketstore broker` takes them: the image's entry
point writes them), so one health check serves every broker whatever its port.

Runs on the command's main thread.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from client import AdminClient, RocketStoreError
from client.report import format_status, status_problems, status_rows

from .common import EXIT_OK, EXIT_PROBLEMS, print_json
from .connection import add_connection_arguments, admin_secret, with_admin


def status_arguments(p: argparse.ArgumentParser) -> None:
    add_connection_arguments(p, admin=True)


def health_arguments(p: argparse.ArgumentParser) -> None:
    status_arguments(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "-c",
        "--config",
        metavar="FILE",
        help="ask the broker this broker.conf describes (its listenPort here, the admin secret it names) "
        "instead of --endpoint and --secret-file",
    )
    which.add_argument(
        "--broker-args",
        metavar="FILE",
        help="ask the broker started with the arguments in FILE (NUL-separated: -c FILE and --key=value, "
        "as `rocketstore broker` took them)",
    )


def _broker_started_with(args: argparse.Namespace) -> tuple[str | None, list[str]]:
    """The broker.conf and --key=value overrides of `--broker-args` or `-c`."""
    if args.config is not None:
        if not Path(args.config).is_file():
            args.parser.error(f"argument -c/--config: {args.config}: no such file")
        return args.config, []
    try:
        words = [w for w in Path(args.broker_args).read_text().split("\0") if w]
    except OSError as exc:
        args.parser.error(f"argument --broker-args: {exc}")
    started = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    started.add_argument("-c", "--config")
    known, overrides = started.parse_known_args(words)
    return known.config, overrides


def _from_broker_conf(args: argparse.Namespace) -> bytes:
    """Points `args.endpoint` at the broker `-c` or `--broker-args` describes; its admin secret."""
    from client import parse_endpoint
    from rocketstore.broker.config import load_broker_config, load_secrets
    from store.properties import parse_overrides

    config, overrides = _broker_started_with(args)
    configs = load_broker_config(config, parse_overrides(overrides))
    broker = configs.broker
    # A broker listening on every interface answers on the loopback.
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(broker.host, broker.host)
    args.endpoint = parse_endpoint(f"[{host}]:{broker.listen_port}" if ":" in host else f"{host}:{broker.listen_port}")
    return load_secrets(configs).admin


def _asked_status(args: argparse.Namespace) -> tuple[dict[str, Any], bytes]:
    """The admin status of the broker `--endpoint` names, and the admin secret used to ask."""
    secret = admin_secret(args)
    return with_admin(args, lambda admin: admin.status(), secret), secret


def run_status(args: argparse.Namespace) -> int:
    asked, secret = _asked_status(args)
    slaves: dict[str, dict[str, Any] | str] = {}
    if asked["role"] != "SLAVE":
        for snap in asked.get("slaves") or ():
            endpoint = snap["client_endpoint"]
            if not endpoint or endpoint in slaves:
                continue
            try:
                with AdminClient(
                    endpoint, secret, timeout_s=min(args.request_timeout_s, 5.0), tls_ca_file=args.tls_ca_file
                ) as slave_admin:
                    slaves[endpoint] = slave_admin.status()
            except RocketStoreError as exc:
                slaves[endpoint] = str(exc)
    rows = status_rows(asked, slaves)
    problems = status_problems(rows, asked)
    if args.json:
        print_json({"asked": asked, "brokers": rows, "problems": problems})
    else:
        print(format_status(rows, asked))
    return EXIT_PROBLEMS if problems else EXIT_OK


def run_health(args: argparse.Namespace) -> int:
    """The broker answers: one line with its role and offsets, exit 0 (its peers are not asked)."""
    if args.config is not None or args.broker_args is not None:
        asked = with_admin(args, lambda admin: admin.status(), _from_broker_conf(args))
    else:
        asked, _ = _asked_status(args)
    if args.json:
        print_json({"role": asked["role"], "max_offset": asked["max_offset"], "epoch": asked.get("epoch", 0)})
    else:
        print(f"{asked['role']} max offset {asked['max_offset']} epoch {asked.get('epoch', 0)}")
    return EXIT_OK
