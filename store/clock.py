"""The two clocks components take as arguments (so that tests can pass fake ones), in
milliseconds. Thread-safe.

- `wall_clock_ms`: Unix time. For what a user or another machine reads: store timestamps,
  "connected at", "last synced at", deadlines shared with a component that stamps with it.
- `monotonic_ms`: never goes back and does not follow changes to the system time. For how long
  something took or has been silent (housekeeping, heartbeats, nonce lifetimes, leases): a wall
  clock stepped back by N seconds would hide a silent peer for N seconds, and one stepped forward
  would declare live peers silent.
"""

from __future__ import annotations

import time


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000
