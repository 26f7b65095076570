"""Receipt handles of pop consumption: opaque to clients, verified by the broker group.

A handle names one delivery: the queue, the queue offset, and the delivery's token (`PopState`
gives every delivery a token; a redelivery or a change of invisible time makes a new one, so an
older handle no longer matches). The broker signs it with a key every broker of the group derives
from the replication secret, so a promoted slave verifies the handles its old master gave out, and
a client cannot make a handle for a message it did not receive. The group and topic are signed but
not carried: the AckMessage and ChangeInvisibleDuration requests name them.

Wire form (ASCII): `<queue id>.<queue offset>.<token>.<invisible until, ms>.<signature>`, the
signature being the first 16 bytes of HMAC-SHA256(key, group NUL topic NUL the four numbers) in
hex. Thread-safety: immutable.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

_SIGNATURE_HEX = 32
MAX_HANDLE_LENGTH = 256


@dataclass(frozen=True, slots=True)
class Receipt:
    queue_id: int
    queue_offset: int
    token: int
    invisible_until_ms: int


class InvalidReceiptHandle(ValueError):
    """The handle is malformed or was not signed by this broker group."""


class ReceiptSigner:
    def __init__(self, secret: bytes) -> None:
        # A key of its own: a handle never reveals anything usable against replication.
        self._key = hmac.new(secret, b"rocketstore receipt handle v1", hashlib.sha256).digest()

    def _signature(self, group: str, topic: str, fields: str) -> str:
        data = b"\0".join((group.encode(), topic.encode(), fields.encode()))
        return hmac.new(self._key, data, hashlib.sha256).hexdigest()[:_SIGNATURE_HEX]

    def sign(self, group: str, topic: str, receipt: Receipt) -> str:
        fields = f"{receipt.queue_id}.{receipt.queue_offset}.{receipt.token}.{receipt.invisible_until_ms}"
        return f"{fields}.{self._signature(group, topic, fields)}"

    def verify(self, group: str, topic: str, handle: str) -> Receipt:
        if not handle or len(handle) > MAX_HANDLE_LENGTH:
            raise InvalidReceiptHandle("the receipt handle is empty or too long")
        if not handle.isascii():
            # A handle is ASCII by construction; compare_digest also refuses non-ASCII text with a
            # TypeError, which must not reach the client as an internal error.
            raise InvalidReceiptHandle("the receipt handle is malformed (not ASCII)")
        fields, _, signature = handle.rpartition(".")
        parts = fields.split(".")
        if len(parts) != 4 or not all(p.isdigit() for p in parts):
            raise InvalidReceiptHandle("the receipt handle is malformed")
        if not hmac.compare_digest(signature, self._signature(group, topic, fields)):
            raise InvalidReceiptHandle(
                f"the receipt handle was not issued for group {group} and topic {topic} by this broker group"
            )
        queue_id, queue_offset, token, until = (int(p) for p in parts)
        return Receipt(queue_id, queue_offset, token, until)
