"""`new_event_loop`: the event loop a broker runs its servers on.

uvloop's when it is installed (it is a pinned dependency; the fallback keeps a broker runnable
from a bare checkout), asyncio's otherwise. The gRPC APIs run on `grpc.aio` on such a loop; on
uvloop its callbacks cost less than on asyncio's loop, which at 64 concurrent gRPC producers
(where the loop's thread is the bottleneck) measured 8-21% more SYNC_MASTER puts per second in
alternating runs (docs/benchmarks.md).

`LoopThread`: such a loop running forever on a thread of its own, made before anything serves on
it (a broker's `broker-loop`, which serves the client API, remoting and replication under
haStreamOnEventLoop; otherwise the remoting server's own loop).

Thread-safety: each call makes a new loop; a loop belongs to the thread that runs it. A
`LoopThread` is made and stopped from any one thread.
"""

from __future__ import annotations

import asyncio
import threading


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LoopThread:
    """`new_event_loop()` running forever on a daemon thread named `name`; `loop` once made."""

    def __init__(self, name: str) -> None:
        ready = threading.Event()
        made: list[asyncio.AbstractEventLoop] = []

        def run() -> None:
            loop = new_event_loop()
            asyncio.set_event_loop(loop)
            made.append(loop)
            loop.call_soon(ready.set)
            try:
                loop.run_forever()
            finally:
                loop.close()

        self.thread = threading.Thread(target=run, name=name, daemon=True)
        self.thread.start()
        ready.wait()
        self.loop = made[0]

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the loop once its current callbacks ran, and wait for the thread to end."""
        if self.thread.is_alive():
            try:
                self.loop.call_soon_threadsafe(self.loop.stop)
            except RuntimeError:
                pass  # closed already: the thread is ending
            self.thread.join(timeout_s)
