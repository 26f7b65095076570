"""Mutual authentication of a master and its slave with the shared replication secret, sans-IO.

Why: a signed call header alone proves the slave to the master, but nothing proves the master to
the slave, and a header captured by whoever the slave dialled could be replayed to the real master.
Here each side proves it holds the secret, bound to fresh nonces from both sides and to both
identities, and every message after that is MACed under a key of that session only.

The exchange, per call (`Replicate`, `GetEpochs`, `GetMetadata`, `HandBackPopEvents`):

1. `Hello`, unauthenticated. The slave sends a fresh 32-byte client nonce `cn` and its identity
   (broker name, broker id). The master draws a server nonce `sn`, remembers (sn -> cn, slave) for
   `NONCE_TTL_MS`, and answers with `sn`, its own identity and
   proof = HMAC(secret, "rs-ha-proof" | cn | sn | master | slave).
2. The slave checks the proof (constant time) and that the master names the slave's group; only
   then does it derive the session key K = HMAC(secret, "rs-ha-session" | cn | sn | master | slave)
   and open the call with the header `x-rs-auth: v2 <sn hex> <HMAC(K, "rs-ha-call" | method | sn) hex>`.
3. The master takes `sn` from its table (single use: a second call with it is refused), derives K and
   checks the tag. A captured header is worth nothing elsewhere: its nonce is consumed, or was issued
   by another process, and K depends on a secret the capturer lacks.
4. Every later message carries `mac` = HMAC(K, kind | sequence | fields), kind naming the message
   type and direction, sequence counting the messages of that kind in the call from 0; the receiver
   checks it before it uses anything of the message. A relay without the secret can therefore drop
   messages but neither forge, alter, reorder nor replay them.

The stream is not encrypted: a relay can read it. Off loopback, use mutual TLS (with or without the
secret).

Fields are MACed in a fixed encoding: the kind label, then each integer as a signed 64-bit
big-endian value, then each byte string as an 8-byte big-endian length and its bytes. Identities are
encoded as the UTF-8 broker name (length-prefixed) and the broker id (64-bit).

Thread-safety: `NonceTable` and `MasterAuth` lock around the table and may be shared by any number
of server threads; `SlaveAuth` is stateless; a `PeerSession` belongs to one call, and its
sequence counters are used by one thread per direction.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
import threading
from collections import OrderedDict
from dataclasses import dataclass

HEADER = "x-rs-auth"
VERSION = "v2"
NONCE_BYTES = 32
MAC_BYTES = 32
# A slave calls right after its Hello: the nonce only has to outlive one round trip.
NONCE_TTL_MS = 30_000
# Hellos are unauthenticated: a flood must not grow memory. The oldest pending nonce goes first;
# a slave whose nonce was pushed out retries at its next backoff.
NONCE_CAPACITY = 4096

_PROOF = b"rs-ha-proof"
_SESSION = b"rs-ha-session"
_CALL = b"rs-ha-call"
CHUNK = b"rs-ha-chunk"
REPORT = b"rs-ha-report"
EPOCHS = b"rs-ha-epochs"
METADATA = b"rs-ha-metadata"
POP_EVENTS = b"rs-ha-pop-events"
POP_EVENTS_ANSWER = b"rs-ha-pop-events-answer"


class AuthenticationError(Exception):
    """The peer failed to authenticate (or a message failed its MAC); the text says why, never
    any secret material."""


@dataclass(frozen=True, slots=True)
class Identity:
    broker_name: str
    broker_id: int

    def encoded(self) -> bytes:
        name = self.broker_name.encode("utf-8")
        return len(name).to_bytes(8, "big") + name + struct.pack(">q", self.broker_id)

    def __str__(self) -> str:
        return f"{self.broker_name}/{self.broker_id}"


def _hmac(key: bytes, label: bytes, *parts: bytes) -> hmac.HMAC:
    mac = hmac.new(key, label, hashlib.sha256)
    for part in parts:
        mac.update(len(part).to_bytes(8, "big"))
        mac.update(part)
    return mac


def master_proof(secret: bytes, client_nonce: bytes, server_nonce: bytes, master: Identity, slave: Identity) -> bytes:
    return _hmac(secret, _PROOF, client_nonce, server_nonce, master.encoded(), slave.encoded()).digest()


def session_key(secret: bytes, client_nonce: bytes, server_nonce: bytes, master: Identity, slave: Identity) -> bytes:
    return _hmac(secret, _SESSION, client_nonce, server_nonce, master.encoded(), slave.encoded()).digest()


def _call_tag(key: bytes, method: str, server_nonce: bytes) -> bytes:
    return _hmac(key, _CALL, method.encode("utf-8"), server_nonce).digest()


def message_mac(key: bytes, kind: bytes, integers: tuple[int, ...], blobs: tuple[bytes, ...]) -> bytes:
    """HMAC(K, kind | integers | length-prefixed blobs): the MAC every message after the Hello carries."""
    mac = hmac.new(key, kind, hashlib.sha256)
    mac.update(struct.pack(f">{len(integers)}q", *integers))
    for blob in blobs:
        mac.update(len(blob).to_bytes(8, "big"))
        mac.update(blob)
    return mac.digest()


class PeerSession:
    """One authenticated call's key and message counters."""

    __slots__ = ("_key", "peer", "_sent", "_received")

    def __init__(self, key: bytes, peer: Identity) -> None:
        self._key = key
        self.peer = peer
        self._sent: dict[bytes, int] = {}
        self._received: dict[bytes, int] = {}

    def seal(self, kind: bytes, integers: tuple[int, ...], blobs: tuple[bytes, ...] = ()) -> bytes:
        """The MAC of the next message of `kind` this side sends."""
        sequence = self._sent.get(kind, 0)
        self._sent[kind] = sequence + 1
        return message_mac(self._key, kind, (sequence, *integers), blobs)

    def open(self, kind: bytes, mac: bytes, integers: tuple[int, ...], blobs: tuple[bytes, ...] = ()) -> None:
        """Check the MAC of the next message of `kind` received; AuthenticationError when it fails."""
        sequence = self._received.get(kind, 0)
        expected = message_mac(self._key, kind, (sequence, *integers), blobs)
        if not hmac.compare_digest(expected, mac):
            raise AuthenticationError(
                f"message {sequence} ({kind.decode()}) from {self.peer} failed its MAC: forged, altered or out of order"
            )
        self._received[kind] = sequence + 1

    def call_header(self, method: str, server_nonce: bytes) -> str:
        return f"{VERSION} {server_nonce.hex()} {_call_tag(self._key, method, server_nonce).hex()}"

    def __repr__(self) -> str:
        return f"PeerSession(peer={self.peer})"


@dataclass(frozen=True, slots=True)
class _Pending:
    client_nonce: bytes
    slave: Identity
    issued_ms: int


class NonceTable:
    """The master's issued, not yet used server nonces: each is taken at most once, within `ttl_ms`."""

    def __init__(self, ttl_ms: int = NONCE_TTL_MS, capacity: int = NONCE_CAPACITY) -> None:
        self._ttl_ms = ttl_ms
        self._capacity = capacity
        self._pending: OrderedDict[bytes, _Pending] = OrderedDict()
        self._lock = threading.Lock()

    def issue(self, server_nonce: bytes, client_nonce: bytes, slave: Identity, now_ms: int) -> None:
        with self._lock:
            self._expire(now_ms)
            self._pending[server_nonce] = _Pending(client_nonce, slave, now_ms)
            while len(self._pending) > self._capacity:
                self._pending.popitem(last=False)

    def take(self, server_nonce: bytes, now_ms: int) -> _Pending | None:
        with self._lock:
            self._expire(now_ms)
            return self._pending.pop(server_nonce, None)

    def __len__(self) -> int:
        return len(self._pending)

    def _expire(self, now_ms: int) -> None:
        pending = self._pending
        while pending:
            entry = next(iter(pending.values()))
            if now_ms - entry.issued_ms <= self._ttl_ms:
                break
            pending.popitem(last=False)


@dataclass(frozen=True, slots=True)
class HelloAnswer:
    server_nonce: bytes
    server_proof: bytes
    master: Identity


class MasterAuth:
    """The master's side: answers Hellos and authenticates the calls that follow them."""

    def __init__(self, secret: bytes, master: Identity, table: NonceTable | None = None) -> None:
        if not secret:
            raise ValueError("MasterAuth needs a secret")
        self._secret = secret
        self.master = master
        self._table = table if table is not None else NonceTable()

    def hello(
        self, client_nonce: bytes, slave: Identity, now_ms: int, server_nonce: bytes | None = None
    ) -> HelloAnswer:
        """ValueError for a malformed client nonce (the caller answers INVALID_ARGUMENT)."""
        if len(client_nonce) != NONCE_BYTES:
            raise ValueError(f"the client nonce must be {NONCE_BYTES} bytes, not {len(client_nonce)}")
        nonce = server_nonce if server_nonce is not None else os.urandom(NONCE_BYTES)
        self._table.issue(nonce, client_nonce, slave, now_ms)
        return HelloAnswer(nonce, master_proof(self._secret, client_nonce, nonce, self.master, slave), self.master)

    def authenticate(self, header: str | None, method: str, now_ms: int) -> PeerSession:
        """The session of a call whose header names a nonce this master issued; AuthenticationError
        (the reason) otherwise."""
        if not header:
            raise AuthenticationError("no credentials")
        parts = header.split(" ")
        if parts[0] != VERSION:
            raise AuthenticationError(f"replication needs {VERSION} credentials (a Hello first), not {parts[0]!r}")
        if len(parts) != 3:
            raise AuthenticationError("malformed credentials")
        try:
            server_nonce = bytes.fromhex(parts[1])
            tag = bytes.fromhex(parts[2])
        except ValueError:
            raise AuthenticationError("malformed credentials") from None
        pending = self._table.take(server_nonce, now_ms)
        if pending is None:
            raise AuthenticationError("unknown, expired or already used nonce (a replayed or relayed header)")
        key = session_key(self._secret, pending.client_nonce, server_nonce, self.master, pending.slave)
        if not hmac.compare_digest(_call_tag(key, method, server_nonce), tag):
            raise AuthenticationError("bad signature")
        return PeerSession(key, pending.slave)

    def __repr__(self) -> str:
        return f"MasterAuth(<secret>, master={self.master})"


class SlaveAuth:
    """The slave's side: checks a master's Hello answer and derives the call's session."""

    def __init__(self, secret: bytes, slave: Identity) -> None:
        if not secret:
            raise ValueError("SlaveAuth needs a secret")
        self._secret = secret
        self.slave = slave

    @staticmethod
    def client_nonce() -> bytes:
        return os.urandom(NONCE_BYTES)

    def verify(self, client_nonce: bytes, answer: HelloAnswer, method: str) -> tuple[PeerSession, str]:
        """The session and the call's header value, once the master proved it holds the secret;
        AuthenticationError otherwise (nothing may be sent to or taken from that peer)."""
        if answer.master.broker_name != self.slave.broker_name:
            raise AuthenticationError(
                f"the peer is broker {answer.master.broker_name!r}, not a master of {self.slave.broker_name!r}"
            )
        if len(answer.server_nonce) != NONCE_BYTES:
            raise AuthenticationError("the peer sent a malformed nonce")
        expected = master_proof(self._secret, client_nonce, answer.server_nonce, answer.master, self.slave)
        if not hmac.compare_digest(expected, answer.server_proof):
            raise AuthenticationError("the peer failed to prove it holds the shared secret")
        key = session_key(self._secret, client_nonce, answer.server_nonce, answer.master, self.slave)
        session = PeerSession(key, answer.master)
        return session, session.call_header(method, answer.server_nonce)

    def __repr__(self) -> str:
        return f"SlaveAuth(<secret>, slave={self.slave})"


# What each message's MAC covers: every field but the MAC itself (duck-typed on the protobuf
# messages of wire/rpc/ha.proto, so this module stays free of gRPC).


def chunk_parts(chunk) -> tuple[tuple[int, ...], tuple[bytes, ...]]:
    return (
        (
            chunk.start_offset,
            chunk.master_max_offset,
            chunk.epoch,
            chunk.checksum,
            chunk.confirmed_offset,
            chunk.segment_size,
            chunk.epoch_start_offset,
        ),
        (chunk.master_client_endpoint.encode("utf-8"), chunk.data),
    )


def report_parts(report) -> tuple[tuple[int, ...], tuple[bytes, ...]]:
    return (
        (report.durable_offset, report.broker_id, report.max_offset, report.epoch, report.epoch_start_offset),
        (report.broker_name.encode("utf-8"), report.client_endpoint.encode("utf-8")),
    )


def epochs_parts(answer) -> tuple[tuple[int, ...], tuple[bytes, ...]]:
    entries = tuple(value for entry in answer.epochs for value in (entry.epoch, entry.start_offset))
    return (
        answer.min_offset,
        answer.max_offset,
        answer.confirmed_offset,
        int(answer.is_master),
        len(answer.epochs),
        *entries,
    ), ()


def metadata_parts(answer) -> tuple[tuple[int, ...], tuple[bytes, ...]]:
    return (int(answer.is_master),), (answer.topics_json, answer.consumer_offsets_json, answer.delay_offsets_json)


def pop_events_parts(request) -> tuple[tuple[int, ...], tuple[bytes, ...]]:
    return (request.broker_id, len(request.batches)), (request.broker_name.encode("utf-8"), *request.batches)


def pop_answer_parts(answer) -> tuple[tuple[int, ...], tuple[bytes, ...]]:
    return (int(answer.accepted),), (answer.reason.encode("utf-8"),)
