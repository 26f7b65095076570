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

Pulls (`GetMessageStatus` -> `PullAction`): FOUND delivers (OK); NO_MATCHED_MESSAGE,
MESSAGE_WAS_REMOVING and OFFSET_FOUND_NULL skip ahead (OK, no messages, a next offset);
NO_MESSAGE_IN_QUEUE and OFFSET_OVERFLOW_ONE wait (long poll, then MESSAGE_NOT_FOUND);
OFFSET_TOO_SMALL, OFFSET_OVERFLOW_BADLY and NO_MATCHED_LOGIC_QUEUE reset (ILLEGAL_OFFSET with
the corrected offset); MESSAGE_CORRUPTED refuses (MESSAGE_CORRUPTED, `corrupted_text`, and the
damaged message's own offset as the next one: the broker never goes past it on its own).

Pure functions and constants; thread-safe.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable

from wire.rpc import messaging_pb2 as pb
from store import GetMessageResult, GetMessageStatus, PutMessageResult, PutMessageStatus

P = PutMessageStatus

# The start of every FORBIDDEN that means "write elsewhere (or later)": a slave's refusal, or a
# controller-mode master that may not acknowledge now. Clients look for it when the master's
# endpoint is not known (the status then carries none).
NOT_MASTER = "not master"

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


class PullAction(enum.Enum):
    """What a PullMessage answer does with a store read's status."""

    DELIVER = "DELIVER"  # OK with the messages
    SKIP = "SKIP"  # OK without messages; the client goes on from next_offset
    WAIT = "WAIT"  # nothing yet: long poll, then MESSAGE_NOT_FOUND
    RESET = "RESET"  # ILLEGAL_OFFSET with the offset to go on from
    REFUSE = "REFUSE"  # MESSAGE_CORRUPTED: the message there is damaged; next_offset stays on it


G = GetMessageStatus

PULL_ACTIONS: dict[GetMessageStatus, PullAction] = {
    G.FOUND: PullAction.DELIVER,
    G.NO_MATCHED_MESSAGE: PullAction.SKIP,
    G.MESSAGE_WAS_REMOVING: PullAction.SKIP,
    G.OFFSET_FOUND_NULL: PullAction.SKIP,
    G.NO_MESSAGE_IN_QUEUE: PullAction.WAIT,
    G.OFFSET_OVERFLOW_ONE: PullAction.WAIT,
    G.OFFSET_TOO_SMALL: PullAction.RESET,
    G.OFFSET_OVERFLOW_BADLY: PullAction.RESET,
    G.NO_MATCHED_LOGIC_QUEUE: PullAction.RESET,
    G.MESSAGE_CORRUPTED: PullAction.REFUSE,
}

PULL_CODES: dict[PullAction, int] = {
    PullAction.DELIVER: pb.OK,
    PullAction.SKIP: pb.OK,
    PullAction.WAIT: pb.MESSAGE_NOT_FOUND,
    PullAction.RESET: pb.ILLEGAL_OFFSET,
    PullAction.REFUSE: pb.MESSAGE_CORRUPTED,
}


def pull_action(status: GetMessageStatus) -> PullAction:
    return PULL_ACTIONS[status]


def corrupted_text(result: GetMessageResult) -> str:
    """What a pull that met a damaged message answers (gRPC and remoting alike): which message,
    and how a consumer goes past it."""
    offset = result.next_begin_offset
    return (
        f"MESSAGE_CORRUPTED: {result.reason}; this broker does not serve it. Its body is lost here: "
        f"pull from offset {offset + 1} to go past it (see docs/store.md, 'Damaged records')"
    )
