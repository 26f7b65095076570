"""A blocking remoting connection for the edge tools: frames go out as bytes (any bytes), answers
come back decoded by `wire.remoting.FrameDecoder` and are matched by opaque.

`exchange` sends one frame and waits for the answer to `opaque`; `exchange_raw` sends bytes that
may not be a frame at all, then a probe request, and says what became of them: answered, refused
(the broker closed the connection), swallowed (the probe was answered and the bytes were not), or
waited for (neither answered before the deadline: the decoder wants more bytes, or the broker is
stuck; a tool's liveness probe tells the two apart). Bytes whose length prefix promises more than
they hold are sent alone and called incomplete unless the broker closes the connection at once.

Thread-safety: a `RemotingSocket` belongs to one thread.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

from client.endpoint import parse_endpoint
from wire.remoting import FrameDecoder, RemotingCommand, RemotingProtocolError, RequestCode, ResponseCode, encode

PROBE_OPAQUE = 0x7FFF_FF00


def code_label(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"CODE_{code}"


def request_label(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return f"CODE_{code}"


@dataclass(frozen=True)
class Exchange:
    answer: str | None  # the response code's name; None without an answer
    transport: str | None = None  # closed, timeout, refused, bad-answer ...
    remark: str = ""
    response: RemotingCommand | None = None


class RemotingSocket:
    def __init__(self, endpoint: str, connect_timeout_s: float = 5.0) -> None:
        parsed = parse_endpoint(endpoint)
        self.endpoint = endpoint
        self._sock = socket.create_connection((parsed.host, parsed.port), timeout=connect_timeout_s)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._decoder = FrameDecoder(64 << 20)
        self._answers: dict[int, RemotingCommand] = {}
        self.closed = False

    def close(self) -> None:
        self.closed = True
        try:
            self._sock.close()
        except OSError:
            pass

    def send(self, data: bytes) -> bool:
        """False when the connection is gone."""
        try:
            self._sock.sendall(data)
            return True
        except OSError:
            self.closed = True
            return False

    def _read(self, deadline: float) -> str | None:
        """Read what arrives before `deadline`; 'closed', 'timeout', 'bad-answer' or None."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return "timeout"
        self._sock.settimeout(remaining)
        try:
            data = self._sock.recv(1 << 20)
        except TimeoutError:
            return "timeout"
        except OSError:
            self.closed = True
            return "closed"
        if not data:
            self.closed = True
            return "closed"
        try:
            for answer in self._decoder.feed(data):
                self._answers[answer.opaque] = answer
        except RemotingProtocolError:
            self.closed = True
            return "bad-answer"
        return None

    def wait(self, opaque: int, timeout_s: float) -> Exchange:
        deadline = time.monotonic() + timeout_s
        while True:
            answer = self._answers.pop(opaque, None)
            if answer is not None:
                return Exchange(code_label(answer.code), None, answer.remark or "", answer)
            failed = self._read(deadline)
            if failed is not None:
                return Exchange(None, failed)

    def closed_within(self, timeout_s: float) -> bool:
        """Whether the broker closes this connection within `timeout_s` (answers are kept)."""
        deadline = time.monotonic() + timeout_s
        while True:
            failed = self._read(deadline)
            if failed is not None:
                return failed != "timeout"

    def exchange(self, command: RemotingCommand, timeout_s: float = 3.0) -> Exchange:
        """Send `command`; its answer (a one-way request gets none: answer 'ONEWAY')."""
        if not self.send(encode(command)):
            return Exchange(None, "closed")
        if command.is_oneway:
            return Exchange("ONEWAY")
        return self.wait(command.opaque, timeout_s)

    def exchange_raw(self, data: bytes, timeout_s: float = 1.0) -> Exchange:
        """Send `data` and a probe behind it (see the module docstring)."""
        self._answers.clear()
        declared = struct.unpack_from(">i", data)[0] if len(data) >= 4 else -1
        if declared > len(data) - 4:
            # The frame says more bytes follow than were sent: a decoder waits for them (or
            # refuses the length at once); a probe behind it would only be swallowed.
            if not self.send(data):
                return Exchange(None, "closed")
            closed = self._read(time.monotonic() + 0.05) in ("closed", "bad-answer")
            return Exchange(None, "refused" if closed else "incomplete")
        probe = RemotingCommand(RequestCode.GET_MAX_OFFSET, PROBE_OPAQUE, 0, {"topic": "FuzzTopic", "queueId": "0"})
        if not self.send(data) or not self.send(encode(probe)):
            return Exchange(None, "closed")
        probed = self.wait(PROBE_OPAQUE, timeout_s)
        others = sorted(self._answers.values(), key=lambda a: a.opaque)
        if others:
            first = others[0]
            return Exchange(code_label(first.code), None, first.remark or "", first)
        if probed.answer is not None:
            return Exchange(None, "swallowed")
        return Exchange(None, "refused" if probed.transport in ("closed", "bad-answer") else "waited-for")


def one_request(endpoint: str, command: RemotingCommand, timeout_s: float = 5.0) -> Exchange:
    """`command` on a fresh connection, closed afterwards."""
    try:
        conn = RemotingSocket(endpoint, connect_timeout_s=timeout_s)
    except OSError as exc:
        return Exchange(None, f"connect: {type(exc).__name__}")
    try:
        return conn.exchange(command, timeout_s)
    finally:
        conn.close()
