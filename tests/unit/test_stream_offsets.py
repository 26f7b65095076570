"""The streaming source's offset logic without Spark or sockets: the checkpoint's offset format,
the per-trigger budget split, range planning, lag, and the pull loop over a fake broker queue."""

from __future__ import annotations

import json
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.streaming.datasource import ReadAllAvailable

from client import PullResult, PullStatus, QueueInfo, ReceivedMessage, TransportError
from pipeline.stream_source import (
    COLUMNS,
    HOME,
    CorruptMessageError,
    DataLossError,
    GroupQueues,
    QueueRange,
    RocketStoreStreamReader,
    StreamOptions,
    StreamReadError,
    StreamSourceError,
    decode_offsets,
    encode_offsets,
    home_group,
    lag_from_progress,
    message_row,
    messages_to_batch,
    next_end,
    parse_starting_offsets,
    plan_ranges,
    queue_lag,
    read_queue_range,
    resolve_home,
    route_groups,
    split_budget,
)
from rocketstore.commands.pipeline_stream import parse_trigger

# -- the offsets document ----------------------------------------------------------------------


def test_offsets_are_canonical_json_and_survive_the_checkpoint():
    offsets = {("B", "b", 10): 7, ("A", "b", 2): 3, ("B", "b", 9): 0, ("A", "a", 0): 12, ("A", "b", 0): 1}
    doc = encode_offsets(offsets)
    # topics, then groups, then queue ids numerically; queues as strings: what Spark writes and reads back
    assert json.dumps(doc) == '{"A": {"a:0": 12, "b:0": 1, "b:2": 3}, "B": {"b:9": 0, "b:10": 7}}'
    assert decode_offsets(json.loads(json.dumps(doc))) == offsets
    assert encode_offsets(decode_offsets(doc)) == doc
    assert encode_offsets({}) == {}
    # a queue named by id alone (checkpoints from before clusters) is the endpoint's group's
    assert decode_offsets({"A": {"3": 12, 4: 1}}) == {("A", HOME, 3): 12, ("A", HOME, 4): 1}
    assert json.dumps(encode_offsets({("A", HOME, 3): 12})) == '{"A": {"3": 12}}'
    assert decode_offsets({"A": {"broker:x:2": 5}}) == {("A", "broker:x", 2): 5}  # the id follows the last ':'


def test_queues_named_by_id_alone_go_to_the_endpoints_group():
    offsets = {("A", HOME, 0): 5, ("A", HOME, 1): 6, ("A", "b", 0): 7, ("A", "a", 1): 9}
    assert resolve_home(offsets, "a") == {("A", "a", 0): 5, ("A", "a", 1): 9, ("A", "b", 0): 7}
    assert resolve_home({("A", "b", 0): 7}, None) == {("A", "b", 0): 7}
    with pytest.raises(StreamSourceError, match="queue A:0 by its id alone.*BROKER:ID"):
        resolve_home(offsets, None)


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"A": [1]},
        {"A": {"x": 1}},
        {"A": {"-1": 1}},
        {"A": {"0": -1}},
        {"A": {"0": "3"}},
        {"A": {"0": True}},
        {"": {"0": 1}},
        {"A": {"0": 1.5}},
        {"A": {":0": 1}},
        {"A": {"b:": 1}},
        {"A": {"b:-1": 1}},
    ],
)
def test_malformed_offsets_are_refused(doc):
    with pytest.raises(StreamSourceError):
        decode_offsets(doc)


def test_starting_offsets():
    assert parse_starting_offsets(None) == "earliest"
    assert parse_starting_offsets(" Latest ") == "latest"
    assert parse_starting_offsets('{"A": {"1": 5, "b:2": 3}}') == {("A", HOME, 1): 5, ("A", "b", 2): 3}
    with pytest.raises(StreamSourceError, match="earliest, latest or JSON"):
        parse_starting_offsets("newest")


def test_options():
    o = StreamOptions.parse({"ENDPOINT": "127.0.0.1:10911", "topics": " A, B ,A,", "maxmessagespertrigger": "50"})
    assert (o.endpoint, o.topics, o.max_messages_per_trigger, o.group, o.fail_on_data_loss) == (
        "127.0.0.1:10911",
        ("A", "B"),
        50,
        None,
        True,
    )
    o = StreamOptions.parse(
        {
            "endpoint": "[::1]:9",
            "topics": "A",
            "group": "g",
            "failOnDataLoss": "false",
            "startingOffsets": "latest",
            "pullBatchSize": "1024",
        }
    )
    assert (o.endpoint, o.group, o.fail_on_data_loss, o.starting, o.pull_batch_size) == (
        "[::1]:9",
        "g",
        False,
        "latest",
        1024,
    )
    for bad, match in (
        ({"topics": "A"}, "endpoint is required"),
        ({"endpoint": "h:1"}, "topics is required"),
        ({"endpoint": "h", "topics": "A"}, "no port"),
        ({"endpoint": "h:1", "topics": "A", "maxMessagesPerTrigger": "0"}, "at least 1"),
        ({"endpoint": "h:1", "topics": "A", "pullBatchSize": "2000"}, "1..1024"),
        ({"endpoint": "h:1", "topics": "A", "failOnDataLoss": "maybe"}, "true or false"),
        ({"endpoint": "h:1", "topics": "A", "maxOffsetsPerTrigger": "5"}, "unknown option"),
    ):
        with pytest.raises(StreamSourceError, match=match):
            StreamOptions.parse(bad)


# -- routes ------------------------------------------------------------------------------------


def entry(broker, queue_id, broker_id=0, endpoint=None, permission="READ_WRITE"):
    endpoint = endpoint if endpoint is not None else f"{broker}-{broker_id}:1"
    return QueueInfo("T", queue_id, permission, broker, broker_id, endpoint)


def test_a_route_read_by_group():
    route = [
        # a slave's own group: its master as id 0, itself as id 1 for reads
        *(entry("a", q) for q in range(2)),
        *(entry("a", q, 1, permission="READ") for q in range(2)),
        # another group: its master, a slave, and a queue that is write-only there
        *(entry("b", q) for q in range(3)),
        *(entry("b", q, 2, permission="READ") for q in range(3)),
        entry("b", 3, permission="WRITE"),
        entry("c", 0, endpoint=""),  # a group whose broker the registry has no endpoint for
    ]
    assert home_group(route, "a-1:1") == "a"
    assert home_group(route, "elsewhere:1") is None
    assert home_group([entry("a", 0)], "alias-of-a:1") == "a"  # the route's only group
    assert route_groups(route, "a-1:1", "a") == [
        GroupQueues("a", (0, 1), ("a-1:1", "a-0:1")),  # the endpoint first, for its own group
        GroupQueues("b", (0, 1, 2), ("b-0:1", "b-2:1")),
    ]
    assert route_groups(route, "elsewhere:1", None)[0] == GroupQueues("a", (0, 1), ("a-0:1", "a-1:1"))
    assert route_groups([], "a-1:1", None) == []


# -- the budget --------------------------------------------------------------------------------

A0, A1, A2, B0 = ("A", "g", 0), ("A", "g", 1), ("A", "h", 2), ("B", "g", 0)


def test_split_budget_is_max_min_fair():
    assert split_budget({A0: 100, A1: 100, A2: 100}, 30) == {A0: 10, A1: 10, A2: 10}
    # what a short queue cannot use goes to the others
    assert split_budget({A0: 2, A1: 100, A2: 100}, 30) == {A0: 2, A1: 14, A2: 14}
    assert split_budget({A0: 2, A1: 3, A2: 0}, 30) == {A0: 2, A1: 3}
    # the remainder goes one each, starting at the rotation
    assert split_budget({A0: 9, A1: 9, A2: 9}, 4, rotation=0) == {A0: 2, A1: 1, A2: 1}
    assert split_budget({A0: 9, A1: 9, A2: 9}, 4, rotation=1) == {A0: 1, A1: 2, A2: 1}
    assert split_budget({A0: 9, A1: 9, A2: 9}, 2, rotation=2) == {A2: 1, A0: 1}
    assert split_budget({A0: 5}, 0) == {}
    with pytest.raises(ValueError):
        split_budget({A0: 5}, -1)


@given(
    st.dictionaries(
        st.tuples(st.sampled_from("AB"), st.sampled_from("gh"), st.integers(0, 7)), st.integers(0, 50), max_size=12
    ),
    st.integers(0, 200),
    st.integers(0, 10**6),
)
def test_split_budget_properties(available, budget, rotation):
    take = split_budget(available, budget, rotation)
    assert sum(take.values()) == min(budget, sum(available.values()))
    assert all(0 < n <= available[k] for k, n in take.items())
    assert take == split_budget(dict(reversed(list(available.items()))), budget, rotation)  # order-free
    # max-min fair: a queue that got less than another was either drained or within one unit
    for k, n in take.items():
        for _other, m in take.items():
            assert n >= m - 1 or n == available[k]
    for k, n in available.items():
        if n and k not in take:
            assert budget < len([v for v in available.values() if v])


def test_a_small_budget_moves_every_queue_forward():
    start = {A0: 0, A1: 0, A2: 0, B0: 0}
    latest = {A0: 10, A1: 10, A2: 10, B0: 10}
    seen = set()
    for _ in range(4):
        end = next_end(start, latest, 1)
        assert sum(end.values()) - sum(start.values()) == 1
        seen |= {k for k in end if end[k] > start[k]}
        start = end
    assert seen == {A0, A1, A2, B0}


def test_next_end():
    gone = ("gone", "g", 0)
    start = {A0: 5, A1: 7, gone: 3}
    latest = {A0: 9, A1: 7, A2: 4}  # A2 is new (a group added, say): it starts at 0
    assert next_end(start, latest, None) == {A0: 9, A1: 7, A2: 4, gone: 3}
    # 3 over A0 and A2: one each, and the odd one by the rotation (sum of start offsets 15, odd: A2)
    assert next_end(start, latest, 3) == {A0: 6, A1: 7, A2: 2, gone: 3}
    # a queue behind its start (the broker lost messages; failOnDataLoss=false) never goes back
    assert next_end({A0: 9}, {A0: 4}, None) == {A0: 9}
    assert next_end(start, {}, 10) == start


def test_plan_ranges():
    start = {A0: 5, A1: 7}
    end = {A0: 9, A1: 7, A2: 4}
    assert plan_ranges(start, end) == [
        QueueRange("A", 0, 5, 9, broker_name="g"),
        QueueRange("A", 2, 0, 4, new_queue=True, broker_name="h"),
    ]
    assert plan_ranges(end, end) == []
    with pytest.raises(StreamReadError, match="before its start"):
        plan_ranges({A0: 5}, {A0: 4})


def test_lag():
    assert queue_lag({A0: 5, A1: 7}, {A0: 9, A1: 7, A2: 2}) == {A0: 4, A1: 0, A2: 2}
    progress = {
        "batchId": 3,
        "numInputRows": 8,
        "sources": [
            {
                "startOffset": None,
                "endOffset": '{"A": {"g:0": 5, "g:1": 7}}',
                "latestOffset": {"A": {"g:0": 9, "g:1": 7}},
            }
        ],
    }
    report = lag_from_progress(progress)
    assert (report.batch_id, report.num_input_rows, report.lag, report.total) == (3, 8, {A0: 4, A1: 0}, 4)
    assert lag_from_progress({"sources": [{"endOffset": None, "latestOffset": None}]}) is None
    assert lag_from_progress({"sources": []}) is None


# -- the pull loop -----------------------------------------------------------------------------


def message(offset: int, *, topic="A", queue_id=0, crc_ok=True) -> ReceivedMessage:
    return ReceivedMessage(
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        commit_log_offset=1000 + offset,
        msg_id=f"ID{offset}",
        body=b"body-%d" % offset,
        tag="t" if offset % 2 else None,
        keys=("k1", "k2") if offset % 3 == 0 else (),
        properties=types.MappingProxyType({"p": str(offset)}),
        born_timestamp_ms=1_700_000_000_000 + offset,
        store_timestamp_ms=1_700_000_000_001 + offset if offset % 5 else -1,
        born_host="10.0.0.1:5000",
        store_host="10.0.0.2:10911",
        reconsume_times=0,
        body_crc_ok=crc_ok,
    )


class FakeQueue:
    """One broker queue: offsets [min_offset, max_offset) hold messages, except `holes` (entries
    whose CommitLog bytes are gone); `page_cap` limits a pull like the broker's byte budget;
    `dry` pulls answer NO_NEW_MSG first (messages not dispatched yet)."""

    def __init__(self, min_offset=0, max_offset=100, *, page_cap=1000, holes=(), dry=0, corrupt=()):
        self.min_offset, self.max_offset, self.page_cap = min_offset, max_offset, page_cap
        self.holes, self.dry, self.corrupt = set(holes), dry, set(corrupt)
        self.calls = []

    def pull(self, topic, queue_id, offset, *, max_messages=32, tag_filter=None, long_polling_ms=0):
        self.calls.append((offset, max_messages, long_polling_ms))
        if self.dry:
            self.dry -= 1
            return PullResult(PullStatus.NO_NEW_MSG, [], offset)
        if offset < self.min_offset:
            return PullResult(PullStatus.OFFSET_ILLEGAL, [], self.min_offset)
        if offset > self.max_offset:
            return PullResult(PullStatus.OFFSET_ILLEGAL, [], self.max_offset)
        if offset == self.max_offset:
            return PullResult(PullStatus.NO_NEW_MSG, [], offset)
        out, cur = [], offset
        while cur < self.max_offset and len(out) < min(max_messages, self.page_cap):
            if cur not in self.holes:
                out.append(message(cur, topic=topic, queue_id=queue_id, crc_ok=cur not in self.corrupt))
            cur += 1
        return PullResult(PullStatus.FOUND if out else PullStatus.NO_MATCHED_MSG, out, cur)


def offsets_read(queue, qrange, **kw):
    return [[m.queue_offset for m in page] for page in read_queue_range(queue, qrange, **kw)]


def test_reads_exactly_the_range_in_pages():
    queue = FakeQueue(page_cap=4)
    pages = offsets_read(queue, QueueRange("A", 0, 10, 21), page_size=5)
    assert pages == [[10, 11, 12, 13], [14, 15, 16, 17], [18, 19, 20]]
    assert [c[1] for c in queue.calls] == [5, 5, 3]  # never asks past the end
    assert offsets_read(FakeQueue(), QueueRange("A", 0, 0, 3)) == [[0, 1, 2]]


def test_empty_pulls_are_retried_as_long_polls_then_fail():
    queue = FakeQueue(dry=2)
    assert offsets_read(queue, QueueRange("A", 0, 0, 2), empty_pull_retries=2, retry_wait_ms=50) == [[0, 1]]
    assert [c[2] for c in queue.calls] == [0, 50, 50]
    queue = FakeQueue(max_offset=5)
    with pytest.raises(StreamReadError, match="served nothing from offset 5 in 4 pulls"):
        offsets_read(queue, QueueRange("A", 0, 3, 8), empty_pull_retries=3)
    assert len(queue.calls) == 5  # the page 3..5, then the first try and 3 retries


def test_retention_is_data_loss_unless_allowed():
    queue = FakeQueue(min_offset=6)
    with pytest.raises(DataLossError, match=r"lost offsets \[2, 6\).*retention.*failOnDataLoss=false") as info:
        offsets_read(queue, QueueRange("A", 0, 2, 9))
    assert (info.value.key, info.value.first, info.value.end) == (("A", HOME, 0), 2, 6)
    with pytest.raises(DataLossError, match=r"queue A:b:0 lost offsets \[2, 6\)"):
        offsets_read(queue, QueueRange("A", 0, 2, 9, broker_name="b"))
    assert offsets_read(queue, QueueRange("A", 0, 2, 9), fail_on_data_loss=False) == [[6, 7, 8]]
    # everything of the range gone
    assert offsets_read(queue, QueueRange("A", 0, 2, 5), fail_on_data_loss=False) == []
    # a queue new to the batch starts where the broker's data starts
    assert offsets_read(queue, QueueRange("A", 0, 0, 9, new_queue=True)) == [[6, 7, 8]]


def test_holes_are_data_loss():
    queue = FakeQueue(holes={3, 4})
    with pytest.raises(DataLossError, match=r"\[3, 5\)"):
        offsets_read(queue, QueueRange("A", 0, 0, 8))
    assert offsets_read(queue, QueueRange("A", 0, 0, 8), fail_on_data_loss=False) == [[0, 1, 2, 5, 6, 7]]
    assert offsets_read(FakeQueue(holes=set(range(0, 10))), QueueRange("A", 0, 2, 8), fail_on_data_loss=False) == []


def test_a_broker_holding_less_than_planned_is_an_error():
    with pytest.raises(StreamReadError, match="ends at 4 on this broker"):
        offsets_read(FakeQueue(max_offset=4), QueueRange("A", 0, 7, 9))


def test_corrupt_body_raises():
    with pytest.raises(CorruptMessageError, match="offset 2 .*digest"):
        offsets_read(FakeQueue(corrupt={2}), QueueRange("A", 0, 0, 5))


def test_a_broker_going_backwards_is_an_error():
    class Backwards(FakeQueue):
        def pull(self, *a, **kw):
            return PullResult(PullStatus.FOUND, [message(0), message(1), message(0)], 2)

    with pytest.raises(StreamReadError, match="answered offset 0 after 1"):
        offsets_read(Backwards(), QueueRange("A", 0, 0, 2))


def test_rows_match_the_schema():
    rows = [message_row(message(i), "broker-b") for i in range(6)]
    assert len(rows[0]) == len(COLUMNS)
    assert rows[0][3] == 1000 and rows[0][6] is None and rows[0][7] == "k1 k2" and rows[0][10] is None
    assert rows[1][7] is None and rows[1][6] == "t" and rows[1][8] == [("p", "1")] and rows[1][-1] == "broker-b"
    batch = messages_to_batch([message(i) for i in range(6)], "broker-b")
    assert batch.num_rows == 6 and batch.schema.names == [name for name, _ in COLUMNS]
    assert batch.column("body").to_pylist()[2] == b"body-2"
    assert set(batch.column("broker_name").to_pylist()) == {"broker-b"}


# -- planning and reading over a cluster's groups -------------------------------------------------


class FakeBroker:
    """One broker of a cluster as the reader's PullConsumer sees it; `down` fails every call."""

    def __init__(self, route, queues, down=False):
        self.route_entries, self.queues, self.down = route, queues, down
        self.committed = {}

    def _check(self):
        if self.down:
            raise TransportError("x:1", "UNAVAILABLE")

    def route(self, topic):
        self._check()
        return self.route_entries

    def query_offset(self, topic, queue_id, policy):
        self._check()
        queue = self.queues[queue_id]
        return queue.max_offset if policy == "END" else queue.min_offset

    def pull(self, topic, queue_id, offset, **kw):
        self._check()
        return self.queues[queue_id].pull(topic, queue_id, offset, **kw)

    def update_offset(self, topic, queue_id, offset):
        self._check()
        self.committed[(topic, queue_id)] = offset

    def close(self):
        pass


def cluster_reader(brokers, endpoint="a-0:1", **options):
    reader = RocketStoreStreamReader(StreamOptions.parse({"endpoint": endpoint, "topics": "T", **options}))
    reader._open_consumer = lambda ep: brokers[ep]  # the sockets stay out of a unit test
    return reader


def test_the_reader_plans_every_group_and_goes_on_without_one_that_is_down():
    route = [entry("a", 0), entry("a", 1), entry("b", 0), entry("b", 0, 1, permission="READ"), entry("c", 0)]
    brokers = {
        "a-0:1": FakeBroker(route, {0: FakeQueue(0, 5), 1: FakeQueue(0, 2)}),
        "b-0:1": FakeBroker(route, {0: FakeQueue(0, 4)}),
        "b-1:1": FakeBroker(route, {0: FakeQueue(0, 4)}),
        "c-0:1": FakeBroker(route, {}, down=True),
    }
    reader = cluster_reader(brokers, group="g")
    # a checkpoint from before clusters names the endpoint's group's queues by id alone
    start = {"T": {"0": 3}}
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"T": {"a:0": 5, "a:1": 2, "b:0": 4}}  # c is left out: its queues wait
    parts = reader.partitions(start, end)
    assert [(p.qrange.key, p.qrange.start, p.qrange.end, p.endpoints) for p in parts] == [
        (("T", "a", 0), 3, 5, ("a-0:1",)),
        (("T", "a", 1), 0, 2, ("a-0:1",)),
        (("T", "b", 0), 0, 4, ("b-0:1", "b-1:1")),
    ]
    # b's master fails after its first page: its slave serves the rest of the range
    brokers["b-0:1"].queues[0].page_cap = 3
    real_pull = brokers["b-0:1"].pull

    def once_then_down(*a, **kw):
        result = real_pull(*a, **kw)
        brokers["b-0:1"].down = True
        return result

    brokers["b-0:1"].pull = once_then_down
    batches = list(reader.read(parts[2]))
    assert [b.column("queue_offset").to_pylist() for b in batches] == [[0, 1, 2], [3]]
    assert {n for b in batches for n in b.column("broker_name").to_pylist()} == {"b"}
    # offsets are committed to the group that owns each queue
    reader.commit(end)
    assert brokers["a-0:1"].committed == {("T", 0): 5, ("T", 1): 2}
    assert brokers["b-0:1"].committed == {} and brokers["b-1:1"].committed == {}  # b's master is down
    # the endpoint's own group down fails the query, as a single broker does
    brokers["a-0:1"].down = True
    with pytest.raises(TransportError):
        cluster_reader(brokers).latestOffset(end, ReadAllAvailable())


def test_queues_by_id_alone_need_a_route_that_names_the_endpoints_group():
    route = [entry("a", 0), entry("b", 0)]
    brokers = {"proxy:1": FakeBroker(route, {0: FakeQueue(0, 5)})}
    reader = cluster_reader(brokers, endpoint="proxy:1")
    with pytest.raises(StreamSourceError, match="by its id alone"):
        reader.latestOffset({"T": {"0": 3}}, ReadAllAvailable())


# -- the CLI's trigger -------------------------------------------------------------------------


def test_parse_trigger():
    assert parse_trigger("available-now") == ("available-now", None)
    assert parse_trigger("processing-time:5") == ("processing-time", 5.0)
    assert parse_trigger("processing-time:1.5s") == ("processing-time", 1.5)
    assert parse_trigger("processing-time:250ms") == ("processing-time", 0.25)
    for bad in ("processing-time", "processing-time:0", "processing-time:x", "continuous:1", "once"):
        with pytest.raises(ValueError):
            parse_trigger(bad)
