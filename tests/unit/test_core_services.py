"""The broker core's services (rocketstore/broker/core/) with no sockets: the role gate, send
admission and batching, the put path's gathering and late fence, pull checks, classification and
long polling, offsets, routes and heartbeats, over a real store in the test's tmp dir and a
`StaticView` the tests set."""

from __future__ import annotations

import asyncio
import errno
from dataclasses import dataclass, replace
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ha.config import HaConfig
from ha.replica_tracker import SlaveSnapshot
from rocketstore.broker.batching import append_chunks
from rocketstore.broker.client_registry import ClientKind, ClientRegistry, Heartbeat
from rocketstore.broker.client_table import ClientLimits
from rocketstore.broker.config import BrokerConfig, BrokerConfigs
from rocketstore.broker.core.clients import ClientService
from rocketstore.broker.core.long_polling import (
    DEADLINE_MARGIN_S,
    DISPATCH_WAIT_MAX_S,
    ArrivalWatch,
    Read,
    Step,
    dispatch_wait_seconds,
    poll,
)
from rocketstore.broker.core.pull import PULL_ACTIONS, PullAction, PullRequest, classify, pull_action
from rocketstore.broker.core.refusals import Reason, Refusal
from rocketstore.broker.core.routes import Route
from rocketstore.broker.core.send import (
    BatchPlan,
    Planned,
    PutEntry,
    PutOutcomes,
    SendBatch,
    SendItem,
    SendOutcome,
    SendService,
    batchable,
)
from rocketstore.broker.core.sender import Sender
from rocketstore.broker.core.services import BrokerCore
from rocketstore.broker.view import StaticView
from rocketstore.coordination.cluster_routes import MASTER, SLAVE, BrokerRegistration, ClusterView, TopicRoute
from store import BrokerRole, GetMessageResult, GetMessageStatus, Message, MessageStore, PutMessageResult, StoreConfig
from store.clock import wall_clock_ms
from store.log.codec import encode_properties, java_string_hash, record_size
from store.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    batch_messages,
    with_queue_id,
)
from store.metadata.topic_config import TIMER_TOPIC, TRANS_HALF_TOPIC, TopicConfig
from store.status import PutMessageStatus
from support import small_store_config, wait_for

MAX_BODY = 4096
SYSTEM_TOPIC_OF_TABLE = TRANS_HALF_TOPIC  # a system topic the table holds


@dataclass
class FencedView(StaticView):
    """A `StaticView` whose controller-mode fence the test sets."""

    fence: str | None = None

    def write_refusal(self) -> str | None:
        return self.fence

    def controller_mode(self) -> bool:
        return self.fence is not None


@pytest.fixture
def store(tmp_path):
    config = small_store_config(
        tmp_path / "store", 256 * 1024, max_message_size=MAX_BODY, auto_create_topic_per_minute=1000
    )
    with MessageStore(config) as opened:
        opened.topics.create_or_update(TopicConfig("Orders", 4, 4))
        yield opened


def core_of(store: MessageStore, view: StaticView | None = None, broker_id: int = 0) -> BrokerCore:
    configs = BrokerConfigs(BrokerConfig(broker_name="broker-a", broker_id=broker_id), store.config, HaConfig())
    return BrokerCore(store, configs, view or FencedView(BrokerRole.ASYNC_MASTER, client="10.0.0.1:10911"))


def item(topic: str = "Orders", body: bytes = b"x", queue_id: int | None = 0, **extra) -> SendItem:
    properties = extra.pop("properties", {})
    return SendItem(Message(topic, 0, body, properties), queue_id=queue_id, **extra)


def plan(core: BrokerCore, *items: SendItem, unit: bool = False) -> list:
    """Admission without a loop: the topics as known (creating the missing ones), then the plan."""
    topics, create = core.sends.topics_of(items)
    for topic in create:
        topics[topic] = core.sends.create_topic(topic)
    return core.sends.plan(items, topics, unit=unit)


def reasons(plans: list) -> list:
    return [p.reason if isinstance(p, Refusal) else "planned" for p in plans]


# -- the role gate ----------------------------------------------------------------------------------


def test_a_slave_is_not_master_and_names_its_master(store):
    view = FencedView(BrokerRole.SLAVE, client="10.0.0.2:10911", master_client="10.0.0.1:10911")
    roles = core_of(store, view, broker_id=1).roles
    refused = roles.write_refusal()
    assert refused is not None and refused.reason is Reason.NOT_MASTER
    assert refused.master_endpoint == "10.0.0.1:10911"
    assert refused.text == "not master: broker-a (id 1) is a SLAVE: send to its master at 10.0.0.1:10911"
    assert roles.read_refusal() is not None
    view.acting = True
    assert roles.read_refusal() is None and roles.write_refusal() is not None


def test_a_fenced_master_refuses_before_and_after_a_write(store):
    view = FencedView(BrokerRole.SYNC_MASTER, client="10.0.0.1:10911", fence="no lease")
    roles = core_of(store, view).roles
    before, late = roles.write_refusal(), roles.late_refusal()
    assert before is not None and late is not None
    assert (before.reason, late.reason) == (Reason.FENCED, Reason.FENCED)
    assert before.text.endswith("nothing was written") and "retry it" in late.text
    view.fence = None
    assert roles.write_refusal() is None and roles.late_refusal() is None


# -- send admission ---------------------------------------------------------------------------------


def test_admission_checks_the_topic_first_then_the_body_the_decoding_and_the_queue(store):
    core = core_of(store)
    decoded = Refusal(Reason.ILLEGAL_TAG, "bad tag")
    plans = plan(
        core,
        item("SCHEDULE_TOPIC_XXXX", body=b""),
        item("bad topic!", refused=decoded),
        item("Orders", body=b""),
        item("Orders", body=b"x" * (MAX_BODY + 1)),
        item("Orders", refused=decoded),
        item("Orders", queue_id=4),
        item("Orders", queue_id=-1),
        item("Orders", deliver_at_ms=10, transaction_immunity_s=0),
        item("Orders"),
    )
    assert reasons(plans) == [
        Reason.SYSTEM_TOPIC,
        Reason.ILLEGAL_TOPIC,
        Reason.BODY_EMPTY,
        Reason.BODY_TOO_LARGE,
        Reason.ILLEGAL_TAG,
        Reason.ILLEGAL_QUEUE_ID,
        Reason.ILLEGAL_QUEUE_ID,
        Reason.ILLEGAL_MESSAGE,
        "planned",
    ]


def test_a_queue_id_out_of_any_range_creates_no_topic(store):
    core = core_of(store)
    assert reasons(plan(core, item("NewTopic", queue_id=2**31))) == [Reason.ILLEGAL_QUEUE_ID]
    assert store.topics.get("NewTopic") is None
    assert reasons(plan(core, item("NewTopic", queue_id=1))) == ["planned"]
    assert store.topics.get("NewTopic") is not None


def test_topics_are_created_within_the_limits_and_must_be_writable(store):
    core = core_of(store)
    store.create_or_update_topic(TopicConfig("ReadOnly", 4, 4, perm=4))
    assert reasons(plan(core, item("ReadOnly"))) == [Reason.TOPIC_NOT_WRITABLE]
    store.update_config({"autoCreateTopicEnable": "false"})
    (refused,) = plan(core, item("Absent"))
    assert refused.reason is Reason.TOPIC_NOT_FOUND and "autoCreateTopicEnable" in refused.text
    room_for_one = str(len(list(store.topics.names())) + 1)
    store.update_config({"autoCreateTopicEnable": "true", "autoCreateTopicMaxTopics": room_for_one})
    assert reasons(plan(core, item("First"), item("Second"))) == ["planned", Reason.TOPIC_NOT_FOUND]
    store.update_config({"brokerPermission": "4"})
    (drained,) = plan(core, item("Orders"))
    assert drained.reason is Reason.DRAINED and drained.text.startswith("broker-a: ")


def test_a_topic_checked_once_is_checked_again_when_its_config_or_the_broker_changes(store):
    """The core keeps a served topic's checks with its config: a change of the topic (made read
    only, fewer queues) or of the broker (drained, writable again) is seen by the next send."""
    core = core_of(store)
    assert reasons(plan(core, item("Orders", queue_id=3))) == ["planned"]
    assert reasons(plan(core, item("Orders", queue_id=3))) == ["planned"]  # from what was kept
    store.create_or_update_topic(TopicConfig("Orders", 4, 4, perm=4))
    assert reasons(plan(core, item("Orders", queue_id=3))) == [Reason.TOPIC_NOT_WRITABLE]
    store.create_or_update_topic(TopicConfig("Orders", 2, 2))
    assert reasons(plan(core, item("Orders", queue_id=3))) == [Reason.ILLEGAL_QUEUE_ID]
    assert reasons(plan(core, item("Orders", queue_id=1))) == ["planned"]
    store.update_config({"brokerPermission": "4"})
    assert reasons(plan(core, item("Orders", queue_id=1))) == [Reason.DRAINED]
    store.update_config({"brokerPermission": "6"})
    assert reasons(plan(core, item("Orders", queue_id=1))) == ["planned"]
    store.create_or_update_topic(TopicConfig(SYSTEM_TOPIC_OF_TABLE, 1, 1))
    assert reasons(plan(core, item(SYSTEM_TOPIC_OF_TABLE, queue_id=0))) == [Reason.SYSTEM_TOPIC]
    assert reasons(plan(core, item(SYSTEM_TOPIC_OF_TABLE, queue_id=0))) == [Reason.SYSTEM_TOPIC]


def test_queue_choice_named_hashed_by_group_or_one_round_robin_queue_per_topic_and_request(store):
    core = core_of(store)
    assert [p.message.queue_id for p in plan(core, item(queue_id=3))] == [3]
    grouped = item(queue_id=None, properties={"__SHARDINGKEY": "order-17"})
    assert [p.message.queue_id for p in plan(core, grouped)] == [abs(java_string_hash("order-17")) % 4]
    first = [p.message.queue_id for p in plan(core, *(item(queue_id=None) for _ in range(3)))]
    second = [p.message.queue_id for p in plan(core, item(queue_id=None))]
    assert len(set(first)) == 1 and second == [(first[0] + 1) % 4]


def test_timed_and_transactional_messages_are_parked(store):
    core = core_of(store)
    timed, half = plan(core, item(deliver_at_ms=5_000), item(transaction_immunity_s=30, client_id="tx-1"))
    assert timed.message.topic == TIMER_TOPIC and timed.message.properties["REAL_TOPIC"] == "Orders"
    assert half.message.topic == TRANS_HALF_TOPIC and half.transactional and half.client_id == "tx-1"
    assert not batchable(timed.message) and not batchable(half.message)


hosts = st.tuples(st.sampled_from(["10.0.0.1", "::1"]), st.integers(0, 65535))
messages = st.builds(
    Message,
    topic=st.text(max_size=8),
    queue_id=st.integers(-1, 9),
    body=st.binary(max_size=8),
    properties=st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
    flag=st.integers(-5, 5),
    sys_flag=st.integers(0, 9),
    born_host=hosts,
    store_host=st.none() | hosts,
    born_timestamp_ms=st.none() | st.integers(0, 2**41),
    reconsume_times=st.integers(0, 16),
    prepared_transaction_offset=st.integers(0, 2**40),
)


@given(messages, st.integers(0, 7), st.lists(st.tuples(st.binary(max_size=8), st.integers(0, 3)), max_size=4))
def test_messages_made_slot_by_slot_equal_the_dataclass_s_own(message, queue_id, entries):
    """The planning's queue change and a front end's batch make `Message`s without the frozen
    dataclass's `__init__`: the same values and type."""
    moved = with_queue_id(message, queue_id)
    assert type(moved) is Message and moved == replace(message, queue_id=queue_id)
    m = message
    made = batch_messages(
        m.topic, queue_id, [(b, f, m.properties) for b, f in entries], m.sys_flag, m.born_host, None, m.reconsume_times
    )
    assert made == [
        Message(m.topic, queue_id, b, m.properties, f, m.sys_flag, m.born_host, None, None, m.reconsume_times)
        for b, f in entries
    ]


def test_a_unit_is_refused_whole_and_its_bodies_count_together(store):
    core = core_of(store)
    half = b"x" * (MAX_BODY // 2 + 1)
    assert reasons(plan(core, item(body=half), item(body=half), unit=True)) == [Reason.BODY_TOO_LARGE] * 2
    bad = plan(core, item(), item(refused=Refusal(Reason.ILLEGAL_MESSAGE, "no")), unit=True)
    assert reasons(bad) == [Reason.ILLEGAL_MESSAGE] * 2


unit_items = st.lists(
    st.builds(
        item,
        topic=st.sampled_from(["Orders", "Orders", "Orders", "Shipments", "%bad%"]),
        body=st.sampled_from([b"x", b"x", b"x", b""]),
        queue_id=st.sampled_from([2, 2, 2, 0, 3, 4, None, -1]),
        refused=st.none() | st.just(Refusal(Reason.ILLEGAL_MESSAGE, "no")),
        deliver_at_ms=st.none() | st.just(wall_clock_ms() + 60_000),
        transaction_immunity_s=st.none() | st.just(60),
    ),
    min_size=1,
    max_size=6,
)


@given(unit_items)
def test_a_unit_planned_whole_is_planned_as_its_messages_one_by_one(tmp_path_factory, items):
    """The unit's shortcut (one topic and queue check for a batch's messages) plans what the
    message-by-message checks plan: the same messages in their places, or the first refusal for
    all of them."""
    config = small_store_config(tmp_path_factory.mktemp("s"), 256 * 1024, max_message_size=MAX_BODY)
    with MessageStore(config) as opened:
        opened.topics.create_or_update(TopicConfig("Orders", 4, 4))
        whole = plan(core_of(opened), *items, unit=True)
        one_by_one = plan(core_of(opened), *items)  # a core of its own: its round-robin counters start over
    refusal = next((p for p in one_by_one if isinstance(p, Refusal)), None)
    if refusal is not None:
        assert whole == [refusal] * len(items)
    else:
        assert [(p.position, p.message, p.client_id, p.transactional) for p in whole] == [
            (p.position, p.message, p.client_id, p.transactional) for p in one_by_one
        ]


# -- batching ---------------------------------------------------------------------------------------


def entry(topic: str, queue_id: int, *, unit: bool = False, key: str | None = None, delay: bool = False) -> PutEntry:
    properties = {}
    if key is not None:
        properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = key
    if delay:
        properties[PROPERTY_DELAY_TIME_LEVEL] = "1"
    planned = [Planned(0, Message(topic, queue_id, b"x", properties), "")]
    return PutEntry(planned, unit, lambda outcomes: None)


entries = st.lists(
    st.builds(
        entry,
        st.sampled_from(["A", "B"]),
        st.integers(0, 2),
        unit=st.booleans(),
        key=st.none() | st.sampled_from(["k1", "k2", "k3"]),
        delay=st.booleans(),
    ),
    min_size=1,
    max_size=24,
)


@given(entries)
def test_put_groups_keep_every_entry_once_and_share_appends_only_where_they_may(tmp_path_factory, batch):
    config = StoreConfig(store_path_root_dir=str(tmp_path_factory.mktemp("s")), mapped_file_size_commit_log=65536)
    service = SendService(MessageStore(config), BrokerConfigs(BrokerConfig(), config, HaConfig()), None)  # type: ignore[arg-type]
    groups = service.put_groups(batch)
    assert sorted(map(id, (e for g in groups for e in g))) == sorted(map(id, batch))
    where = {id(e): n for n, g in enumerate(groups) for e in g}
    for group in groups:
        if len(group) > 1:
            assert len({(e.messages[0].topic, e.messages[0].queue_id) for e in group}) == 1
            assert all(not e.unit and batchable(e.messages[0]) for e in group)
    first_of: dict[tuple[str, str], PutEntry] = {}
    for e in batch:
        key = e.messages[0].properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if key is None:
            continue
        original = first_of.setdefault((e.messages[0].topic, key), e)
        if original is not e:
            # A key repeated in the turn is a retry: alone, and put after its original.
            assert len(groups[where[id(e)]]) == 1 and where[id(e)] > where[id(original)]


TEXT = st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",))  # what a property may hold


@given(
    st.lists(
        st.tuples(
            st.integers(1, 300), st.dictionaries(st.text(TEXT, min_size=1, max_size=8), st.text(TEXT, max_size=40))
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(200, 3000),
    st.integers(1, 1500),
)
def test_append_chunks_cut_only_where_the_encoded_records_or_the_bodies_pass_a_limit(sent, max_append, max_bodies):
    """Whether the bound that encodes nothing takes them whole or they are counted one by one,
    the chunks are the same: in order, each within the limits (or one message alone), and each
    cut where the next message would pass one."""
    messages = [Message("Tópico", 0, b"x" * body, properties) for body, properties in sent]
    chunks = append_chunks(messages, lambda m: m, max_append, max_bodies)
    assert [m for chunk in chunks for m in chunk] == messages

    def encoded(chunk):
        return sum(record_size(m.topic, len(m.body), len(encode_properties(m.properties))) for m in chunk)

    for n, chunk in enumerate(chunks):
        bodies = sum(len(m.body) for m in chunk)
        assert len(chunk) == 1 or (encoded(chunk) <= max_append and bodies <= max_bodies)
        if n + 1 < len(chunks):
            grown = chunk + chunks[n + 1][:1]
            assert encoded(grown) > max_append or sum(len(m.body) for m in grown) > max_bodies


def test_outcomes_carry_each_messages_id_and_offsets():
    planned = [Planned(i, Message("T", 2, b"x"), f"c{i}") for i in range(3)]
    result = PutMessageResult(
        PutMessageStatus.PUT_OK, wrote_offset=100, wrote_bytes=300, queue_offset=7, msg_ids=("a", "b", "c", "d")
    )
    later = SendService.outcomes(planned[1:], result, first=1)
    assert [(o.client_id, o.msg_id, o.queue_offset, o.wrote_offset) for o in later] == [
        ("c1", "b", 8, -1),
        ("c2", "c", 9, -1),
    ]
    (first,) = SendService.outcomes(planned[:1], result)
    assert first.commit_log_offset() == 100 and first.queue_id == 2
    refused = SendService.outcomes(planned, PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, reason="bad"))
    assert all(not o.stored and o.reason == "bad" and o.msg_id == "" for o in refused)


def test_a_puts_outcomes_read_as_a_whole_agree_with_each_message_read_alone():
    planned = [Planned(i, Message("T", 2, b"x"), f"c{i}") for i in range(3)]
    result = PutMessageResult(
        PutMessageStatus.PUT_OK, wrote_offset=100, wrote_bytes=300, queue_offset=7, msg_ids=("a", "b", "c", "d")
    )
    for first, count in ((0, 3), (1, 2), (0, 2)):
        outcomes = SendService.outcomes(planned[first : first + count], result, first)
        assert isinstance(outcomes, PutOutcomes) and len(outcomes) == count
        each = list(outcomes)
        assert [o.msg_id for o in each] == list(result.msg_ids[first : first + count])
        assert outcomes.msg_id_list() == ",".join(o.msg_id for o in each)
        assert (outcomes.status, outcomes.queue_id, outcomes.queue_offset) == (
            each[0].status,
            each[0].queue_id,
            each[0].queue_offset,
        )
        assert outcomes[-1] == each[-1] and outcomes[1:] == each[1:]
    whole = SendService.outcomes(planned, replace(result, msg_ids=("a", "b", "c")))
    assert whole.msg_id_list() == "a,b,c"  # type: ignore[attr-defined]
    plan = BatchPlan([p.message for p in planned])
    assert list(plan) == [Planned(i, p.message, "") for i, p in enumerate(planned)] and plan[-1] == plan[2]
    assert plan[1:] == list(plan)[1:]
    with pytest.raises(IndexError):
        plan[3]


# -- the put path -----------------------------------------------------------------------------------


def test_sends_of_one_loop_turn_share_one_append_and_each_gets_its_answer(store):
    core = core_of(store)
    appends: list[int] = []
    batch_put = store.put_messages_then

    def counted(messages, then):
        appends.append(len(messages))
        batch_put(messages, then)

    store.put_messages_then = counted  # type: ignore[method-assign]

    async def scenario() -> list[list[SendOutcome]]:
        sender = Sender(core.sends)
        return await asyncio.gather(*(sender.send([item(body=b"m%d" % i)]) for i in range(5)))

    answers = asyncio.run(scenario())
    assert appends == [5]
    assert [o.queue_offset for (o,) in answers] == [0, 1, 2, 3, 4]
    assert all(o.status is PutMessageStatus.PUT_OK for (o,) in answers)


def submitted(sender: Sender, batch: SendBatch) -> asyncio.Future:
    future = asyncio.get_running_loop().create_future()
    sender.submit_batch(batch, future.set_result)
    return future


def test_a_batch_sent_as_one_value_is_stored_and_answered_as_its_items_would_be(store):
    """A batch the core takes whole is one append and one answer; its outcomes, read one by one,
    are those of the same messages sent as a unit of items, in the next queue offsets."""
    core = core_of(store)
    messages = [Message("Orders", 1, b"m%d" % i, {PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"k{i}"}) for i in range(4)]
    again = [replace(m, properties={PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"j{i}"}) for i, m in enumerate(messages)]

    async def scenario():
        sender = Sender(core.sends)
        whole = await submitted(sender, SendBatch(messages, 1))
        items = await sender.send(SendBatch(again, 1).items(), unit=True)
        return whole, items

    whole, items = asyncio.run(scenario())
    assert isinstance(whole, PutOutcomes) and whole.msg_id_list() == ",".join(o.msg_id for o in whole)
    assert [(o.status, o.queue_id, o.queue_offset) for o in whole] == [
        (PutMessageStatus.PUT_OK, 1, i) for i in range(4)
    ]
    assert [(o.status, o.queue_id, o.queue_offset - 4) for o in items] == [(o.status, 1, o.queue_offset) for o in whole]
    stored = [store.read_message(o.commit_log_offset()) for o in whole]
    assert [(m.body, m.queue_id, m.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]) for m in stored] == [
        (b"m%d" % i, 1, f"k{i}") for i in range(4)
    ]
    # A retry of one of the batch's messages, sent alone, is answered with where it landed.
    (retry,) = asyncio.run(Sender(core.sends).send([SendItem(messages[2], 1)]))
    assert retry.msg_id == list(whole)[2].msg_id and retry.queue_offset == 2


def test_a_batch_that_does_not_pass_whole_gets_the_refusal_its_items_would(store):
    core = core_of(store)
    half = b"x" * (MAX_BODY // 2 + 1)
    cases = [
        SendBatch([Message("Orders", 4, b"x")], 4),  # past the topic's 4 write queues
        SendBatch([Message("Orders", 0, b"x"), Message("Orders", 0, b"")], 0),
        SendBatch([Message("Orders", 0, half), Message("Orders", 0, half)], 0),
        SendBatch([Message(SYSTEM_TOPIC_OF_TABLE, 0, b"x")], 0),
        SendBatch([Message("NewTopic", 0, b"x")], 0),  # created first, then stored
    ]

    async def scenario():
        sender = Sender(core.sends)
        wholes = [await submitted(sender, batch) for batch in cases]
        items = [await sender.send(batch.items(), unit=True) for batch in cases]
        return wholes, items

    wholes, items = asyncio.run(scenario())
    assert [[(o.refusal and o.refusal.reason, o.stored) for o in w] for w in wholes] == [
        [(i.refusal and i.refusal.reason, i.stored) for i in its] for its in items
    ]
    assert [w[0].refusal.reason if w[0].refusal else None for w in wholes] == [
        Reason.ILLEGAL_QUEUE_ID,
        Reason.BODY_EMPTY,
        Reason.BODY_TOO_LARGE,
        Reason.SYSTEM_TOPIC,
        None,
    ]


def keyed(key: str, body: bytes = b"x", topic: str = "Orders", queue_id: int | None = None, **extra) -> SendItem:
    """A message as a gRPC client sends it: by default the broker chooses the queue; a producer
    id each."""
    properties = {PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: key, **extra.pop("properties", {})}
    return item(topic, body, queue_id, client_id=key, properties=properties, **extra)


def queued_entries(sender: Sender) -> list[int]:
    """The number of messages of each entry the sender puts, turn by turn."""
    sizes: list[int] = []
    groups = sender._service.put_groups

    def counted(entries):
        sizes.extend(len(entry.messages) for entry in entries)
        return groups(entries)

    sender._service.put_groups = counted  # type: ignore[method-assign]
    return sizes


def test_a_send_of_several_messages_that_pass_together_is_one_entry_answered_per_message(store):
    core = core_of(store)

    async def scenario():
        sender = Sender(core.sends)
        sizes = queued_entries(sender)
        first = await sender.send([keyed(f"k{i}", b"m%d" % i) for i in range(5)])
        return sizes, first, await sender.send([keyed(f"j{i}") for i in range(3)])

    sizes, first, second = asyncio.run(scenario())
    assert sizes == [5, 3]
    assert [(o.status, o.client_id, o.queue_offset) for o in first] == [
        (PutMessageStatus.PUT_OK, f"k{i}", i) for i in range(5)
    ]
    assert len({o.queue_id for o in first}) == 1 and second[0].queue_id != first[0].queue_id  # round robin
    stored = [store.read_message(o.commit_log_offset()) for o in first]
    assert [(m.body, m.queue_id) for m in stored] == [(b"m%d" % i, first[0].queue_id) for i in range(5)]
    # A retry of one of them, sent alone, is answered with where it landed.
    (retry,) = asyncio.run(Sender(core.sends).send([keyed("k3", b"m3")]))
    assert (retry.msg_id, retry.queue_offset) == (first[3].msg_id, 3)


def test_a_send_planned_whole_that_holds_a_retry_is_sent_message_by_message(store):
    """A retry among the messages (of a stored one, of one in the same request, of one sent in
    the same loop turn) is answered with its original's result and stored once."""
    core = core_of(store)

    async def scenario():
        sender = Sender(core.sends)
        (original,) = await sender.send([keyed("a", queue_id=0)])
        again = await sender.send([keyed("b"), keyed("a", queue_id=None), keyed("c")])
        twice = await sender.send([keyed("d"), keyed("d")])
        same_turn = await asyncio.gather(sender.send([keyed("e")]), sender.send([keyed("f"), keyed("e")]))
        return original, again, twice, same_turn

    original, again, twice, (alone, with_it) = asyncio.run(scenario())
    assert all(o.stored for o in [*again, *twice, *alone, *with_it])
    assert (again[1].msg_id, again[1].queue_offset) == (original.msg_id, original.queue_offset)
    assert twice[0].msg_id == twice[1].msg_id
    assert with_it[1].msg_id == alone[0].msg_id
    stored = [store.read_message(offset) for offset in _offsets(store)]
    keys = [m.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for m in stored]
    assert sorted(keys) == ["a", "b", "c", "d", "e", "f"]


def _offsets(store: MessageStore) -> list[int]:
    """The CommitLog offsets of every record the store holds, in order."""
    offsets, offset = [], 0
    while offset < store.max_offset:
        offsets.append(offset)
        offset += store.read_message(offset).store_size
    return offsets


def test_a_send_that_does_not_pass_whole_gets_what_each_message_would(store):
    core = core_of(store)
    cases = [
        [keyed("a"), keyed("b", topic="Other")],  # two topics, one to create
        [keyed("c"), keyed("d", body=b"")],
        [keyed("e"), keyed("f", refused=Refusal(Reason.ILLEGAL_TAG, "bad tag"))],
        [keyed("g"), keyed("h", body=b"x" * (MAX_BODY + 1))],
        [keyed("i", queue_id=1), keyed("j", queue_id=2)],
        [keyed("k"), keyed("l", properties={"big": "p" * 40_000})],  # the store refuses it alone
    ]

    async def scenario():
        sender = Sender(core.sends)
        return [await sender.send(case) for case in cases]

    answers = asyncio.run(scenario())
    assert [[o.refusal.reason if o.refusal else o.status for o in outcomes] for outcomes in answers] == [
        [PutMessageStatus.PUT_OK] * 2,
        [PutMessageStatus.PUT_OK, Reason.BODY_EMPTY],
        [PutMessageStatus.PUT_OK, Reason.ILLEGAL_TAG],
        [PutMessageStatus.PUT_OK, Reason.BODY_TOO_LARGE],
        [PutMessageStatus.PUT_OK] * 2,
        [PutMessageStatus.PUT_OK, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED],
    ]
    assert [o.queue_id for o in answers[4]] == [1, 2]


def test_a_poisoned_append_is_put_again_message_by_message(store):
    core = core_of(store)

    async def scenario() -> list[list[SendOutcome]]:
        sender = Sender(core.sends)
        good = [sender.send([item(body=b"good")]) for _ in range(3)]
        poisoned = sender.send([item(body=b"bad", properties={"big": "p" * 40_000})])
        return await asyncio.gather(*good, poisoned)

    *good, (poisoned,) = asyncio.run(scenario())
    assert [o.status for (o,) in good] == [PutMessageStatus.PUT_OK] * 3
    assert poisoned.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED and not poisoned.stored


def test_a_master_fenced_while_its_put_waited_acknowledges_nothing(store):
    view = FencedView(BrokerRole.ASYNC_MASTER, client="10.0.0.1:10911")
    core = core_of(store, view)
    put = store.put_message_then

    def fenced_meanwhile(message, then):
        def landed(result):
            view.fence = "the lease ran out"
            then(result)

        put(message, landed)

    store.put_message_then = fenced_meanwhile  # type: ignore[method-assign]
    (late,) = asyncio.run(Sender(core.sends).send([item(client_id="c-1")]))
    assert late.refusal is not None and late.refusal.reason is Reason.FENCED
    assert "may or may not be kept" in late.refusal.text and late.client_id == "c-1" and late.msg_id
    assert store.max_offset > 0  # stored, not acknowledged
    (before,) = asyncio.run(Sender(core.sends).send([item()]))
    assert before.refusal is not None and before.refusal.text.endswith("nothing was written")


def test_a_put_that_raises_answers_internal_error_and_the_others_are_served(store):
    core = core_of(store)

    def broken(message, then):
        raise RuntimeError("a bug")

    def fails_later(message, then):
        then(OSError(errno.EIO, "the flush failed"))

    for put in (broken, fails_later):
        store.put_message_then = put  # type: ignore[method-assign]
        (failed,) = asyncio.run(Sender(core.sends).send([item()]))
        assert failed.refusal is not None and failed.refusal.reason is Reason.INTERNAL_ERROR


# -- pulls ------------------------------------------------------------------------------------------


def test_every_store_status_has_a_pull_action_and_an_empty_queue_read_past_its_start_resets():
    assert set(PULL_ACTIONS) == set(GetMessageStatus)
    assert pull_action(GetMessageStatus.FOUND) is PullAction.DELIVER
    assert pull_action(GetMessageStatus.NO_MATCHED_MESSAGE) is PullAction.SKIP
    assert pull_action(GetMessageStatus.OFFSET_OVERFLOW_ONE) is PullAction.WAIT
    assert pull_action(GetMessageStatus.OFFSET_TOO_SMALL) is PullAction.RESET
    assert pull_action(GetMessageStatus.MESSAGE_CORRUPTED) is PullAction.REFUSE
    empty = GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
    assert classify(empty, 0) is PullAction.WAIT and classify(empty, 4) is PullAction.RESET
    no_queue = GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
    assert classify(no_queue, 0) is PullAction.WAIT and classify(no_queue, 1) is PullAction.RESET


def pull_request(topic: str = "Orders", offset: int = 0, **fields) -> PullRequest:
    return PullRequest(
        group=fields.pop("group", "g"), topic=topic, queue_id=0, offset=offset, max_messages=32, **fields
    )


def test_pull_checks_in_order(store):
    pulls = core_of(store).pulls
    store.create_or_update_topic(TopicConfig("Hidden", 1, 1, perm=2))
    cases = [
        (pull_request(group="bad group"), Reason.ILLEGAL_GROUP),
        (pull_request("Nowhere"), Reason.TOPIC_NOT_FOUND),
        (pull_request("Hidden"), Reason.TOPIC_NOT_READABLE),
        (replace(pull_request(), max_messages=0), Reason.BAD_REQUEST),
        (pull_request(wait_ms=-1), Reason.ILLEGAL_POLLING_TIME),
        (pull_request(filter_type="SQL92"), Reason.UNSUPPORTED_FILTER),
        (pull_request(filter_expression="||"), Reason.ILLEGAL_FILTER),
    ]
    for request, reason in cases:
        refused = pulls.check(request)
        assert refused is not None and refused.reason is reason, (request, refused)
    assert pulls.check(pull_request()) is None


def test_a_long_poll_is_woken_by_an_arrival_and_a_negative_offset_resets(store):
    core = core_of(store)
    store.put_message(Message("Orders", 0, b"first"))

    async def scenario():
        watch = ArrivalWatch()
        watch.bind_loop(asyncio.get_running_loop())
        store.add_arrival_listener(watch.on_arrival)
        assert await asyncio.to_thread(store.wait_dispatched)
        negative = await core.pulls.read(pull_request(offset=-3), watch)
        waiting = asyncio.create_task(core.pulls.read(pull_request(offset=1, wait_ms=60_000), watch))
        await wait_for(lambda: watch.waiting == 1)
        await asyncio.to_thread(store.put_message, Message("Orders", 0, b"second"))
        woken = await asyncio.wait_for(waiting, 60)
        at_end = await core.pulls.read(pull_request(offset=2), watch)
        return negative, woken, at_end

    negative, woken, at_end = asyncio.run(scenario())
    assert (negative.action, negative.next_offset) == (PullAction.RESET, 0) and "negative" in negative.text
    assert woken.action is PullAction.DELIVER and [m.body for m in woken.messages] == [b"second"]
    assert (at_end.action, at_end.next_offset, at_end.text) == (PullAction.WAIT, 2, "no new message")


def test_after_a_wait_arrivals_the_filter_drops_keep_the_poll_waiting(store):
    core = core_of(store)

    async def scenario():
        watch = ArrivalWatch()
        watch.bind_loop(asyncio.get_running_loop())
        store.add_arrival_listener(watch.on_arrival)
        request = pull_request(wait_ms=60_000, filter_expression="keep")
        waiting = asyncio.create_task(core.pulls.read(request, watch))
        await wait_for(lambda: watch.waiting == 1)
        await asyncio.to_thread(store.put_message, Message("Orders", 0, b"dropped", {"TAGS": "other"}))
        assert await asyncio.to_thread(store.wait_dispatched)
        await wait_for(lambda: watch.waiting == 1)  # woken, moved past it, waiting again
        await asyncio.to_thread(store.put_message, Message("Orders", 0, b"kept", {"TAGS": "keep"}))
        return await asyncio.wait_for(waiting, 60)

    found = asyncio.run(scenario())
    assert found.action is PullAction.DELIVER and [m.body for m in found.messages] == [b"kept"]


def test_a_pull_without_long_poll_waits_for_the_dispatch_of_an_assigned_offset_only(store):
    core = core_of(store)
    store.put_message(Message("Orders", 0, b"first"))
    assert store.wait_dispatched()
    held = store.max_offset
    store.set_dispatch_limit(lambda: held)  # the next put is appended and answered, not dispatched

    async def scenario():
        watch = ArrivalWatch()
        watch.bind_loop(asyncio.get_running_loop())
        store.add_arrival_listener(watch.on_arrival)
        await asyncio.to_thread(store.put_message, Message("Orders", 0, b"second"))
        past = await core.pulls.read(pull_request(offset=2), watch)  # past what was assigned: at once
        waiting = asyncio.create_task(core.pulls.read(pull_request(offset=1, deadline_s=60.0), watch))
        await wait_for(lambda: watch.waiting == 1)
        store.set_dispatch_limit(None)
        return past, await asyncio.wait_for(waiting, 60)

    past, woken = asyncio.run(scenario())
    assert (past.action, past.next_offset, past.text) == (PullAction.WAIT, 2, "no new message")
    assert woken.action is PullAction.DELIVER and [m.body for m in woken.messages] == [b"second"]


def test_the_dispatch_wait_is_capped_and_ends_before_the_calls_deadline():
    assert dispatch_wait_seconds(None) == DISPATCH_WAIT_MAX_S
    assert dispatch_wait_seconds(60.0) == DISPATCH_WAIT_MAX_S
    assert dispatch_wait_seconds(DEADLINE_MARGIN_S + 0.25) == pytest.approx(0.25)
    assert dispatch_wait_seconds(DEADLINE_MARGIN_S / 2) == 0.0


def polled(steps: list[Step], arrive_at_read: int = 0, pending_wait_s: float = 0.0) -> tuple[int, list[bool], int]:
    """`poll` with no long poll over reads answering `steps` in turn (each read's value is its
    number, from 1), an arrival during read `arrive_at_read`: the value answered, each read's
    `waited`, and the waits left registered."""

    async def scenario():
        watch = ArrivalWatch()
        watch.bind_loop(asyncio.get_running_loop())
        answers = iter(steps)
        seen: list[bool] = []

        async def read(waited: bool) -> Read[int]:
            seen.append(waited)
            if len(seen) == arrive_at_read:
                watch.on_arrival(Message("T", 0, b""))
            return Read(next(answers), len(seen))

        value = await poll(watch, [("T", 0)], 0.0, read, pending_wait_s=pending_wait_s)
        return value, seen, watch.waiting

    return asyncio.run(scenario())


def test_poll_waits_past_a_shorter_long_poll_only_while_the_read_is_pending():
    # The second read (watching) sees the dispatch arrive: the third read comes after a wait.
    assert polled([Step.PENDING, Step.PENDING, Step.DONE], 2, pending_wait_s=60.0) == (3, [False, False, True], 0)
    # A WAIT after the pending read ends at the long poll's deadline, here at once.
    assert polled([Step.PENDING, Step.WAIT], pending_wait_s=60.0) == (2, [False, False], 0)


def test_poll_answers_the_last_value_at_the_deadline_and_reads_again_at_once():
    assert polled([Step.AGAIN, Step.WAIT, Step.WAIT]) == (2, [False, False], 0)


# -- offsets, routes, clients -----------------------------------------------------------------------


def test_offsets_refuse_unknown_topics_and_commits_on_a_slave(store):
    offsets = core_of(store).offsets
    assert offsets.max_offset("Nowhere", 0) == Refusal(Reason.TOPIC_NOT_FOUND, "topic Nowhere does not exist")
    missing = offsets.consumer_offset("g", "Orders", 0)
    assert isinstance(missing, Refusal) and missing.reason is Reason.OFFSET_NOT_FOUND
    assert offsets.commit("g", "Orders", 0, 3) is None and offsets.consumer_offset("g", "Orders", 0) == 3
    slave = core_of(store, FencedView(BrokerRole.SLAVE, master_client="10.0.0.1:10911"), broker_id=1).offsets
    refused = slave.commit("g", "Orders", 0, 4)
    assert refused is not None and refused.reason is Reason.NOT_MASTER and refused.master_endpoint == "10.0.0.1:10911"
    assert offsets.consumer_offset("g", "Orders", 0) == 3


def test_a_group_without_an_offset_starts_at_0_until_the_queue_loses_its_first_message(store, monkeypatch):
    offsets = core_of(store).offsets
    assert offsets.start_offset("new", "Orders", 1) == 0
    assert offsets.commit("new", "Orders", 1, 2) is None and offsets.start_offset("new", "Orders", 1) == 2
    # Messages deleted from the queue's start: RocketMQ answers QUERY_NOT_FOUND (start at the end).
    monkeypatch.setattr(store, "min_queue_offset", lambda topic, queue_id: 5)
    later = offsets.start_offset("later", "Orders", 1)
    assert isinstance(later, Refusal) and later.reason is Reason.OFFSET_NOT_FOUND
    assert offsets.start_offset("new", "Orders", 1) == 2
    assert offsets.start_offset("new", "Nowhere", 0).reason is Reason.TOPIC_NOT_FOUND


def test_routes_of_a_master_its_slave_and_a_slave_acting_for_it(store):
    view = FencedView(BrokerRole.SYNC_MASTER, client="10.0.0.1:10911")
    view.slaves = [SlaveSnapshot("ha", 1, "10.0.0.2:10911", 0, 0, 0.0, True, 0)]
    routes = core_of(store, view).routes
    route = routes.route("Orders")
    assert [(b.broker_id, b.client_endpoint, b.read_only) for b in route.brokers] == [
        (0, "10.0.0.1:10911", False),
        (1, "10.0.0.2:10911", True),
    ]
    fresh = routes.route("Fresh")
    assert not fresh.exists and fresh.brokers[0].config.write_queue_nums == 4 and store.topics.get("Fresh") is None
    assert routes.route("bad topic!").reason is Reason.ILLEGAL_TOPIC
    slave_view = FencedView(BrokerRole.SLAVE, client="10.0.0.2:10911", master_client="10.0.0.1:10911")
    slave_routes = core_of(store, slave_view, broker_id=1).routes
    assert [(b.broker_id, b.read_only) for b in slave_routes.route("Orders").brokers] == [(0, False), (1, True)]
    # A topic the slave does not know yet goes to its master alone, whose first send creates it
    # (issue 32 item 5: it answered TOPIC_NOT_FOUND); reads never create it here either.
    (to_master,) = slave_routes.route("Fresh").brokers
    assert (to_master.broker_id, to_master.client_endpoint, to_master.read_only) == (0, "10.0.0.1:10911", False)
    assert not slave_routes.route("Fresh").exists and store.topics.get("Fresh") is None
    slave_view.acting = True
    assert slave_routes.route("Fresh").reason is Reason.TOPIC_NOT_FOUND
    (acting,) = slave_routes.route("Orders").brokers
    assert (acting.broker_id, acting.client_endpoint, acting.read_only) == (0, "10.0.0.2:10911", True)


def test_a_route_names_each_group_once_at_id_0_with_every_member(store):
    view = FencedView(BrokerRole.SYNC_MASTER, client="10.0.0.1:10911")
    view.slaves = [SlaveSnapshot("ha", 1, "10.0.0.2:10911", 0, 0, 0.0, True, 0)]
    route = core_of(store, view).routes.route("Orders")
    (group,) = route.groups()
    assert group.broker_name == "broker-a" and group.serving is route.brokers[0]
    assert [(b.broker_id, b.client_endpoint) for b in group.members] == [(0, "10.0.0.1:10911"), (1, "10.0.0.2:10911")]
    # A group electing a master has no broker at id 0: its members are still named.
    slaves_only = Route("Orders", route.brokers[1:], True)
    assert [(g.serving, len(g.members)) for g in slaves_only.groups()] == [(None, 1)]


def test_a_master_whose_put_fence_refuses_writes_is_routed_read_only_until_it_can_take_them(store):
    # A new controller-mode SYNC_MASTER refuses puts until a replica is in sync: a producer sent
    # there would fail and hold the whole group out for its failure pause.
    routes = core_of(store, FencedView(BrokerRole.SYNC_MASTER, client="10.0.0.1:10911")).routes
    store.set_put_fence(lambda: "IN_SYNC_REPLICAS_NOT_ENOUGH: 1 in-sync replicas, a SYNC_MASTER needs 2")
    try:
        assert store.put_fence_reason() is not None
        assert [(b.broker_id, b.read_only) for b in routes.route("Orders").brokers] == [(0, True)]
    finally:
        store.set_put_fence(None)
    assert store.put_fence_reason() is None
    assert [(b.broker_id, b.read_only) for b in routes.route("Orders").brokers] == [(0, False)]


@dataclass
class RegistryView(FencedView):
    """A `FencedView` with a cluster registry read just now (the whole cluster, this group too)."""

    registry: ClusterView | None = None

    def cluster_registry(self):
        return (self.registry, 60_000) if self.registry is not None else None

    def cluster_view(self):
        return self.registry.without("broker-a") if self.registry is not None else None


def registered(broker_id: int, role: str, endpoint: str, **extra) -> BrokerRegistration:
    return BrokerRegistration(
        "C", "broker-a", broker_id, role, endpoint, remoting_endpoint=endpoint.replace(":10911", ":10913"), **extra
    )


def test_every_broker_of_a_group_names_the_same_members_from_a_fresh_registry(store):
    now = wall_clock_ms()
    records = [
        registered(0, MASTER, "10.0.0.1:10911", topics={"Orders": TopicRoute(4, 4)}),
        registered(1, SLAVE, "10.0.0.2:10911"),
        registered(2, SLAVE, "10.0.0.3:10911"),
    ]
    registry = ClusterView.from_registrations("C", records, now)
    # A slave knows first-hand its master and itself; its fellow slave comes from the registry.
    slave = RegistryView(BrokerRole.SLAVE, client="10.0.0.2:10911", master_client="10.0.0.1:10911", registry=registry)
    from_slave = core_of(store, slave, broker_id=1).routes.route("Orders")
    # A master that has no stream from slave 2 yet names it too.
    master = RegistryView(BrokerRole.SYNC_MASTER, client="10.0.0.1:10911", registry=registry)
    master.slaves = [SlaveSnapshot("ha", 1, "10.0.0.2:10911", 0, 0, 0.0, True, 0)]
    from_master = core_of(store, master).routes.route("Orders")
    for route, own in ((from_slave, "10.0.0.2:10911"), (from_master, "10.0.0.1:10911")):
        assert sorted((b.broker_id, b.client_endpoint, b.read_only) for b in route.brokers) == [
            (0, "10.0.0.1:10911", False),
            (1, "10.0.0.2:10911", True),
            (2, "10.0.0.3:10911", True),
        ]
        # The registry lends the others' remoting endpoints; this broker's own is its adapter's.
        remoting = {b.client_endpoint: b.remoting_endpoint for b in route.brokers}
        assert remoting.pop(own) == "" and set(remoting.values()) == {e.replace(":10911", ":10913") for e in remoting}


@dataclass
class ElectedView(FencedView):
    """A controller-mode `FencedView` whose elected master the test sets."""

    elected_id: int | None = None

    def controller_status(self):
        master = None if self.elected_id is None else SimpleNamespace(broker_id=self.elected_id)
        return SimpleNamespace(master=master)


def test_a_controller_mode_slave_routes_writers_to_the_elected_master_and_reads_to_itself(store):
    slave = ElectedView(
        BrokerRole.SLAVE, client="10.0.0.2:10911", master_client="10.0.0.1:10911", fence="a slave", elected_id=2
    )
    routes = core_of(store, slave, broker_id=0).routes
    # Configured as brokerId 0, it is named by the elected master's id: id 0 is the master's alone.
    assert [(b.broker_id, b.client_endpoint, b.read_only) for b in routes.route("Orders").brokers] == [
        (0, "10.0.0.1:10911", False),
        (2, "10.0.0.2:10911", True),
    ]
    fresh = routes.route("Fresh")
    assert not fresh.exists and [b.client_endpoint for b in fresh.brokers] == ["10.0.0.1:10911"]
    slave.master_client, slave.elected_id = "", None
    assert routes.route("Orders").reason is Reason.NO_MASTER


def test_heartbeats_register_consumers_within_the_limits(store):
    registry = ClientRegistry(ClientLimits(expiry_ms=1000, max_clients_per_group=1))
    clients = ClientService(registry)

    def beat(client_id: str, *groups: str, producers: tuple[str, ...] = ()) -> Refusal | None:
        consumer_groups = {g: frozenset({"Orders"}) for g in groups}
        return clients.heartbeat(Heartbeat(client_id, "10.0.0.5:6000", consumer_groups, producers), 0)

    # A producer's heartbeat is recorded for the admin API, never refused, and lists no consumer.
    assert beat("p-1", producers=("order-producers",)) is None
    assert [(c.client_id, c.kind) for c in registry.clients(0)] == [("p-1", ClientKind.PRODUCER)]
    assert beat("", "billing").reason is Reason.BAD_REQUEST
    assert beat("c-1", "bad group!").reason is Reason.ILLEGAL_GROUP
    assert beat("c-1", "billing") is None
    full = beat("c-2", "billing")
    assert full is not None and full.reason is Reason.TABLE_FULL and "remotingMaxClientsPerGroup" in full.text
    assert clients.consumers("billing", 500) == ["c-1"]
    assert clients.consumers("billing", 5000).reason is Reason.CONSUMER_NOT_ONLINE
    assert clients.consumers("bad group!", 500).reason is Reason.ILLEGAL_GROUP
    # A goodbye naming no group leaves every group of the client.
    clients.gone("c-1")
    assert clients.consumers("billing", 500).reason is Reason.CONSUMER_NOT_ONLINE


def test_auto_creation_faster_than_its_rate_is_throttled(tmp_path):
    config = StoreConfig(store_path_root_dir=str(tmp_path / "store"), auto_create_topic_per_minute=1)
    with MessageStore(config) as store:
        core = core_of(store)
        assert reasons(plan(core, item("First"), item("Second"))) == ["planned", Reason.TOPIC_CREATION_THROTTLED]
