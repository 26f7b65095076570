"""Waits for each group of the compose cluster (docker-compose.yml) to elect a master whose slaves
follow it, then prints `rocketstore status` for each group (`make cluster` runs this).

    python -m harness.compose_status --secret-file .cluster/replication_secret --wait-s 120 [--profile two-groups]

The brokers' client ports as the compose file publishes them on 127.0.0.1: broker-a's three, and
with the `two-groups` profile broker-b's two as well. Exit 0 once every group's master has every
other broker of its group as a connected slave; 1 (with the last answers) at the deadline.
"""

from __future__ import annotations

import argparse
import sys
import time

from client import AdminClient, RocketStoreError
from client.report import format_status, status_rows
from wire.auth import load_secret

PUBLISHED = ("127.0.0.1:10911", "127.0.0.1:10921", "127.0.0.1:10931")
GROUP_B = ("127.0.0.1:10941", "127.0.0.1:10951")
# The groups each profile runs, by name: their brokers' published client endpoints.
PROFILES: dict[str, dict[str, tuple[str, ...]]] = {
    "": {"broker-a": PUBLISHED},
    "two-groups": {"broker-a": PUBLISHED, "broker-b": GROUP_B},
}


def ask(endpoints: tuple[str, ...], secret: bytes) -> dict[str, dict | str]:
    answers: dict[str, dict | str] = {}
    for endpoint in endpoints:
        try:
            with AdminClient(endpoint, secret, timeout_s=3) as admin:
                answers[endpoint] = admin.status()
        except RocketStoreError as exc:
            answers[endpoint] = str(exc)
    return answers


def master_of(answers: dict[str, dict | str], brokers: int) -> dict | None:
    for status in answers.values():
        if isinstance(status, dict) and status.get("role") != "SLAVE":
            if len(status.get("slaves") or ()) >= brokers - 1:
                return status
    return None


def group_status(name: str, endpoints: tuple[str, ...], secret: bytes, deadline: float) -> str | None:
    """The group's status table once its master has every other broker as a slave; None (with
    the last answers on stderr) at the deadline."""
    answers = ask(endpoints, secret)
    while master_of(answers, len(endpoints)) is None and time.monotonic() < deadline:
        time.sleep(1)  # brokers start and elect on their own; ask again
        answers = ask(endpoints, secret)
    master = master_of(answers, len(endpoints))
    if master is None:
        print(f"{name}: no master with every slave following it yet; the brokers answer:", file=sys.stderr)
        for endpoint, answer in answers.items():
            role = answer.get("role") if isinstance(answer, dict) else answer
            print(f"  {endpoint}: {role}", file=sys.stderr)
        return None
    # The slaves' rows from their own answers, through the ports published for them (their
    # advertised endpoints are names of the compose network).
    followers: dict[str, dict | str] = {
        a["client_endpoint"]: a for a in answers.values() if isinstance(a, dict) and a is not master
    }
    return format_status(status_rows(master, followers), master)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.compose_status", description=__doc__.splitlines()[0])
    parser.add_argument("--secret-file", required=True, help="the cluster's replication (and admin) secret")
    parser.add_argument("--wait-s", type=float, default=120.0, help="how long to wait for a master (default 120)")
    parser.add_argument(
        "--profile", default="", choices=sorted(PROFILES), help="the compose profile started (default: none)"
    )
    args = parser.parse_args(argv)
    try:
        secret = load_secret(secret_file=args.secret_file)
    except (OSError, ValueError) as exc:
        parser.error(f"argument --secret-file: {exc}")
    if not secret:
        parser.error(f"argument --secret-file: {args.secret_file} is empty")
    deadline = time.monotonic() + args.wait_s
    ok = True
    for name, endpoints in PROFILES[args.profile].items():
        table = group_status(name, endpoints, secret, deadline)
        if table is None:
            ok = False
        else:
            print(table)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
