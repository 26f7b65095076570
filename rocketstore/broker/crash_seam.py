"""A test seam: the crash tests make a broker die inside a CommitLog cut.

With `ROCKETSTORE_TEST_CRASH_IN_TRUNCATION=<step>` in its environment (a step of
`store.slave_truncation.STEPS`), the broker exits with status `CRASH_EXIT_STATUS` at once when a
truncation reaches that step, as a power cut there would leave it (no flush, no clean shutdown).
Without the variable nothing is installed.

Thread-safety: `install` runs once, before the store starts; the hook runs on the thread that cuts.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping

from store import MessageStore

log = logging.getLogger("rocketstore.broker")

CRASH_IN_TRUNCATION_ENV = "ROCKETSTORE_TEST_CRASH_IN_TRUNCATION"
CRASH_EXIT_STATUS = 86


def install(store: MessageStore, environ: Mapping[str, str] = os.environ) -> None:
    """Make `store` crash the process at the step `environ` names, if it names one."""
    step = environ.get(CRASH_IN_TRUNCATION_ENV)
    if step:
        store.truncation_hook = _crash_at(step)


def _crash_at(step: str) -> Callable[[str], None]:
    def hook(name: str) -> None:
        if name == step:
            log.error("crashing on purpose inside a CommitLog cut (%s=%s)", CRASH_IN_TRUNCATION_ENV, step)
            logging.shutdown()
            os._exit(CRASH_EXIT_STATUS)

    return hook
