"""`PullService`: reading a queue by offset for a consumer (gRPC's PullMessage, remoting's
PULL_MESSAGE), checks, size limits, long polling and the classification of the store's answer,
decided once.

Checks (`check`), in order: the group's name, the queue (topic name, queue id range, the topic
exists: reads never create topics; `queues.queue_problem`), the topic is readable, the batch size
is positive, the wait is not negative, the filter is a TAG expression that parses.

A read takes at most `MAX_PULL_BATCH` messages and `MAX_PULL_BYTES` bytes (the first message
whatever its size). The store's `GetMessageStatus` becomes a `PullAction`:

- FOUND: DELIVER, the messages and the next offset;
- NO_MATCHED_MESSAGE, MESSAGE_WAS_REMOVING, OFFSET_FOUND_NULL: SKIP, no messages and the next
  offset to go on from;
- NO_MESSAGE_IN_QUEUE, OFFSET_OVERFLOW_ONE, NO_MATCHED_LOGIC_QUEUE at offset 0: WAIT, long
  polled, then "no new message" at the same offset;
- OFFSET_TOO_SMALL, OFFSET_OVERFLOW_BADLY, NO_MATCHED_LOGIC_QUEUE past 0, an empty queue read past
  its start, a negative offset: RESET, the offset to begin again from;
- MESSAGE_CORRUPTED: REFUSE, `corrupted_text`, and the next offset stays on the damaged message.

A WAIT is long polled (`long_polling.poll`) for the time the client asked, within
longPollingMaxMs and the call's own deadline; a WAIT at a queue offset a put was already given
but the dispatcher has not queued yet (`store.queue_offset_undispatched`) waits for that dispatch
even without a long poll, within `long_polling.dispatch_wait_seconds` (read your writes); a SKIP
after a wait (arrivals the filter drops) moves on and keeps waiting for one it keeps. Each front
end maps the action to its codes (`codes.PULL_CODES`, `remoting_codes.PULL_RESPONSE`).

Thread-safety: `check` and `classify` are pure over the store's tables; `read` runs on the event
loop of the `ArrivalWatch` it is given, with store reads in worker threads.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from store import GetMessageResult, GetMessageStatus, MessageExt, MessageStore, TagFilter

from ..config import BrokerConfigs
from .long_polling import ArrivalWatch, Read, Step, dispatch_wait_seconds, long_poll_seconds, poll
from .queues import group_problem, queue_problem
from .refusals import Reason, Refusal

MAX_PULL_BATCH = 1024
# Bytes one pull reads at most (the first message is returned whatever its size).
MAX_PULL_BYTES = 4 * 1024 * 1024
TAG = "TAG"
SQL92 = "SQL92"


class PullAction(enum.Enum):
    """What a pull answers for a store read's status."""

    DELIVER = "DELIVER"  # the messages
    SKIP = "SKIP"  # no messages; the client goes on from next_offset
    WAIT = "WAIT"  # nothing yet: long poll, then "no new message"
    RESET = "RESET"  # an illegal offset, with the offset to go on from
    REFUSE = "REFUSE"  # the message there is damaged; next_offset stays on it


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


def pull_action(status: GetMessageStatus) -> PullAction:
    return PULL_ACTIONS[status]


def classify(result: GetMessageResult, offset: int) -> PullAction:
    """The action for a read of `offset` (the request's queue was checked to exist)."""
    if result.status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE:
        # A queue no message reached yet: empty at 0, and nothing to find past it.
        return PullAction.WAIT if offset == 0 else PullAction.RESET
    action = pull_action(result.status)
    if action is PullAction.WAIT and result.next_begin_offset != offset:
        return PullAction.RESET  # an empty queue read past its start: begin again at 0
    return action


def corrupted_text(result: GetMessageResult) -> str:
    """What a pull that met a damaged message answers: which message, and how a consumer goes
    past it."""
    offset = result.next_begin_offset
    return (
        f"MESSAGE_CORRUPTED: {result.reason}; this broker does not serve it. Its body is lost here: "
        f"pull from offset {offset + 1} to go past it (see docs/store.md, 'Damaged records')"
    )


def tag_filter(kind: str, expression: str) -> TagFilter | None | Refusal:
    """The store's filter for a subscription (`kind` TAG or SQL92), or the refusal."""
    if kind == SQL92:
        return Refusal(Reason.UNSUPPORTED_FILTER, "SQL92 filters are not supported; use a TAG expression")
    if kind != TAG:
        return Refusal(Reason.ILLEGAL_FILTER, f"unknown filter type {kind}")
    try:
        return TagFilter.parse(expression)
    except ValueError as exc:
        return Refusal(Reason.ILLEGAL_FILTER, str(exc))


@dataclass(frozen=True, slots=True)
class PullRequest:
    group: str
    topic: str
    queue_id: int
    offset: int  # the queue offset to read from
    max_messages: int
    wait_ms: int = 0  # how long a read that finds nothing may wait (0: answer at once)
    filter_type: str = TAG
    filter_expression: str = "*"
    deadline_s: float | None = None  # time left before the call's own deadline, when it has one


@dataclass(frozen=True, slots=True)
class PullResult:
    action: PullAction
    next_offset: int
    min_offset: int
    max_offset: int
    messages: tuple[MessageExt, ...] = ()
    status: GetMessageStatus | None = None  # the store's status of the read answered (None: none)
    text: str = ""


class PullService:
    def __init__(self, store: MessageStore, configs: BrokerConfigs) -> None:
        self._store = store
        self._configs = configs

    def check(self, request: PullRequest) -> Refusal | None:
        """Why the pull is refused before any read; None when it may read."""
        refused = group_problem(request.group) or queue_problem(self._store, request.topic, request.queue_id)
        if refused is not None:
            return refused
        config = self._store.topics.get(request.topic)
        if config is not None and not config.readable:
            return Refusal(Reason.TOPIC_NOT_READABLE, f"topic {config.topic_name} is not readable (perm {config.perm})")
        if request.max_messages <= 0:
            return Refusal(Reason.BAD_REQUEST, f"the batch size must be positive, got {request.max_messages}")
        if request.wait_ms < 0:
            return Refusal(Reason.ILLEGAL_POLLING_TIME, f"the long-polling time is negative ({request.wait_ms} ms)")
        refused_filter = tag_filter(request.filter_type, request.filter_expression)
        return refused_filter if isinstance(refused_filter, Refusal) else None

    def wait_seconds(self, request: PullRequest) -> float:
        return long_poll_seconds(request.wait_ms, self._configs.broker.long_polling_max_ms, request.deadline_s)

    async def read(
        self,
        request: PullRequest,
        watch: ArrivalWatch,
        before_read: Callable[[], Awaitable[object]] | None = None,
    ) -> PullResult:
        """Read (and long poll) a request `check` passed. `before_read` is awaited before each
        store read (the remoting adapter waits there while its peer does not read answers)."""
        store, topic, queue_id = self._store, request.topic, request.queue_id
        if request.offset < 0:
            text = f"offset {request.offset} is negative"
            first = store.min_queue_offset(topic, queue_id)
            return PullResult(PullAction.RESET, first, first, store.max_queue_offset(topic, queue_id), text=text)
        found = tag_filter(request.filter_type, request.filter_expression)
        assert not isinstance(found, Refusal), "read() of a request check() refused"
        batch = min(request.max_messages, MAX_PULL_BATCH)
        offset = request.offset

        async def attempt(waited: bool) -> Read[PullResult]:
            nonlocal offset
            if before_read is not None:
                await before_read()
            # Asked before the read: a dispatch that ends between the two cannot make an empty read
            # look like the queue's real end.
            pending = store.queue_offset_undispatched(topic, queue_id, offset)
            result = await asyncio.to_thread(
                store.get_message, request.group, topic, queue_id, offset, batch, MAX_PULL_BYTES, found
            )
            action = classify(result, offset)
            if action is PullAction.SKIP and waited and result.next_begin_offset > offset:
                offset = result.next_begin_offset  # arrivals the filter drops: wait for one it keeps
                return Read(Step.AGAIN, _answer(result, PullAction.SKIP, offset))
            answer = _answer(result, action, offset, self._text(result, action, request, offset))
            if action is not PullAction.WAIT:
                return Read(Step.DONE, answer)
            return Read(Step.PENDING if pending else Step.WAIT, answer)

        pending_wait_s = dispatch_wait_seconds(request.deadline_s)
        return await poll(
            watch, [(topic, queue_id)], self.wait_seconds(request), attempt, pending_wait_s=pending_wait_s
        )

    @staticmethod
    def _text(result: GetMessageResult, action: PullAction, request: PullRequest, offset: int) -> str:
        if action is PullAction.REFUSE:
            return corrupted_text(result)
        if action is PullAction.RESET:
            bounds = f"[{result.min_offset}, {result.max_offset}]"
            return f"offset {offset} is outside queue {request.topic}:{request.queue_id} {bounds}"
        if action is PullAction.WAIT:
            return "no new message"
        return ""


def _answer(result: GetMessageResult, action: PullAction, offset: int, text: str = "") -> PullResult:
    # A wait answers at the offset it waited on; every other action where the store says to go on.
    next_offset = offset if action is PullAction.WAIT else result.next_begin_offset
    messages = result.messages if action is PullAction.DELIVER else ()
    return PullResult(action, next_offset, result.min_offset, result.max_offset, messages, result.status, text)
