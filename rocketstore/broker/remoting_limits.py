"""Limits of the remoting port's connections, sans-IO (time is an argument): how many connections
it holds, how many bytes of incomplete frames they buffer together, how long a connection may stay
silent and how long one frame may take to arrive. The server (`remoting_server.py`) reports what
happens on its sockets and closes what these objects name, with the reason they give.

- `RemotingLimits`: the values, from broker.conf (`remotingMaxConnections`,
  `remotingMaxBufferedBytes`, `serverChannelMaxIdleTimeSeconds`, `remotingFrameTimeout`,
  `remotingMaxInFlightRequests`).
- `ConnectionBudget`: the connections, buffered bytes and requests of all connections together.
  A new connection past the limit is refused. When incomplete frames take the bytes past the cap,
  the server closes the connections whose frames began longest ago until they fit (a frame is what
  a connection costs, so closing it frees that; the slowest senders go, not whoever crossed the
  cap). A whole request is in progress until it is answered (a put waiting on its flush and
  replicas, a long poll) and holds its body meanwhile: past `remotingMaxInFlightRequests`
  requests, or when the bodies in progress would pass the same byte cap, it is answered
  SYSTEM_BUSY at once, as RocketMQ answers when its request queues are full. Frames and bodies
  are counted apart, so slow senders cannot make whole requests busy.
- `ConnectionClock`: one connection's last traffic and the start of the frame it is receiving.
  A connection with no traffic and no request in progress (a long poll counts) for the idle time
  is closed, and so is one whose frame has not completed within the frame timeout (a slow or
  stalled sender holding a nearly complete large frame).

Thread-safety: none; the remoting server's loop owns them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RemotingLimits:
    max_connections: int = 4096
    max_buffered_bytes: int = 32 * 1024 * 1024
    idle_timeout_ms: int = 120_000
    frame_timeout_ms: int = 30_000
    max_in_flight_requests: int = 65_536

    @property
    def sweep_interval_ms(self) -> int:
        """How often the server checks its connections' clocks: a quarter of the shorter timeout,
        between 50 ms and 1 s."""
        return max(50, min(1000, min(self.idle_timeout_ms, self.frame_timeout_ms) // 4))


class ConnectionBudget:
    def __init__(self, limits: RemotingLimits) -> None:
        self.limits = limits
        self.connections = 0
        self.buffered = 0  # bytes of incomplete frames
        self.requests = 0  # requests in progress
        self.request_bytes = 0  # their bodies

    def admit(self) -> str | None:
        """Count a new connection; or why it is refused (then it is not counted)."""
        if self.connections >= self.limits.max_connections:
            return f"{self.connections} connections are open, the limit (remotingMaxConnections)"
        self.connections += 1
        return None

    def rebuffer(self, before: int, after: int) -> str | None:
        """A connection's buffered bytes went from `before` to `after`; why it must close when
        the total is now past the cap (it is then still counted: `release` it)."""
        self.buffered += after - before
        if after > before and self.buffered > self.limits.max_buffered_bytes:
            return (
                f"incomplete frames of all connections hold {self.buffered} bytes, over the limit of "
                f"{self.limits.max_buffered_bytes} (remotingMaxBufferedBytes)"
            )
        return None

    def begin_request(self, body_bytes: int) -> str | None:
        """Count a request in progress holding `body_bytes`; or why it is answered SYSTEM_BUSY
        (then it is not counted)."""
        limits = self.limits
        if self.requests >= limits.max_in_flight_requests:
            return (
                f"[OVERLOAD] {self.requests} requests in progress, the limit (remotingMaxInFlightRequests); retry later"
            )
        held = self.request_bytes
        if body_bytes and held + body_bytes > limits.max_buffered_bytes:
            return (
                f"[OVERLOAD] requests in progress hold {held} bytes of bodies; {body_bytes} more would pass the "
                f"limit of {limits.max_buffered_bytes} (remotingMaxBufferedBytes); retry later"
            )
        self.requests += 1
        self.request_bytes += body_bytes
        return None

    def end_request(self, body_bytes: int) -> None:
        self.requests -= 1
        self.request_bytes -= body_bytes

    def release(self, buffered: int) -> None:
        """A connection closed while holding `buffered` bytes."""
        self.connections -= 1
        self.buffered -= buffered


class ConnectionClock:
    def __init__(self, limits: RemotingLimits, now_ms: int) -> None:
        self._limits = limits
        self.last_traffic_ms = now_ms
        self.frame_started_ms: int | None = None

    def received(self, now_ms: int, frames: int, buffered: int) -> None:
        """Bytes arrived: `frames` whole frames came out of them and `buffered` bytes of the
        next one are left."""
        self.last_traffic_ms = now_ms
        if not buffered:
            self.frame_started_ms = None
        elif frames or self.frame_started_ms is None:
            self.frame_started_ms = now_ms  # the bytes left begin a new frame

    def sent(self, now_ms: int) -> None:
        self.last_traffic_ms = now_ms

    def overdue(self, now_ms: int, busy: bool, receiving: bool = True) -> str | None:
        """Why the connection must close now (None: it may stay); `busy` when a request of it is
        still being served, not `receiving` while the server does not read it (its frame cannot
        complete then, through no fault of the peer: the frame's clock does not count)."""
        limits = self._limits
        started = self.frame_started_ms
        if receiving and started is not None and now_ms - started > limits.frame_timeout_ms:
            return (
                f"a frame begun {now_ms - started} ms ago is still incomplete "
                f"(remotingFrameTimeout={limits.frame_timeout_ms} ms)"
            )
        if not busy and started is None and now_ms - self.last_traffic_ms > limits.idle_timeout_ms:
            return (
                f"idle for {now_ms - self.last_traffic_ms} ms "
                f"(serverChannelMaxIdleTimeSeconds={limits.idle_timeout_ms // 1000})"
            )
        return None
