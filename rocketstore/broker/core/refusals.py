"""`Refusal`: why the broker core turns a request (or one message of it) down, protocol-neutral.

A refusal is an expected outcome, never an exception: a `Reason` (one enum for every service of
the core, named as RocketMQ names the cause where it has a name) and the text the client sees.
`master_endpoint` is set on the refusals that mean "write to the master instead" (NOT_MASTER,
FENCED): the gRPC front end hands it to the client in its status.

Each front end turns a reason into its own code in one table: `rocketstore/broker/codes.py` for
the gRPC client API, `rocketstore/broker/remoting_codes.py` for the remoting API. A reason the
store decided (a put's `PutMessageStatus`, a read's `GetMessageStatus`) is not a refusal: those
statuses travel as they are and the same tables map them.

Plain values; thread-safe.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Reason(enum.Enum):
    # -- the broker's role ------------------------------------------------------------------------
    NOT_MASTER = "NOT_MASTER"  # a slave: write to the master (named when known)
    FENCED = "FENCED"  # controller mode: a master that may not take or acknowledge a write now
    NO_MASTER = "NO_MASTER"  # controller mode: a slave whose group has no master elected now
    DRAINED = "DRAINED"  # brokerPermission without the write bit: producers go elsewhere
    # -- names and resources ----------------------------------------------------------------------
    ILLEGAL_TOPIC = "ILLEGAL_TOPIC"  # not a legal topic name
    SYSTEM_TOPIC = "SYSTEM_TOPIC"  # a topic of the broker's own, closed to clients
    TOPIC_NOT_FOUND = "TOPIC_NOT_FOUND"  # no such topic (and none created)
    TOPIC_CREATION_THROTTLED = "TOPIC_CREATION_THROTTLED"  # autoCreateTopicPerMinute spent
    TOPIC_NOT_WRITABLE = "TOPIC_NOT_WRITABLE"  # the topic's perm lacks the write bit
    TOPIC_NOT_READABLE = "TOPIC_NOT_READABLE"  # the topic's perm lacks the read bit
    ILLEGAL_GROUP = "ILLEGAL_GROUP"  # not a legal consumer group name
    ILLEGAL_QUEUE_ID = "ILLEGAL_QUEUE_ID"  # out of 0..2^31-1, or past the topic's queues
    # -- offsets and reads ------------------------------------------------------------------------
    ILLEGAL_OFFSET = "ILLEGAL_OFFSET"  # a committed offset out of 0..2^63-1
    OFFSET_NOT_FOUND = "OFFSET_NOT_FOUND"  # the group committed no offset for the queue
    TABLE_FULL = "TABLE_FULL"  # a bounded table (offsets, clients) cannot take a new entry
    ILLEGAL_FILTER = "ILLEGAL_FILTER"  # a subscription expression that does not parse
    UNSUPPORTED_FILTER = "UNSUPPORTED_FILTER"  # a filter type the broker does not serve (SQL92)
    ILLEGAL_POLLING_TIME = "ILLEGAL_POLLING_TIME"  # a negative long-polling time
    CONSUMER_NOT_ONLINE = "CONSUMER_NOT_ONLINE"  # no consumer of the group sent a heartbeat lately
    # -- messages ---------------------------------------------------------------------------------
    BODY_EMPTY = "BODY_EMPTY"
    BODY_TOO_LARGE = "BODY_TOO_LARGE"  # past maxMessageSize (a batch: its bodies together)
    MESSAGE_CORRUPTED = "MESSAGE_CORRUPTED"  # the body does not match the digest sent with it
    ILLEGAL_PROPERTY_KEY = "ILLEGAL_PROPERTY_KEY"
    ILLEGAL_TAG = "ILLEGAL_TAG"
    ILLEGAL_KEY = "ILLEGAL_KEY"
    ILLEGAL_MESSAGE_GROUP = "ILLEGAL_MESSAGE_GROUP"
    ILLEGAL_MESSAGE_ID = "ILLEGAL_MESSAGE_ID"
    ILLEGAL_DELIVERY_TIME = "ILLEGAL_DELIVERY_TIME"
    PROPERTIES_TOO_LARGE = "PROPERTIES_TOO_LARGE"
    ILLEGAL_MESSAGE = "ILLEGAL_MESSAGE"  # a message the broker cannot store as sent, for another cause
    # -- anything else ----------------------------------------------------------------------------
    BAD_REQUEST = "BAD_REQUEST"  # a request field out of its range
    INTERNAL_ERROR = "INTERNAL_ERROR"  # a bug met while serving: logged, the request answered


# The start of every refusal that means "write elsewhere (or later)": a slave's, or a controller-
# mode master's that may not acknowledge now. Clients look for it when no master endpoint is given.
NOT_MASTER_TEXT = "not master"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request, or one message of it, is turned down; nothing was written for it (except
    a late FENCED, whose text says the write may or may not be kept)."""

    reason: Reason
    text: str
    master_endpoint: str = ""


def internal_error(exc: BaseException) -> Refusal:
    """The refusal answering a request that ran into a bug (the caller logs the traceback)."""
    return Refusal(Reason.INTERNAL_ERROR, f"internal error ({type(exc).__name__}); see the broker log")
