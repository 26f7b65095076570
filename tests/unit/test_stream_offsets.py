"""The streaming source's offset logic without Spark or sockets: the checkpoint's offset format,
the per-trigger budget split, range planning, lag, and the pull loop over a fake broker queue."""

from __future__ import annotations

import json
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client import PullResult, PullStatus, ReceivedMessage
from pipeline.stream_command import parse_trigger
from pipeline.stream_source import (
    COLUMNS,
    CorruptMessageError,
    DataLossError,
    QueueRange,
    StreamOptions,
    StreamReadError,
    StreamSourceError,
    decode_offsets,
    encode_offsets,
    lag_from_progress,
    message_row,
    messages_to_batch,
    next_end,
    parse_starting_offsets,
    plan_ranges,
    queue_lag,
    read_queue_range,
    split_budget,
)

# -- the offsets document ----------------------------------------------------------------------


def test_offsets_are_canonical_json_and_survive_the_checkpoint():
    offsets = {("B", 10): 7, ("A", 2): 3, ("B", 9): 0, ("A", 0): 12}
    doc = encode_offsets(offsets)
    # topics, then queue ids numerically; queue ids as strings: what Spark writes and reads back
    assert json.dumps(doc) == '{"A": {"0": 12, "2": 3}, "B": {"9": 0, "10": 7}}'
    assert decode_offsets(json.loads(json.dumps(doc))) == offsets
    assert decode_offsets({"A": {0: 12}}) == {("A", 0): 12}  # int keys, as a caller may build them
    assert encode_offsets(decode_offsets(doc)) == doc
    assert encode_offsets({}) == {}


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
    ],
)
def test_malformed_offsets_are_refused(doc):
    with pytest.raises(StreamSourceError):
        decode_offsets(doc)


def test_starting_offsets():
    assert parse_starting_offsets(None) == "earliest"
    assert parse_starting_offsets(" Latest ") == "latest"
    assert parse_starting_offsets('{"A": {"1": 5}}') == {("A", 1): 5}
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


# -- the budget --------------------------------------------------------------------------------

A0, A1, A2, B0 = ("A", 0), ("A", 1), ("A", 2), ("B", 0)


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
    st.dictionaries(st.tuples(st.sampled_from("AB"), st.integers(0, 7)), st.integers(0, 50), max_size=12),
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
    start = {A0: 5, A1: 7, ("gone", 0): 3}
    latest = {A0: 9, A1: 7, A2: 4}  # A2 is new: it starts at 0
    assert next_end(start, latest, None) == {A0: 9, A1: 7, A2: 4, ("gone", 0): 3}
    # 3 over A0 and A2: one each, and the odd one by the rotation (sum of start offsets 15, odd: A2)
    assert next_end(start, latest, 3) == {A0: 6, A1: 7, A2: 2, ("gone", 0): 3}
    # a queue behind its start (the broker lost messages; failOnDataLoss=false) never goes back
    assert next_end({A0: 9}, {A0: 4}, None) == {A0: 9}
    assert next_end(start, {}, 10) == start


def test_plan_ranges():
    start = {A0: 5, A1: 7}
    end = {A0: 9, A1: 7, A2: 4}
    assert plan_ranges(start, end) == [QueueRange("A", 0, 5, 9), QueueRange("A", 2, 0, 4, new_queue=True)]
    assert plan_ranges(end, end) == []
    with pytest.raises(StreamReadError, match="before its start"):
        plan_ranges({A0: 5}, {A0: 4})


def test_lag():
    assert queue_lag({A0: 5, A1: 7}, {A0: 9, A1: 7, A2: 2}) == {A0: 4, A1: 0, A2: 2}
    progress = {
        "batchId": 3,
        "numInputRows": 8,
        "sources": [
            {"startOffset": None, "endOffset": '{"A": {"0": 5, "1": 7}}', "latestOffset": {"A": {"0": 9, "1": 7}}}
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
    assert (info.value.topic, info.value.first, info.value.end) == ("A", 2, 6)
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
    rows = [message_row(message(i)) for i in range(6)]
    assert len(rows[0]) == len(COLUMNS)
    assert rows[0][3] == 1000 and rows[0][6] is None and rows[0][7] == "k1 k2" and rows[0][10] is None
    assert rows[1][7] is None and rows[1][6] == "t" and rows[1][8] == [("p", "1")]
    batch = messages_to_batch([message(i) for i in range(6)])
    assert batch.num_rows == 6 and batch.schema.names == [name for name, _ in COLUMNS]
    assert batch.column("body").to_pylist()[2] == b"body-2"


# -- the CLI's trigger -------------------------------------------------------------------------


def test_parse_trigger():
    assert parse_trigger("available-now") == ("available-now", None)
    assert parse_trigger("processing-time:5") == ("processing-time", 5.0)
    assert parse_trigger("processing-time:1.5s") == ("processing-time", 1.5)
    assert parse_trigger("processing-time:250ms") == ("processing-time", 0.25)
    for bad in ("processing-time", "processing-time:0", "processing-time:x", "continuous:1", "once"):
        with pytest.raises(ValueError):
            parse_trigger(bad)
