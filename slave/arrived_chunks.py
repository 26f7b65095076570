"""What the master has sent and gRPC has received: the slave's side of a Replicate call, taken
all at once (`ArrivedChunks`).

gRPC's sync stub hands a stream's messages over one at a time: `next()` starts one receive
operation and sleeps until gRPC's channel-spin thread completes it, so whoever iterates cannot
tell whether more chunks have arrived without blocking on the next one. Here a receive operation
stays outstanding on the call from the start instead: the channel-spin thread, which completes
every operation of the call anyway, puts each received chunk on a local queue and starts the next
receive at once. The replicator's thread then takes everything that has arrived in one call
(`take`), and sleeps only when nothing has (woken by the completion as `next()` would be): no
thread of its own, no hand-off per chunk beyond the one `next()` costs. The queue holds at most
`limit_bytes` (plus the one chunk in flight): past that no receive is started until the
replicator took the queue, and gRPC's flow control holds the master back as it does when nobody
calls `next()`.

This uses grpc's sync call object from the inside (`_MultiThreadedRendezvous`: its `_state`,
`_call` and `_response_deserializer`; `grpc._channel._handle_event`), as `next()` itself does,
which grpc does not promise to keep: `attach` returns None when they are not there (another
grpcio), and the replicator then iterates the call one chunk at a time. The pinned grpcio
(constraints.txt) is what the tests run.

A stream that failed (the master's status, or a local cancel) raises the call, an RpcError, as
`next()` does, and drops what was queued, as `next()` does; one that ended OK returns what was
queued and then nothing.

Thread-safety: `take` from one thread at a time (the replicator's); `_completed` runs on gRPC's
channel-spin thread. Both under the call's own condition, as grpc's own code uses it.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import grpc
from grpc import _channel as grpc_channel
from grpc._cython import cygrpc

_RECEIVE = cygrpc.OperationType.receive_message
_NO_FLAGS = 0


class ArrivedChunks:
    """The chunks a Replicate call has received and nobody has taken yet."""

    def __init__(self, call: Any, limit_bytes: int) -> None:
        if limit_bytes <= 0:
            raise ValueError(f"limit_bytes must be positive, got {limit_bytes}")
        self._rendezvous = call
        self._state = call._state
        self._core = call._call
        self._deserializer = call._response_deserializer
        self._limit = limit_bytes
        self._queue: deque[Any] = deque()
        self._bytes = 0
        self._receiving = False
        self._drained = False  # a receive found no more messages: only the status is left
        with self._state.condition:
            self._receive_locked()

    @classmethod
    def attach(cls, call: Any, limit_bytes: int) -> ArrivedChunks | None:
        """An `ArrivedChunks` for a Replicate call just made (nobody iterated it yet), or None
        when the call is not grpc's sync call object as this module knows it."""
        state = getattr(call, "_state", None)
        if (
            state is None
            or not callable(getattr(getattr(call, "_call", None), "operate", None))
            or not hasattr(call, "_response_deserializer")
            or not hasattr(grpc_channel, "_handle_event")
            or not all(hasattr(state, name) for name in ("condition", "due", "response", "code"))
        ):
            return None
        return cls(call, limit_bytes)

    @property
    def pending(self) -> int:
        """How many received chunks wait to be taken."""
        with self._state.condition:
            return len(self._queue)

    def take(self) -> list[Any]:
        """Every chunk received and not taken yet, in order, waiting for one when there is none;
        [] once the stream ended OK and everything was taken. Raises the call (a `grpc.RpcError`)
        when the stream failed or was cancelled."""
        state = self._state
        with state.condition:
            while True:
                code = state.code
                if code is not None and code is not grpc.StatusCode.OK:
                    raise self._rendezvous
                if self._queue:
                    chunks = list(self._queue)
                    self._queue.clear()
                    self._bytes = 0
                    self._receive_locked()  # when the limit held it back
                    return chunks
                if code is not None and not self._receiving:
                    return []  # ended OK
                # (drained with no status yet: the status's own handler notifies)
                state.condition.wait()

    def _receive_locked(self) -> None:
        """Start the next receive unless one is outstanding, the call ended or the queue is full."""
        state = self._state
        if self._receiving or self._drained or state.code is not None or self._bytes >= self._limit:
            return
        state.due.add(_RECEIVE)
        if self._core.operate((cygrpc.ReceiveMessageOperation(_NO_FLAGS),), self._completed):
            self._receiving = True
        else:
            state.due.discard(_RECEIVE)

    def _completed(self, event: Any) -> bool:
        """A receive completed (on gRPC's channel-spin thread): queue its chunk and start the
        next one. Returns what grpc's own handlers return: whether the call has nothing due."""
        state = self._state
        with state.condition:
            # grpc's own bookkeeping of the event: the op leaves `due`, the message is decoded
            # into `state.response` (a message that does not decode aborts the call).
            grpc_channel._handle_event(event, state, self._deserializer)
            self._receiving = False
            chunk = state.response
            if chunk is not None:
                state.response = None
                self._queue.append(chunk)
                self._bytes += len(chunk.data)
                self._receive_locked()
            else:
                self._drained = True
            state.condition.notify_all()
            fork_epoch = getattr(state, "fork_epoch", None)
            current = fork_epoch is None or fork_epoch >= cygrpc.get_fork_epoch()
            return not state.due and current
