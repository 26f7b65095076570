"""`Repeating`: one round of background work run again and again on the event loop (transaction
check-backs, timer deliveries), a pause before each round. A round that raises is logged and the
next one runs; `stop` cancels the loop and waits for it. Thread-safety: one event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("rocketstore.broker")


class Repeating:
    def __init__(self, round_once: Callable[[], Awaitable[object]], pause_s: Callable[[], float], what: str) -> None:
        self._round = round_once
        self._pause_s = pause_s
        self._what = what
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._pause_s())
            try:
                await self._round()
            except Exception:
                log.exception("%s round failed; the next round tries again", self._what)
