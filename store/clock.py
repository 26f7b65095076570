"""The wall clock every component takes as its default `clock_ms`: Unix time in milliseconds.
Components take the clock as an argument so that tests can pass a fake one. Thread-safe."""

from __future__ import annotations

import time


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000
