"""Pop consumption's state (RocketMQ 5's SimpleConsumer and PushConsumer): which messages of a queue
a consumer group holds invisible, until when, under which delivery attempt.

Sans-IO. Every change is an event; the broker writes the events to the system topic `POP_TOPIC`
through the put path (flushed and replicated like messages), and a broker that starts or is
promoted replays them once each, in log order (`apply`), so the state survives restarts and
failovers.

Per (group, topic, queue id), in queue offsets:

    next_offset   offsets below were handed out, or passed over (filtered out, or deleted)
    inflight      offset -> (attempt, token, invisible until): handed out, not acked
    committed     the lowest in-flight offset, else next_offset: everything below is done

An offset below `next_offset` and not in flight is done (acked, passed over, or dead-lettered).
Each event carries the queue's `base` (its committed offset when the event was made): a replay
whose first event of a queue is not that queue's first (older events deleted by retention) starts
the queue there. A delivery has a token unique in its queue; an ack or a change of invisible time
names the token it was given, and a token that is no longer current is refused (the message was
redelivered, or its invisible time changed). The broker itself may push a due delivery's invisible
time back when it cannot redeliver it now (`postpone`): a change that keeps the token.

A delivery whose invisible time ran out may be redelivered from the group's retry topic instead
of in place (the broker puts a copy there): the original offset is then done (`Retried`), and an
ack or change naming its old token is refused as stale, not taken for a repeated ack (the last
`RETRIED_KEPT` such offsets of a queue are remembered for that).

Events on the wire (the POP_TOPIC message body): a JSON list of objects, each with "k" (kind: D
delivered, A acked, C changed, P passed over, R retried elsewhere), "g" group, "t" topic, "q" queue id, "b" base, and
its own fields (o offset, a attempt, n token, m new token, u invisible until ms, x next offset).
Thread-safety: none; the broker's pop service serialises calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

POP_TOPIC = "RS_SYS_POP_STATE"

Key = tuple[str, str, int]  # (group, topic, queue id)


@dataclass(frozen=True, slots=True)
class Delivered:
    key: Key
    base: int
    offset: int
    attempt: int
    token: int
    invisible_until_ms: int


@dataclass(frozen=True, slots=True)
class Acked:
    key: Key
    base: int
    offset: int
    token: int


@dataclass(frozen=True, slots=True)
class Changed:
    key: Key
    base: int
    offset: int
    token: int
    new_token: int
    invisible_until_ms: int


@dataclass(frozen=True, slots=True)
class Retried:
    """The delivery with `token` is redelivered from the retry topic: this offset is done here."""

    key: Key
    base: int
    offset: int
    token: int


@dataclass(frozen=True, slots=True)
class PassedOver:
    """Offsets up to `next_offset` that are not delivered: filtered out, or deleted by retention."""

    key: Key
    base: int
    next_offset: int


Event = Delivered | Acked | Changed | PassedOver | Retried

# Per queue, how many offsets moved to the retry topic are remembered (to refuse their old handles).
RETRIED_KEPT = 4096


class Inflight(NamedTuple):
    attempt: int
    token: int
    invisible_until_ms: int


@dataclass(slots=True)
class QueueProgress:
    next_offset: int
    inflight: dict[int, Inflight] = field(default_factory=dict)
    next_token: int = 1
    retried: dict[int, int] = field(default_factory=dict)  # offset -> token it was retried under

    @property
    def committed(self) -> int:
        return min(self.inflight) if self.inflight else self.next_offset


class Refused(NamedTuple):
    reason: str


STALE = "the receipt handle is stale: the message was redelivered or its invisible time changed since"
RETRIED = "the receipt handle is stale: the message was redelivered from the retry topic since"


class PopState:
    def __init__(self) -> None:
        self._queues: dict[Key, QueueProgress] = {}

    def progress(self, key: Key, start_offset: int) -> QueueProgress:
        """The queue's progress; a queue the group never popped starts at `start_offset`."""
        p = self._queues.get(key)
        if p is None:
            p = self._queues[key] = QueueProgress(start_offset)
        return p

    def queue(self, key: Key) -> QueueProgress | None:
        """The queue's progress, None for a queue the group never popped."""
        return self._queues.get(key)

    def keys(self) -> list[Key]:
        return list(self._queues)

    def committed(self, key: Key) -> int | None:
        p = self._queues.get(key)
        return p.committed if p is not None else None

    def inflight(self, key: Key, offset: int) -> Inflight | None:
        p = self._queues.get(key)
        return p.inflight.get(offset) if p is not None else None

    def due(self, key: Key, now_ms: int, limit: int) -> list[tuple[int, Inflight]]:
        """In-flight messages whose invisible time is over, oldest offset first."""
        p = self._queues.get(key)
        if p is None or limit <= 0:
            return []
        return sorted((o, f) for o, f in p.inflight.items() if f.invisible_until_ms <= now_ms)[:limit]

    def due_keys(self, now_ms: int) -> list[Key]:
        """The queues holding an in-flight message whose invisible time is over (what the broker's
        revive round looks at)."""
        return [k for k, p in self._queues.items() if any(f.invisible_until_ms <= now_ms for f in p.inflight.values())]

    def next_due_ms(self, keys: Iterable[Key]) -> int | None:
        """When the next in-flight message of these queues becomes visible again."""
        times = [f.invisible_until_ms for k in keys if (p := self._queues.get(k)) for f in p.inflight.values()]
        return min(times) if times else None

    # -- decisions: each returns the event (already applied), or a refusal ----------------------

    def deliver(self, key: Key, offset: int, attempt: int, invisible_until_ms: int) -> Delivered:
        p = self._queues[key]
        if offset < p.next_offset and offset not in p.inflight:
            raise ValueError(f"{key} offset {offset} is done; it cannot be delivered again")
        event = Delivered(key, p.committed, offset, attempt, p.next_token, invisible_until_ms)
        self.apply(event)
        return event

    def pass_over(self, key: Key, next_offset: int) -> PassedOver | None:
        p = self._queues[key]
        if next_offset <= p.next_offset:
            return None
        event = PassedOver(key, p.committed, next_offset)
        self.apply(event)
        return event

    def ack(self, key: Key, offset: int, token: int) -> Acked | Refused | None:
        """None: the offset is done already (a repeated ack); a refusal for a handle not current."""
        p = self._queues.get(key)
        if p is None:
            return Refused("this broker group has no delivery of that queue to this consumer group")
        held = p.inflight.get(offset)
        if held is None:
            if p.retried.get(offset) == token:
                return Refused(RETRIED)
            if offset < p.next_offset:
                return None
            return Refused(f"offset {offset} was not delivered to this consumer group")
        if held.token != token:
            return Refused(STALE)
        event = Acked(key, p.committed, offset, token)
        self.apply(event)
        return event

    def change(self, key: Key, offset: int, token: int, invisible_until_ms: int) -> Changed | Refused:
        p = self._queues.get(key)
        held = p.inflight.get(offset) if p is not None else None
        if p is not None and held is None and p.retried.get(offset) == token:
            return Refused(RETRIED)
        if p is None or held is None:
            return Refused(f"offset {offset} is not invisible for this consumer group (acked, or never delivered)")
        if held.token != token:
            return Refused(STALE)
        event = Changed(key, p.committed, offset, token, p.next_token, invisible_until_ms)
        self.apply(event)
        return event

    def postpone(self, key: Key, offset: int, token: int, invisible_until_ms: int) -> Changed:
        """The due delivery (`token` current) could not be redelivered now (its retry or
        dead-letter topic was refused): it stays in flight, invisible again until then, under the
        same token, so the client's handle still acks it."""
        p = self._queues[key]
        held = p.inflight.get(offset)
        if held is None or held.token != token:
            raise ValueError(f"{key} offset {offset} is not in flight under token {token}")
        event = Changed(key, p.committed, offset, token, token, invisible_until_ms)
        self.apply(event)
        return event

    def retry(self, key: Key, offset: int, token: int) -> Retried:
        """The due delivery (`token` current) now lives on in the retry topic."""
        held = self._queues[key].inflight.get(offset)
        if held is None or held.token != token:
            raise ValueError(f"{key} offset {offset} is not in flight under token {token}")
        event = Retried(key, self._queues[key].committed, offset, token)
        self.apply(event)
        return event

    # -- replay ---------------------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        p = self.progress(event.key, event.base)
        if isinstance(event, Delivered):
            p.inflight[event.offset] = Inflight(event.attempt, event.token, event.invisible_until_ms)
            p.next_offset = max(p.next_offset, event.offset + 1)
            p.next_token = max(p.next_token, event.token + 1)
        elif isinstance(event, Acked):
            held = p.inflight.get(event.offset)
            if held is not None and held.token == event.token:
                del p.inflight[event.offset]
        elif isinstance(event, Changed):
            held = p.inflight.get(event.offset)
            if held is not None and held.token == event.token:
                p.inflight[event.offset] = Inflight(held.attempt, event.new_token, event.invisible_until_ms)
            p.next_token = max(p.next_token, event.new_token + 1)
        elif isinstance(event, Retried):
            held = p.inflight.get(event.offset)
            if held is not None and held.token == event.token:
                del p.inflight[event.offset]
                p.retried[event.offset] = event.token
                if len(p.retried) > RETRIED_KEPT:
                    del p.retried[next(iter(p.retried))]
        else:
            p.next_offset = max(p.next_offset, event.next_offset)


# -- the events' wire form ---------------------------------------------------------------------------


def encode_events(events: Iterable[Event]) -> bytes:
    out = []
    for e in events:
        d: dict[str, object] = {"g": e.key[0], "t": e.key[1], "q": e.key[2], "b": e.base}
        if isinstance(e, Delivered):
            d.update(k="D", o=e.offset, a=e.attempt, n=e.token, u=e.invisible_until_ms)
        elif isinstance(e, Acked):
            d.update(k="A", o=e.offset, n=e.token)
        elif isinstance(e, Changed):
            d.update(k="C", o=e.offset, n=e.token, m=e.new_token, u=e.invisible_until_ms)
        elif isinstance(e, Retried):
            d.update(k="R", o=e.offset, n=e.token)
        else:
            d.update(k="P", x=e.next_offset)
        out.append(d)
    return json.dumps(out, separators=(",", ":")).encode()


def decode_events(data: bytes) -> list[Event]:
    """ValueError for a body that is not a list of events (the log is corrupt there)."""
    try:
        docs = json.loads(data)
        if not isinstance(docs, list):
            raise TypeError("not a list")
        events: list[Event] = []
        for d in docs:
            key = (str(d["g"]), str(d["t"]), int(d["q"]))
            base = int(d["b"])
            kind = d["k"]
            if kind == "D":
                events.append(Delivered(key, base, int(d["o"]), int(d["a"]), int(d["n"]), int(d["u"])))
            elif kind == "A":
                events.append(Acked(key, base, int(d["o"]), int(d["n"])))
            elif kind == "C":
                events.append(Changed(key, base, int(d["o"]), int(d["n"]), int(d["m"]), int(d["u"])))
            elif kind == "R":
                events.append(Retried(key, base, int(d["o"]), int(d["n"])))
            elif kind == "P":
                events.append(PassedOver(key, base, int(d["x"])))
            else:
                raise ValueError(f"unknown event kind {kind!r}")
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not pop events: {exc}") from None
    return events
