"""`new_event_loop`: the event loop a broker runs its servers on.

uvloop's when it is installed (it is a pinned dependency; the fallback keeps a broker runnable
from a bare checkout), asyncio's otherwise. The main loop serves the gRPC APIs on `grpc.aio`; on
uvloop its callbacks cost less than on asyncio's loop, which at 64 concurrent gRPC producers
(where the master's main thread is the bottleneck) measured 8-21% more SYNC_MASTER puts per
second in alternating runs (docs/benchmarks.md). The remoting server's own loop is made here too.

Thread-safety: each call makes a new loop; a loop belongs to the thread that runs it.
"""

from __future__ import annotations

import asyncio


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
