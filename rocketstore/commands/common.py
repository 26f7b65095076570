"""What every `rocketstore` subcommand shares: exit codes, the expected-failure exception, JSON
output and progress lines.

Conventions: results on stdout, logs and progress on stderr; exit status 0 when all is well, 1 when
problems were found or the job failed (`CommandError`: one clear line, no traceback), 2 for usage
errors (argparse's own), 130 when Ctrl-C stopped it (a command that streams, `produce` and
`consume`, prints its summary first). Stateless; thread-safe.
"""

from __future__ import annotations

import json
import sys
from typing import Any

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
# Stopped by Ctrl-C (SIGINT), as shells report 128 + the signal's number.
EXIT_INTERRUPTED = 130
INTERRUPTED = "interrupted (Ctrl-C)"


class CommandError(Exception):
    """An expected failure of a subcommand: printed as one line, exit status 1."""


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=False))


def print_progress(text: str) -> None:
    """A progress line, on stderr (stdout holds only results)."""
    print(text, file=sys.stderr, flush=True)
