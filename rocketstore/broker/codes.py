"""Store outcomes as codes of the RocketMQ 5 messaging API (`apache.rocketmq.v2.Code`).

Puts (`PutMessageStatus` -> Code):

| store status | code | stored? |
|---|---|---|
| PUT_OK | OK | yes |
| FLUSH_DISK_TIMEOUT | MASTER_PERSISTENCE_TIMEOUT | yes, the flush guarantee is missing |
| FLUSH_SLAVE_TIMEOUT | SLAVE_PERSISTENCE_TIMEOUT | yes, the replica guarantee is missing |
| SLAVE_NOT_AVAILABLE | HA_NOT_AVAILABLE | yes, on the master only |
| IN_SYNC_REPLICAS_NOT_ENOUGH | HA_NOT_AVAILABLE | yes, on fewer replicas than inSyncReplicas |
| MESSAGE_ILLEGAL | by reason: ILLEGAL_TOPIC, TOPIC_NOT_FOUND, FORBIDDEN (topic not writable), MESSAGE_BODY_TOO_LARGE, ILLEGAL_DELIVERY_TIME, INVALID_TRANSACTION_ID, else BAD_REQUEST | no |
| PROPERTIES_SIZE_EXCEEDED | MESSAGE_PROPERTIES_TOO_LARGE | no |
| SERVICE_NOT_AVAILABLE | FORBIDDEN when the store is a slave, else INTERNAL_SERVER_ERROR | no |
| OS_PAGE_CACHE_BUSY | TOO_MANY_REQUESTS | no |
| CREATE_MAPPED_FILE_FAILED, UNKNOWN_ERROR | INTERNAL_ERROR | no |

SERVICE_NOT_AVAILABLE is a full disk, a read-only or stopping store: a condition of this server,
not of the request, that passes (or that another broker does not have). RocketMQ's producers
retry their SERVICE_NOT_AVAILABLE elsewhere; INTERNAL_SERVER_ERROR (50001) is the v2 API's
retryable "the server cannot serve this now", while INTERNAL_ERROR (50000) is kept for faults
(a segment that cannot be created, a bug). A store that is a slave is the one case the client
can act on precisely (send to the master), hence FORBIDDEN.

The store gives MESSAGE_ILLEGAL one status for many causes and says which in its reason text;
the finer codes are chosen from that text (tests pin the texts the store produces).

Pulls (`core.pull.PullAction` -> Code): DELIVER and SKIP answer OK (with messages, or none and a
next offset), WAIT answers MESSAGE_NOT_FOUND once the long poll is over, RESET ILLEGAL_OFFSET with
the corrected offset, REFUSE MESSAGE_CORRUPTED (the damaged message's own offset as the next one:
the broker never goes past it on its own).

The broker core's refusals (`core.refusals.Reason` -> Code, `REASON_CODES`): FORBIDDEN for a
slave (NOT_MASTER), a fenced master (FENCED), a drained broker and a topic without the permission;
the status names the master where the refusal does. Every reason has a code (a unit test checks).

Pure functions and constants; thread-safe.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from store import PutMessageResult, PutMessageStatus
from wire.rpc import messaging_pb2 as pb

from .core.pull import PullAction
from .core.refusals import Reason, Refusal
from .core.send import SendOutcome

P = PutMessageStatus

PUT_CODES: dict[PutMessageStatus, "pb.Code"] = {
    P.PUT_OK: pb.OK,
    P.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
    P.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
    P.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE,
    P.IN_SYNC_REPLICAS_NOT_ENOUGH: pb.HA_NOT_AVAILABLE,
    P.MESSAGE_ILLEGAL: pb.BAD_REQUEST,
    P.PROPERTIES_SIZE_EXCEEDED: pb.MESSAGE_PROPERTIES_TOO_LARGE,
    P.SERVICE_NOT_AVAILABLE: pb.INTERNAL_SERVER_ERROR,
    P.OS_PAGE_CACHE_BUSY: pb.TOO_MANY_REQUESTS,
    P.CREATE_MAPPED_FILE_FAILED: pb.INTERNAL_ERROR,
    P.UNKNOWN_ERROR: pb.INTERNAL_ERROR,
}

# What each status means to the producer, when the store gave no reason.
_PUT_TEXTS: dict[PutMessageStatus, str] = {
    P.PUT_OK: "stored",
    P.FLUSH_DISK_TIMEOUT: "stored, but not flushed to the master's disk within syncFlushTimeout",
    P.FLUSH_SLAVE_TIMEOUT: "stored, but not acknowledged by enough slaves within slaveTimeout",
    P.SLAVE_NOT_AVAILABLE: "stored on the master only: no slave fit to replicate it",
    P.IN_SYNC_REPLICAS_NOT_ENOUGH: "stored, but on fewer replicas than inSyncReplicas",
    P.MESSAGE_ILLEGAL: "illegal message",
    P.PROPERTIES_SIZE_EXCEEDED: "the message's properties are too large",
    P.SERVICE_NOT_AVAILABLE: "the broker cannot store messages now",
    P.OS_PAGE_CACHE_BUSY: "the broker is busy (its CommitLog lock is held too long); retry later",
    P.CREATE_MAPPED_FILE_FAILED: "the broker could not create a CommitLog segment",
    P.UNKNOWN_ERROR: "unknown error",
}

# Codes that mean "the message is stored": the entry carries its id and offsets.
STORED_CODES = frozenset({pb.OK, pb.MASTER_PERSISTENCE_TIMEOUT, pb.SLAVE_PERSISTENCE_TIMEOUT, pb.HA_NOT_AVAILABLE})

# MESSAGE_ILLEGAL reasons, first match wins (the texts are the store's: codec, topic admission,
# schedule and transaction checks).
_ILLEGAL_REASONS: tuple[tuple[re.Pattern[str], "pb.Code"], ...] = (
    (re.compile(r"does not exist"), pb.TOPIC_NOT_FOUND),
    (re.compile(r"not writable"), pb.FORBIDDEN),
    (re.compile(r"^topic\b"), pb.ILLEGAL_TOPIC),
    (re.compile(r"maxMessageSize"), pb.MESSAGE_BODY_TOO_LARGE),
    (re.compile(r"is not a delay level"), pb.ILLEGAL_DELIVERY_TIME),
    (re.compile(r"no prepared message|is not prepared"), pb.INVALID_TRANSACTION_ID),
)
_SLAVE_REASON = re.compile(r"\bslave\b", re.IGNORECASE)


def put_code(status: PutMessageStatus, reason: str = "") -> "pb.Code":
    """The client API code for a put's status (and, where it decides, the store's reason)."""
    if status is P.MESSAGE_ILLEGAL:
        for pattern, code in _ILLEGAL_REASONS:
            if pattern.search(reason):
                return code
    elif status is P.SERVICE_NOT_AVAILABLE and _SLAVE_REASON.search(reason):
        return pb.FORBIDDEN
    return PUT_CODES[status]


def put_text(status: PutMessageStatus, reason: str = "") -> str:
    """The status message: the store's reason when it gave one, else what the status means."""
    return f"{status.name}: {reason}" if reason else f"{status.name}: {_PUT_TEXTS[status]}"


def put_status(result: PutMessageResult) -> pb.Status:
    return pb.Status(code=put_code(result.status, result.reason), message=put_text(result.status, result.reason))


def code_name(code: int) -> str:
    try:
        return pb.Code.Name(code)
    except ValueError:
        return f"CODE_{code}"


def summarize(statuses: Iterable[pb.Status]) -> pb.Status:
    """A response's status from its entries': OK when all are OK, the shared code when all share
    one (with the first entry's message), MULTIPLE_RESULTS when they differ."""
    statuses = list(statuses)
    if not statuses:
        return pb.Status(code=pb.BAD_REQUEST, message="no entries")
    codes = {s.code for s in statuses}
    if len(codes) == 1:
        first = statuses[0]
        if first.code == pb.OK:
            return pb.Status(code=pb.OK, message="OK")
        return pb.Status(code=first.code, message=first.message, master_endpoint=first.master_endpoint)
    counts = ", ".join(f"{code_name(code)} x{sum(1 for s in statuses if s.code == code)}" for code in sorted(codes))
    return pb.Status(code=pb.MULTIPLE_RESULTS, message=f"entries differ: {counts}")


PULL_CODES: dict[PullAction, "pb.Code"] = {
    PullAction.DELIVER: pb.OK,
    PullAction.SKIP: pb.OK,
    PullAction.WAIT: pb.MESSAGE_NOT_FOUND,
    PullAction.RESET: pb.ILLEGAL_OFFSET,
    PullAction.REFUSE: pb.MESSAGE_CORRUPTED,
}

R = Reason

# The broker core's refusals (`core.refusals.Reason`) as codes of this API.
REASON_CODES: dict[Reason, "pb.Code"] = {
    R.NOT_MASTER: pb.FORBIDDEN,
    R.FENCED: pb.FORBIDDEN,
    R.NO_MASTER: pb.HA_NOT_AVAILABLE,
    R.DRAINED: pb.FORBIDDEN,
    R.ILLEGAL_TOPIC: pb.ILLEGAL_TOPIC,
    R.SYSTEM_TOPIC: pb.ILLEGAL_TOPIC,
    R.TOPIC_NOT_FOUND: pb.TOPIC_NOT_FOUND,
    R.TOPIC_CREATION_THROTTLED: pb.TOO_MANY_REQUESTS,
    R.TOPIC_NOT_WRITABLE: pb.FORBIDDEN,
    R.TOPIC_NOT_READABLE: pb.FORBIDDEN,
    R.ILLEGAL_GROUP: pb.ILLEGAL_CONSUMER_GROUP,
    R.ILLEGAL_QUEUE_ID: pb.BAD_REQUEST,
    R.ILLEGAL_OFFSET: pb.ILLEGAL_OFFSET,
    R.OFFSET_NOT_FOUND: pb.OFFSET_NOT_FOUND,
    R.TABLE_FULL: pb.TOO_MANY_REQUESTS,
    R.ILLEGAL_FILTER: pb.ILLEGAL_FILTER_EXPRESSION,
    R.UNSUPPORTED_FILTER: pb.UNSUPPORTED,
    R.ILLEGAL_POLLING_TIME: pb.ILLEGAL_POLLING_TIME,
    R.CONSUMER_NOT_ONLINE: pb.CONSUMER_GROUP_NOT_FOUND,
    R.BODY_EMPTY: pb.MESSAGE_BODY_EMPTY,
    R.BODY_TOO_LARGE: pb.MESSAGE_BODY_TOO_LARGE,
    R.MESSAGE_CORRUPTED: pb.MESSAGE_CORRUPTED,
    R.ILLEGAL_PROPERTY_KEY: pb.ILLEGAL_MESSAGE_PROPERTY_KEY,
    R.ILLEGAL_TAG: pb.ILLEGAL_MESSAGE_TAG,
    R.ILLEGAL_KEY: pb.ILLEGAL_MESSAGE_KEY,
    R.ILLEGAL_MESSAGE_GROUP: pb.ILLEGAL_MESSAGE_GROUP,
    R.ILLEGAL_MESSAGE_ID: pb.ILLEGAL_MESSAGE_ID,
    R.ILLEGAL_DELIVERY_TIME: pb.ILLEGAL_DELIVERY_TIME,
    R.PROPERTIES_TOO_LARGE: pb.MESSAGE_PROPERTIES_TOO_LARGE,
    R.ILLEGAL_MESSAGE: pb.BAD_REQUEST,
    R.BAD_REQUEST: pb.BAD_REQUEST,
    R.INTERNAL_ERROR: pb.INTERNAL_ERROR,
}


def refusal_status(refusal: Refusal) -> pb.Status:
    """A refusal of the broker core as this API's status (naming the master where it has one)."""
    code = REASON_CODES[refusal.reason]
    return pb.Status(code=code, message=refusal.text or code_name(code), master_endpoint=refusal.master_endpoint)


def outcome_status(outcome: SendOutcome) -> pb.Status:
    """One message's send outcome as this API's status."""
    if outcome.refusal is not None:
        return refusal_status(outcome.refusal)
    assert outcome.status is not None
    return pb.Status(code=put_code(outcome.status, outcome.reason), message=put_text(outcome.status, outcome.reason))
