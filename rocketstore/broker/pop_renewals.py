"""Which pop deliveries the broker renews for their consumer, and when (sans-IO): the auto-renew
receives of RocketMQ 5's PushConsumer, as its proxy renews them.

A receive with `auto_renew` and no invisible duration registers each message it hands out under
the receipt handle the client got. Before the delivery's invisible time runs out (`ahead_ms`
before it) the broker changes it to `slice_ms` from then, which answers a new handle; the client
keeps acking, nacking or dead-lettering with the handle it got, so `take` answers the current one
and ends the renewal. A renewal also ends when its client goes away (its Telemetry stream ends, or
NotifyClientTermination), when the delivery was renewed for `max_total_ms`, or when a change is
refused (the delivery was acked or redelivered some other way). At most `max_entries` deliveries
are renewed at once; past that a delivery keeps the invisible time it was given.

Thread-safety: none; the pop API's event loop serialises calls.
"""

from __future__ import annotations

from dataclasses import dataclass

RenewalKey = tuple[str, str, str]  # (group, topic, the handle the client got)


@dataclass(slots=True)
class Renewal:
    client_id: str
    handle: str  # the current handle (the one the last renewal answered)
    until_ms: int  # the delivery is invisible until then
    started_ms: int


@dataclass(frozen=True, slots=True)
class RenewalLimits:
    ahead_ms: int  # renew this long before the invisible time runs out
    slice_ms: int  # each renewal makes the delivery invisible this long from then
    max_total_ms: int  # renewals stop this long after the receive
    max_entries: int  # deliveries renewed at once


class RenewalSchedule:
    def __init__(self, limits: RenewalLimits) -> None:
        self.limits = limits
        self._entries: dict[RenewalKey, Renewal] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, client_id: str, group: str, topic: str, handle: str, until_ms: int, now_ms: int) -> bool:
        """Renew this delivery from now on; False when the schedule is full (it is not renewed)."""
        if len(self._entries) >= self.limits.max_entries:
            return False
        self._entries[(group, topic, handle)] = Renewal(client_id, handle, until_ms, now_ms)
        return True

    def take(self, group: str, topic: str, handle: str) -> str:
        """The client is done with a delivery (ack, nack, dead letter): its current handle (the one
        given when it is not renewed), and no more renewals."""
        entry = self._entries.pop((group, topic, handle), None)
        return entry.handle if entry is not None else handle

    def due(self, now_ms: int) -> list[tuple[RenewalKey, str]]:
        """The deliveries to renew now, with their current handles; those renewed long enough are
        dropped (their invisible time runs out as it is)."""
        limits = self.limits
        out, expired = [], []
        for key, entry in self._entries.items():
            if now_ms - entry.started_ms >= limits.max_total_ms:
                expired.append(key)
            elif entry.until_ms - limits.ahead_ms <= now_ms:
                out.append((key, entry.handle))
        for key in expired:
            del self._entries[key]
        return out

    def handle_of(self, key: RenewalKey) -> str | None:
        """The delivery's current handle; None once its renewals ended."""
        entry = self._entries.get(key)
        return entry.handle if entry is not None else None

    def renewed(self, key: RenewalKey, handle: str, until_ms: int) -> None:
        """A renewal succeeded: its new handle and invisible time (nothing if it ended meanwhile)."""
        entry = self._entries.get(key)
        if entry is not None:
            entry.handle, entry.until_ms = handle, until_ms

    def drop(self, key: RenewalKey) -> None:
        """A renewal was refused: the delivery is no longer this one's to renew."""
        self._entries.pop(key, None)

    def client_gone(self, client_id: str) -> int:
        """The client went away: its deliveries are not renewed any more. How many were."""
        gone = [key for key, entry in self._entries.items() if entry.client_id == client_id]
        for key in gone:
            del self._entries[key]
        return len(gone)

    def next_due_ms(self) -> int | None:
        """When the next renewal is due (None: nothing to renew)."""
        ahead = self.limits.ahead_ms
        return min((e.until_ms - ahead for e in self._entries.values()), default=None)
