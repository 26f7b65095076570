"""Waits for the compose cluster (docker-compose.yml) to elect a master whose slaves follow it,
then prints `rocketstore status` for the group (`make cluster` runs this).

    python -m harness.compose_status --secret-file .cluster/replication_secret --wait-s 120

The brokers' client ports as the compose file publishes them on 127.0.0.1. Exit 0 once a master
has every other broker as a connected slave; 1 (with the last answers) at the deadline.
"""

from __future__ import annotations

import argparse
import sys
import time

from client import AdminClient, RocketStoreError
from client.report import format_status, status_rows
from wire.auth import load_secret

PUBLISHED = ("127.0.0.1:10911", "127.0.0.1:10921", "127.0.0.1:10931")


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.compose_status", description=__doc__.splitlines()[0])
    parser.add_argument("--secret-file", required=True, help="the cluster's replication (and admin) secret")
    parser.add_argument("--wait-s", type=float, default=120.0, help="how long to wait for a master (default 120)")
    args = parser.parse_args(argv)
    try:
        secret = load_secret(secret_file=args.secret_file)
    except (OSError, ValueError) as exc:
        parser.error(f"argument --secret-file: {exc}")
    if not secret:
        parser.error(f"argument --secret-file: {args.secret_file} is empty")
    deadline = time.monotonic() + args.wait_s
    answers = ask(PUBLISHED, secret)
    while master_of(answers, len(PUBLISHED)) is None and time.monotonic() < deadline:
        time.sleep(1)  # brokers start and elect on their own; ask again
        answers = ask(PUBLISHED, secret)
    master = master_of(answers, len(PUBLISHED))
    if master is None:
        print("no master with every slave following it yet; the brokers answer:", file=sys.stderr)
        for endpoint, answer in answers.items():
            role = answer.get("role") if isinstance(answer, dict) else answer
            print(f"  {endpoint}: {role}", file=sys.stderr)
        return 1
    # The slaves' rows from their own answers, through the ports published for them (their
    # advertised endpoints are names of the compose network).
    followers: dict[str, dict | str] = {
        a["client_endpoint"]: a for a in answers.values() if isinstance(a, dict) and a is not master
    }
    print(format_status(status_rows(master, followers), master))
    return 0


if __name__ == "__main__":
    sys.exit(main())
