"""`SendService`: what the broker decides about a producer's send, once for both front ends
(RocketMQ's `AbstractSendMessageProcessor.msgCheck` and the put's statuses). The waiting (topic
creation in a worker thread, gathering a loop turn's sends, the put's future) is `sender.Sender`.

A send is a sequence of `SendItem`s (the front end decoded them into store messages), answered
one `SendOutcome` each. The checks, in order; the first that fails refuses the item (a unit, a
remoting batch, is refused whole):

1. the broker's role (`RoleGate.write_refusal`): NOT_MASTER on a slave, FENCED when controller
   mode fences this master; the whole request;
2. the topic's name (ILLEGAL_TOPIC), not a system topic (SYSTEM_TOPIC), a queue id the producer
   names within 0..2^31-1 (ILLEGAL_QUEUE_ID), the broker not drained (DRAINED);
3. the topic exists or is created within the auto-creation limits (TOPIC_NOT_FOUND,
   TOPIC_CREATION_THROTTLED), and is writable (TOPIC_NOT_WRITABLE);
4. the body: not empty (BODY_EMPTY), within maxMessageSize (a unit: its bodies together;
   BODY_TOO_LARGE);
5. what the front end found decoding the message (`SendItem.refused`: properties, tags, keys,
   digests);
6. the queue: the one the producer names, below the topic's write queues (ILLEGAL_QUEUE_ID); else
   the message group's Java String.hashCode (abs) modulo the write queues; else one round-robin
   queue per topic and request (a request's messages for one queue share one append);
7. a timed message (`deliver_at_ms`) waits in the timer topic, a transactional one
   (`transaction_immunity_s`) is stored as a half message; both at once are refused.

A unit as a remoting batch is (one topic, the queue its producer names, plain messages) takes
steps 1-3 and 6 once for all its messages and step 4 once for its bodies (`_plan_unit`); anything
else in a unit is planned message by message, which finds the same refusal. Several items that
are not a unit (a gRPC SendMessage) are planned at once the same way when they pass together
(`plan_whole`: one served topic and queue, plain messages, no producer id twice, one append),
each still answered for itself; otherwise message by message.

A new send check is a step here (and, when it has a new cause, a `Reason` with a row in each
front end's table).

Batching (`put_groups`, pure): the messages of a loop turn for one topic and queue are put as one
append (cut where it would pass the store's append limit or its bodies maxMessageSize), each
getting its own outcome. A unit, a delayed, timed or transactional message, and a producer's retry
(a UNIQ_KEY stored recently, or twice in the turn) go alone: the store schedules, tracks and
de-duplicates those per message; retries go after the others of their turn. Items planned whole
go alone after the turn's other puts and before its retries (`Sender` looks for retries among
them right before their put: `holds_retry`).

After the put, `outcomes` turns the store's `PutMessageResult` into each message's outcome (its
msgId, queue offset, CommitLog offset); the outcomes of several stored messages are one
`PutOutcomes`, which makes a message's `SendOutcome` only when it is read (a remoting batch's
answer reads the put's msgIds, first queue offset and status from it, nothing per message).
Before an outcome of a stored message is answered, the fence is checked again
(`RoleGate.late_refusal`): a master that lost its lease while the put waited answers FENCED,
never a false OK.

Thread-safety: the round-robin counters and the checked topics (`known_topic`: each entry is a
config with its answer, replaced whole) are the only state (a race skews the rotation or repeats
a check, nothing else); the rest reads the store's tables. `create_topic` blocks (the topic table is fsynced).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

from store import Message, MessageStore, PutMessageResult, PutMessageStatus
from store.log.codec import decode_msg_id, java_string_hash
from store.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_TYPE_MASK,
    with_queue_id,
)
from store.metadata.auto_create import AutoCreateRefusal
from store.metadata.topic_config import SYSTEM_TOPICS, TIMER_TOPIC, TRANS_HALF_TOPIC, TopicConfig

from ..batching import append_chunks
from ..config import BrokerConfigs
from ..timer_service import timer_message
from ..transaction_service import half_message
from .queues import INT32_MAX, name_problem, queue_id_problem
from .refusals import Reason, Refusal
from .roles import RoleGate

T = TypeVar("T")

# Served topics whose checks `known_topic` keeps (full, it starts over: the topics in use return
# at their next send).
KNOWN_TOPICS_MAX = 4096
# The property a FIFO message's group travels in (RocketMQ's sharding key).
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"


class SendItem(NamedTuple):
    """One message a producer sends, as its front end decoded it. A tuple, as `Planned`: a front
    end makes one per message on its loop's thread, and only the core reads it."""

    message: Message  # its queue_id is ignored: `queue_id` says which queue
    queue_id: int | None = None  # the queue the producer names; None: the broker chooses
    client_id: str = ""  # the producer's message id, echoed in the outcome
    deliver_at_ms: int | None = None  # a timed message: delivered at this wall-clock time
    transaction_immunity_s: int | None = None  # a transactional message (None: not one)
    refused: Refusal | None = None  # what the front end found wrong decoding it


class SendBatch(NamedTuple):
    """A request its front end answers once, carried as one value from the frame to the record (a
    remoting batch): messages of one topic, each made for `queue_id`, the queue the producer
    names; stored or refused together. `Sender.submit_batch` checks it whole and puts it as one
    append; one that does not pass as a whole is planned as `SendItem`s (`items`)."""

    messages: list[Message]
    queue_id: int

    def items(self) -> list[SendItem]:
        return [SendItem(message, self.queue_id) for message in self.messages]


@dataclass(frozen=True, slots=True)
class SendOutcome:
    """One message's answer: refused (nothing stored), or the put's status and where it landed."""

    status: PutMessageStatus | None = None  # None: refused before the store
    refusal: Refusal | None = None
    reason: str = ""  # the store's reason, for a status that has one
    client_id: str = ""
    msg_id: str = ""  # the store's offset message id, once stored
    queue_id: int = -1
    queue_offset: int = -1
    wrote_offset: int = -1  # its CommitLog offset where the put result says it (the first message)
    transactional: bool = False

    @property
    def stored(self) -> bool:
        return self.status is not None and self.status.is_stored

    def commit_log_offset(self) -> int:
        """Where the message starts in the CommitLog; -1 when not stored (or not known)."""
        if self.wrote_offset >= 0:
            return self.wrote_offset
        try:
            return decode_msg_id(self.msg_id)[1]
        except ValueError:
            return -1


def refused(item: SendItem, refusal: Refusal) -> SendOutcome:
    return SendOutcome(refusal=refusal, client_id=item.client_id)


class Planned(NamedTuple):
    """A message ready for the store, for item `position` of its request. A tuple: one is made per
    message on the loop's thread, at a third of a frozen dataclass's cost, and it is only ever
    read by the core."""

    position: int  # the item's index in its request
    message: Message
    client_id: str
    transactional: bool = False


def batchable(msg: Message) -> bool:
    """Whether a message may share an append with others: the store schedules delays and the
    broker tracks transactions and timers per message."""
    props = msg.properties
    return not (
        msg.topic in (TRANS_HALF_TOPIC, TIMER_TOPIC)
        or msg.sys_flag & TRANSACTION_TYPE_MASK
        or PROPERTY_DELAY_TIME_LEVEL in props
        or PROPERTY_TRANSACTION_PREPARED in props
    )


class SendService:
    def __init__(self, store: MessageStore, configs: BrokerConfigs, roles: RoleGate) -> None:
        self.store = self._store = store
        self._configs = configs
        self.roles = roles
        self._round_robin: dict[str, int] = {}
        # Topics in the table that passed the name checks: their config and its answer.
        self._known: dict[str, tuple[TopicConfig, TopicConfig | Refusal]] = {}

    # -- admission ----------------------------------------------------------------------------

    def topic_refusal(self, topic: str) -> Refusal | None:
        """The topic checks that write nothing: its name, a system topic, a drained broker."""
        problem = name_problem("topic", topic)
        if problem is not None:
            return Refusal(Reason.ILLEGAL_TOPIC, problem)
        if topic in SYSTEM_TOPICS:
            return Refusal(Reason.SYSTEM_TOPIC, f"{topic} is a system topic; producers cannot send to it")
        drained = self._store.write_refusal()
        if drained is not None:
            return Refusal(Reason.DRAINED, f"{self._configs.broker.broker_name}: {drained}")
        return None

    def known_topic(self, topic: str) -> TopicConfig | Refusal | None:
        """The topic's config when it exists (or the refusal of a write to it); None when it has
        to be created first (`create_topic`)."""
        config = self._store.topics.get(topic)
        if config is not None:
            # A served topic's answer holds while the table holds the same config (a change
            # replaces it) and the broker stays writable: looked up, not worked out, per send.
            known = self._known.get(topic)
            if known is not None and known[0] is config and self._store.write_refusal() is None:
                return known[1]
        refusal = self.topic_refusal(topic)
        if refusal is not None:
            return refusal
        if config is None:
            return None
        answer = _writable(config)
        if len(self._known) >= KNOWN_TOPICS_MAX:
            self._known.clear()
        self._known[topic] = (config, answer)
        return answer

    def create_topic(self, topic: str) -> TopicConfig | Refusal:
        """Blocking (the topic table is written and fsynced): the topic, auto-created for a first
        send when the store's limits allow."""
        made = self._store.auto_create_topic(topic)
        if isinstance(made, AutoCreateRefusal):
            reason = Reason.TOPIC_CREATION_THROTTLED if made.limit.is_rate else Reason.TOPIC_NOT_FOUND
            return Refusal(reason, made.reason)
        return _writable(made)

    def topics_of(self, items: Sequence[SendItem]) -> tuple[dict[str, TopicConfig | Refusal | None], list[str]]:
        """The items' topics as far as they are known without a write, and the topics to create
        before the items can be planned (those an item may still go to)."""
        topics: dict[str, TopicConfig | Refusal | None] = {}
        create: list[str] = []
        for item in items:
            topic = item.message.topic
            if topic not in topics:
                topics[topic] = self.known_topic(topic)
            if topics[topic] is None and topic not in create and _queue_id_problem(item) is None:
                create.append(topic)
        return topics, create

    def plan(
        self, items: Sequence[SendItem], topics: Mapping[str, TopicConfig | Refusal | None], *, unit: bool = False
    ) -> list[Planned | Refusal]:
        """Each item's store message, or why it is refused (`topics`: every item's topic as
        `topics_of` and `create_topic` answered). A unit is planned whole: one refusal refuses
        all."""
        round_robin: dict[str, int] = {}
        max_body = self._store.config.max_message_size
        if unit:
            bodies = sum(len(item.message.body) for item in items)
            if bodies > max_body:
                refusal = Refusal(Reason.BODY_TOO_LARGE, f"the bodies are {bodies} bytes; maxMessageSize is {max_body}")
                return [refusal] * len(items)
            whole = _plan_unit(items, topics[items[0].message.topic]) if items else None
            if whole is not None:
                return whole if isinstance(whole, list) else [whole] * len(items)
        planned = [
            self._plan_one(i, item, topics[item.message.topic], max_body, round_robin, unit)
            for i, item in enumerate(items)
        ]
        if unit:
            first = next((p for p in planned if isinstance(p, Refusal)), None)
            if first is not None:
                return [first] * len(items)
        return planned

    def plan_whole(self, items: Sequence[SendItem]) -> list[Planned] | None:
        """Several messages of one request that need nothing per message (a gRPC SendMessage as
        the clients send it) planned at once, for one append: one served topic, one queue (the
        one they all name, their one message group's, or the request's round-robin queue), plain
        messages with bodies within maxMessageSize, no producer id twice, together within one
        append. None: not such a send; `plan` plans it message by message, and finds what it
        refuses. The queue is chosen last, so a None leaves the round-robin rotation as it was."""
        first = items[0]
        topic = first.message.topic
        config = self.known_topic(topic)
        if not isinstance(config, TopicConfig):
            return None
        queue_id = first.queue_id
        group = first.message.properties.get(PROPERTY_SHARDING_KEY)
        store_config = self._store.config
        max_body = store_config.max_message_size
        keys: set[str] = set()
        for item in items:
            message = item.message
            properties = message.properties
            size = len(message.body)
            if (
                message.topic != topic
                or item.queue_id != queue_id
                or not 0 < size <= max_body
                or item.refused is not None
                or item.deliver_at_ms is not None
                or item.transaction_immunity_s is not None
                or properties.get(PROPERTY_SHARDING_KEY) != group
                or not batchable(message)
            ):
                return None
            key = properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if key is not None:
                if key in keys:
                    return None
                keys.add(key)
        if len(append_chunks(items, _item_message, store_config.max_append_size, max_body)) != 1:
            return None
        queue = self._queue(first, config, {})
        if isinstance(queue, Refusal):
            return None
        return [
            Planned(i, m if m.queue_id == queue else with_queue_id(m, queue), item.client_id)
            for i, item in enumerate(items)
            for m in (item.message,)
        ]

    def holds_retry(self, messages: Sequence[Message]) -> bool:
        """Whether any of `messages` is a producer's retry of one the store holds (its UNIQ_KEY
        among the recent ones for its topic): the put of several messages does not look (the
        store checks a single message's only)."""
        recent = self._store.recent_ids
        for message in messages:
            key = message.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if key is not None and recent.get(message.topic, key) is not None:
                return True
        return False

    def batch_fits(self, batch: SendBatch, config: TopicConfig) -> bool:
        """Whether a batch for a served topic passes the checks that look at its messages, as a
        whole: its queue within the topic's write queues, no empty body, the bodies within
        maxMessageSize. False: `plan` finds its refusal message by message."""
        if not 0 <= batch.queue_id < config.write_queue_nums:
            return False
        bodies = 0
        for message in batch.messages:
            size = len(message.body)
            if not size:
                return False
            bodies += size
        return bodies <= self._store.config.max_message_size

    def _plan_one(
        self,
        index: int,
        item: SendItem,
        config: TopicConfig | Refusal | None,
        max_body: int,
        round_robin: dict[str, int],
        unit: bool,
    ) -> Planned | Refusal:
        if isinstance(config, Refusal):
            return config
        queue_id = item.queue_id
        if queue_id is not None and not 0 <= queue_id <= INT32_MAX:
            return queue_id_problem(queue_id)  # type: ignore[return-value]  # out of range: a refusal
        assert config is not None, f"topic {item.message.topic} was neither known nor created"
        message = item.message
        body = len(message.body)
        if not body:
            return Refusal(Reason.BODY_EMPTY, "the message body is empty")
        if body > max_body and not unit:
            return Refusal(Reason.BODY_TOO_LARGE, f"the body is {body} bytes; maxMessageSize is {max_body}")
        if item.refused is not None:
            return item.refused
        if queue_id is None or queue_id >= config.write_queue_nums:
            queue = self._queue(item, config, round_robin)
            if isinstance(queue, Refusal):
                return queue
            queue_id = queue
        if message.queue_id != queue_id:
            message = with_queue_id(message, queue_id)
        if item.transaction_immunity_s is not None:
            if item.deliver_at_ms is not None:
                return Refusal(Reason.ILLEGAL_MESSAGE, "a transactional message cannot have a delivery time")
            return Planned(index, half_message(message, item.transaction_immunity_s), item.client_id, True)
        if item.deliver_at_ms is not None:
            message = timer_message(message, item.deliver_at_ms)
        return Planned(index, message, item.client_id)

    def _queue(self, item: SendItem, config: TopicConfig, round_robin: dict[str, int]) -> int | Refusal:
        queues = config.write_queue_nums
        if item.queue_id is not None:
            if not 0 <= item.queue_id < queues:
                return Refusal(
                    Reason.ILLEGAL_QUEUE_ID,
                    f"queue id {item.queue_id} is out of range: topic {config.topic_name} has {queues} write queues "
                    f"(0..{queues - 1})",
                )
            return item.queue_id
        group = item.message.properties.get(PROPERTY_SHARDING_KEY)
        if group:
            return abs(java_string_hash(group)) % queues
        topic = config.topic_name
        if topic not in round_robin:
            # One queue per topic and request: the request's messages for it form one batch.
            round_robin[topic] = self._round_robin.get(topic, -1) + 1
            self._round_robin[topic] = round_robin[topic] % (1 << 30)
        return round_robin[topic] % queues

    # -- batching -----------------------------------------------------------------------------

    def put_groups(self, entries: Sequence[PutEntry]) -> list[list[PutEntry]]:
        """A loop turn's puts: entries for one topic and queue share an append where they may;
        units, messages the store handles one by one and retries go alone (retries last, after
        the entries planned whole)."""
        if len(entries) == 1:
            return [list(entries)]
        puts: list[list[PutEntry]] = []
        retries: list[list[PutEntry]] = []
        groups: dict[tuple[str, int], list[PutEntry]] = {}
        recent = self._store.recent_ids
        keys: set[tuple[str, str]] = set()
        wholes: list[list[PutEntry]] = []
        for entry in entries:
            msg = entry.messages[0]
            key = None if entry.split is not None else msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            retry = key is not None and ((msg.topic, key) in keys or recent.get(msg.topic, key) is not None)
            for sent in entry.messages:
                sent_key = sent.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                if sent_key is not None:
                    keys.add((sent.topic, sent_key))
            if entry.split is not None:
                # After the turn's other puts, whose ids its put then finds (`holds_retry`), and
                # before the turn's retries, which may be retries of its messages.
                wholes.append([entry])
            elif retry:
                retries.append([entry])  # after its original: the store answers it with the original's result
            elif entry.unit or not batchable(msg):
                puts.append([entry])
            else:
                groups.setdefault((msg.topic, msg.queue_id), []).append(entry)
        config = self._store.config
        for group in groups.values():
            puts.extend(append_chunks(group, _first_message, config.max_append_size, config.max_message_size))
        return puts + wholes + retries

    # -- outcomes -----------------------------------------------------------------------------

    @staticmethod
    def outcomes(planned: Sequence[Planned], result: PutMessageResult, first: int = 0) -> Sequence[SendOutcome]:
        """The outcomes of `planned`, messages `first`.. of the put that answered `result`: a
        list, or for several stored messages a `PutOutcomes` that makes each when it is read."""
        status = result.status
        if not status.is_stored:
            return [SendOutcome(status, reason=result.reason, client_id=p.client_id) for p in planned]
        if len(planned) > 1:
            return PutOutcomes(planned, result, first)
        return [_stored_outcome(planned[0], result, first)]


def _stored_outcome(item: Planned, result: PutMessageResult, i: int) -> SendOutcome:
    """Message `i` of a stored put's outcome. Positional: the fields in their declared order
    (status, refusal, reason, client_id, msg_id, queue_id, queue_offset, wrote_offset,
    transactional)."""
    ids = result.msg_ids
    return SendOutcome(
        result.status,
        None,
        result.reason,
        item.client_id,
        ids[i] if i < len(ids) else result.msg_id,
        item.message.queue_id,
        result.queue_offset + i,
        result.wrote_offset if i == 0 else -1,
        item.transactional,
    )


class _MadeWhenRead(Sequence[T]):
    """A read-only sequence whose items are made when read, indexed and sliced as a list is."""

    __slots__ = ()

    def _item(self, index: int) -> T:
        raise NotImplementedError

    def __getitem__(self, index):  # an int or a slice, as a list's
        size = len(self)
        if isinstance(index, slice):
            return [self._item(i) for i in range(*index.indices(size))]
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("index out of range")
        return self._item(index)


class PutOutcomes(_MadeWhenRead[SendOutcome]):
    """The outcomes of several messages one put stored (messages `first`.. of `result`), made
    from the put's result when one is read: a front end that answers the put as a whole (a
    remoting batch) reads `status`, `msg_id_list()`, the first message's queue and offset, and
    no object is made per message. Read-only and immutable, as the outcomes it stands for."""

    __slots__ = ("planned", "result", "first")

    def __init__(self, planned: Sequence[Planned], result: PutMessageResult, first: int) -> None:
        self.planned = planned
        self.result = result
        self.first = first

    def __len__(self) -> int:
        return len(self.planned)

    def _item(self, index: int) -> SendOutcome:
        return _stored_outcome(self.planned[index], self.result, self.first + index)

    @property
    def status(self) -> PutMessageStatus:
        return self.result.status

    @property
    def queue_id(self) -> int:
        return self.planned[0].message.queue_id

    @property
    def queue_offset(self) -> int:
        return self.result.queue_offset + self.first

    def msg_id_list(self) -> str:
        """The messages' msgIds, comma-separated (RocketMQ's answer to a batch)."""
        result, first, count = self.result, self.first, len(self.planned)
        if first == 0 and len(result.msg_ids) == count:
            return ",".join(result.msg_ids)
        return ",".join(outcome.msg_id for outcome in self)


class BatchPlan(_MadeWhenRead[Planned]):
    """A `SendBatch`'s messages as its `Planned`s, each made only when read (the put reads the
    messages, a batch's answer the put's result)."""

    __slots__ = ("messages",)

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages

    def __len__(self) -> int:
        return len(self.messages)

    def _item(self, index: int) -> Planned:
        return Planned(index, self.messages[index], "")


@dataclass(slots=True)
class PutEntry:
    """What one put takes from one request: a message, or a unit's messages together."""

    planned: Sequence[Planned]
    unit: bool
    finish: Callable[[Sequence[SendOutcome]], None]  # called once with the planned items' outcomes
    # The planned items' messages, listed once: grouping and the put read them several times.
    messages: list[Message] = field(default_factory=list)
    # Messages planned whole that each answer for themselves (`plan_whole`): sends them again
    # message by message, when the put finds a retry among them. Put alone, after the turn's
    # other puts.
    split: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        if not self.messages:
            self.messages = [p.message for p in self.planned]


def _plan_unit(
    items: Sequence[SendItem], config: TopicConfig | Refusal | None
) -> list[Planned | Refusal] | Refusal | None:
    """A unit as a remoting batch is (one topic, the queue its producer names, plain messages):
    its topic and queue checked once, each message only for an empty body. None: not such a unit
    (`plan` checks it message by message, and so finds the refusal)."""
    if isinstance(config, Refusal):
        return config
    first = items[0]
    topic, queue_id = first.message.topic, first.queue_id
    if config is None or queue_id is None or not 0 <= queue_id < config.write_queue_nums:
        return None
    planned: list[Planned | Refusal] = []
    for i, item in enumerate(items):
        message = item.message
        if (
            item.queue_id != queue_id
            or message.topic != topic
            or not message.body
            or item.refused is not None
            or item.deliver_at_ms is not None
            or item.transaction_immunity_s is not None
        ):
            return None
        if message.queue_id != queue_id:
            message = with_queue_id(message, queue_id)
        planned.append(Planned(i, message, item.client_id))
    return planned


def _queue_id_problem(item: SendItem) -> Refusal | None:
    """A queue id the producer names, out of any topic's range (checked before a topic is made)."""
    return None if item.queue_id is None else queue_id_problem(item.queue_id)


def _item_message(item: SendItem) -> Message:
    return item.message


def _first_message(entry: PutEntry) -> Message:
    return entry.planned[0].message


def _writable(config: TopicConfig) -> TopicConfig | Refusal:
    if config.writable:
        return config
    return Refusal(Reason.TOPIC_NOT_WRITABLE, f"topic {config.topic_name} is not writable (perm {config.perm})")
