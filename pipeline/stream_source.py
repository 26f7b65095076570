"""The `rocketstore` streaming source: topics of a running broker, or of every broker group of a
cluster, read by queue and offset into Spark Structured Streaming (PySpark Python Data Source API).

    from pipeline.stream_source import register
    register(spark)
    df = (spark.readStream.format("rocketstore")
          .option("endpoint", "127.0.0.1:10911").option("topics", "Orders,Payments")
          .option("maxMessagesPerTrigger", 10000).load())

Options: `endpoint` (required, the client endpoint of a broker, master or slave; in a cluster any
broker's, since its routes name every group's queues), `topics` (required,
comma-separated), `startingOffsets` (`earliest`, the default: each queue's min offset; `latest`:
each queue's END; or a JSON offsets document as below, queues it does not name start at their min
offset; used only when the checkpoint has no offsets yet), `maxMessagesPerTrigger` (a cap per
micro-batch, split across queues: see `split_budget`), `group` (the consumer group the pulls name;
when given, `commit` also writes each finished batch's end offsets to the broker under that group,
for monitoring: Spark's checkpoint stays the truth, and since Spark commits a batch to its source
when it plans the next one, the broker's offsets trail by a batch), `failOnDataLoss` (default true:
a range the stream still has to read but the broker no longer holds, e.g. deleted by retention,
fails the query; false skips it with a warning), `pullBatchSize` (messages per pull, default 256,
at most 1024), `emptyPullRetries` (default 5) and `retryWaitMs` (default 500: a long poll, never a
sleep) bound how long a task waits for messages the plan says exist, `requestTimeoutS` (default
10), `tlsCaFile`.

Columns (`COLUMNS`): topic, queue_id int, queue_offset bigint, commit_log_offset bigint (null when
the broker did not say), msg_id, body binary, tags (null when none), keys (space-joined, null when
none), properties map<string,string> (the user's properties), born_timestamp and store_timestamp
(ms since the epoch, bigint; store_timestamp null when the broker did not say), born_host,
store_host, reconsume_times int, broker_name (the group whose queue the message was read from: a
message is identified by topic, broker_name, queue_id and queue_offset).

Offsets (the checkpoint's format: changing it breaks checkpoints): `{"topic": {"broker:queue_id":
next_queue_offset}}`, a queue named by its group and its id as in RocketMQ's MessageQueue (JSON
object keys are strings; Spark writes the dict to its offset log as it is), topics, groups and
queue ids in ascending order, because Spark compares offsets as JSON text to decide whether new
data exists. A queue named by its id alone (`{"topic": {"3": 12}}`: checkpoints written before the
source read clusters, or a hand-written startingOffsets) belongs to the group of the broker at
`endpoint` (`resolve_home`). A queue missing from a batch's start offsets (found after the stream
began: a new topic, more queues, a group added to the cluster) starts at offset 0, and a range of
such a queue that retention already deleted is skipped without counting as data loss.

Planning (`initialOffset`, `latestOffset`, `partitions`, `commit`) runs in one long-lived Python
process per query and talks to the brokers through lazily opened `PullConsumer`s, one per endpoint:
the route the endpoint gives names each topic's readable queues by group (`route_groups`), and
`query_offset(..., "END")` their ends, asked of the broker each group is read from: the endpoint
itself for its own group (so a stream pointed at a slave reads from the slave), broker id 0 (the
master, or a slave acting for it) for the others. A group that does not answer is left out of that
batch with a warning (its queues wait; the others go on), except the endpoint's own, which fails
the query as before. A topic the broker does not know has no queues yet (a master with
autoCreateTopicEnable creates it on the route query, as for any client). `partitions(start, end)`
is one partition per (topic, group, queue) with work, carrying plain values and the group's
endpoints in the order to try; `read` opens its own consumer and pulls exactly [start, end) in
pages (`read_queue_range`), handing what is left to the next endpoint (a slave of the group) when a
broker fails part way. `commit` writes each queue's offset to the broker its group is read from: a
consumer group's offsets live with the group that owns the queue. Ranges are fixed by the offsets
Spark logs before running a batch, so a replayed batch reads the same messages: with Spark's
checkpoint and an idempotent sink (the file sinks), each message lands exactly once across
restarts. `Trigger.availableNow` records each queue's END once (`prepareForTriggerAvailableNow`)
and reads up to it, `maxMessagesPerTrigger` batches at a time.

Consumer lag: `reportLatestOffset` returns the ENDs seen by the last `latestOffset`, so each
progress entry's `sources[0]` has `endOffset` (what the batch read up to) and `latestOffset` (what
the broker held); `lag_from_progress` turns one entry into lag per queue.

The broker's pull API serves only messages it has dispatched to its ConsumeQueues, so the stream
never reads past what the broker would serve any consumer; a future controller mode that confirms
offsets will bound reads by the confirmed offset at the broker, with nothing to change here.

Thread-safety: the pure functions are; a reader belongs to the Spark process that made it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, overload

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from client import BrokerError, PullConsumer, PullResult, PullStatus, ReceivedMessage, RocketStoreError, parse_endpoint
from client.convert import DEFAULT_GROUP, MAX_BATCH, QueueInfo, home_group

log = logging.getLogger("rocketstore.pipeline.stream")

FORMAT = "rocketstore"

COLUMNS: tuple[tuple[str, str], ...] = (
    ("topic", "string"),
    ("queue_id", "int"),
    ("queue_offset", "bigint"),
    ("commit_log_offset", "bigint"),
    ("msg_id", "string"),
    ("body", "binary"),
    ("tags", "string"),
    ("keys", "string"),
    ("properties", "map<string,string>"),
    ("born_timestamp", "bigint"),
    ("store_timestamp", "bigint"),
    ("born_host", "string"),
    ("store_host", "string"),
    ("reconsume_times", "int"),
    ("broker_name", "string"),
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)
SCHEMA_DDL = ", ".join(f"{name} {kind}" for name, kind in COLUMNS)

EARLIEST = "earliest"
LATEST = "latest"
NEW_QUEUE_START = 0  # a queue the offsets do not name begins at its first message
DEFAULT_PULL_BATCH = 256
DEFAULT_EMPTY_PULL_RETRIES = 5
DEFAULT_RETRY_WAIT_MS = 500
DEFAULT_TIMEOUT_S = 10.0

HOME = ""  # the broker name of a queue named by id alone: the group answering at `endpoint`
QueueKey = tuple[str, str, int]  # (topic, broker name, queue id): RocketMQ's MessageQueue
Offsets = dict[QueueKey, int]


def queue_text(broker_name: str, queue_id: int) -> str:
    """A queue's key under its topic in the offsets document: `broker-a:3`, or `3` for HOME."""
    return f"{broker_name}:{queue_id}" if broker_name else str(queue_id)


def queue_label(key: QueueKey) -> str:
    """`Orders:broker-a:3`: how messages and the stream command name a queue."""
    return f"{key[0]}:{queue_text(key[1], key[2])}"


class StreamSourceError(ValueError):
    """A bad option value or a malformed offsets document."""


class StreamReadError(RuntimeError):
    """The broker did not serve what the batch's plan says it holds."""


class DataLossError(StreamReadError):
    """Messages the stream still had to read are gone from the broker."""

    def __init__(self, key: QueueKey, first: int, end: int, why: str) -> None:
        self.key = key
        self.first = first
        self.end = end
        super().__init__(
            f"{FORMAT}: queue {queue_label(key)} lost offsets [{first}, {end}) before this stream read them ({why}); "
            "set option failOnDataLoss=false to skip lost ranges"
        )


class CorruptMessageError(StreamReadError):
    """A message whose body does not match its digest."""


# -- offsets -----------------------------------------------------------------------------------


def _natural(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StreamSourceError(f"{FORMAT}: {what} must be an int >= 0, got {value!r}")
    return value


def encode_offsets(offsets: Mapping[QueueKey, int]) -> dict[str, dict[str, int]]:
    """The canonical JSON-ready form: topics, then broker names, then queue ids (numerically),
    ascending."""
    doc: dict[str, dict[str, int]] = {}
    for key in sorted(offsets):
        doc.setdefault(key[0], {})[queue_text(key[1], key[2])] = offsets[key]
    return doc


def _queue_ref(topic: str, raw: Any) -> tuple[str, int]:
    if isinstance(raw, int) and not isinstance(raw, bool):
        broker, number = HOME, raw
    elif isinstance(raw, str):
        broker, _, digits = raw.rpartition(":")
        if ":" in raw and not broker:
            raise StreamSourceError(f"{FORMAT}: topic {topic}: queue {raw!r} names no broker before its ':'")
        if not (digits.isascii() and digits.isdigit()):
            raise StreamSourceError(f"{FORMAT}: topic {topic}: queue {raw!r} is not BROKER:ID or a queue id")
        number = int(digits)
    else:
        raise StreamSourceError(f"{FORMAT}: topic {topic}: queue id {raw!r} is not a number")
    return broker, _natural(number, f"queue id of topic {topic}")


def decode_offsets(doc: Any) -> Offsets:
    """Offsets from `encode_offsets`' form, as Spark hands them back (queues as `BROKER:ID`
    strings; a bare id, string or int, names a queue of HOME, as checkpoints written before
    clusters do). Anything else raises StreamSourceError."""
    if not isinstance(doc, Mapping):
        raise StreamSourceError(f"{FORMAT}: offsets are a JSON object of topics, got {type(doc).__name__}")
    out: Offsets = {}
    for topic, queues in doc.items():
        if not isinstance(topic, str) or not topic:
            raise StreamSourceError(f"{FORMAT}: offsets name a topic {topic!r}")
        if not isinstance(queues, Mapping):
            raise StreamSourceError(f"{FORMAT}: offsets of topic {topic} are a JSON object of queue ids")
        for raw_id, offset in queues.items():
            broker, queue_id = _queue_ref(topic, raw_id)
            key = (topic, broker, queue_id)
            out[key] = _natural(offset, f"offset of {queue_label(key)}")
    return out


def resolve_home(offsets: Mapping[QueueKey, int], home: str | None) -> Offsets:
    """`offsets` with HOME's queues named by `home`, the group that answers at the endpoint (a
    queue named both ways keeps its named offset). None, with HOME queues present: the route does
    not say which group the endpoint belongs to, and StreamSourceError says so."""
    out = {key: n for key, n in offsets.items() if key[1] != HOME}
    homeless = sorted(key for key in offsets if key[1] == HOME)
    if homeless and home is None:
        raise StreamSourceError(
            f"{FORMAT}: the offsets name queue {queue_label(homeless[0])} by its id alone, but the route does not "
            "say which broker group answers at the endpoint; name queues as BROKER:ID, e.g. "
            '{"Orders": {"broker-a:0": 12}}'
        )
    for topic, _, queue_id in homeless:
        out.setdefault((topic, str(home), queue_id), offsets[(topic, HOME, queue_id)])
    return out


def parse_starting_offsets(text: str | None) -> str | Offsets:
    """`earliest` (also when None), `latest`, or a JSON offsets document."""
    if text is None:
        return EARLIEST
    stripped = str(text).strip()
    if stripped.lower() in (EARLIEST, LATEST):
        return stripped.lower()
    try:
        doc = json.loads(stripped)
    except ValueError:
        raise StreamSourceError(
            f"{FORMAT}: startingOffsets is earliest, latest or JSON such as "
            '{"Orders": {"broker-a:0": 12, "broker-a:1": 40}}, '
            f"not {stripped[:60]!r}"
        ) from None
    return decode_offsets(doc)


def split_budget(available: Mapping[QueueKey, int], budget: int, rotation: int = 0) -> dict[QueueKey, int]:
    """How many of each queue's `available` messages a batch capped at `budget` takes.

    Max-min fair: every queue with work gets the same share, and what a queue cannot use goes to
    the others. When fewer units than queues are left, they go one each to consecutive queues
    (in key order) starting at `rotation` modulo their count, so that a small budget moves every
    queue forward over successive batches. Deterministic; the total is min(budget, sum)."""
    if budget < 0:
        raise ValueError(f"a budget cannot be negative: {budget}")
    keys = sorted(k for k, n in available.items() if n > 0)
    take = dict.fromkeys(keys, 0)
    remaining = budget
    active = keys
    for _ in range(len(keys) + 1):  # each pass but the last saturates a queue or spends the budget
        if remaining <= 0 or not active:
            break
        share = remaining // len(active)
        if share == 0:
            first = rotation % len(active)
            for key in (active[first:] + active[:first])[:remaining]:
                take[key] += 1
            remaining = 0
            break
        still = []
        for key in active:
            give = min(share, available[key] - take[key])
            take[key] += give
            remaining -= give
            if take[key] < available[key]:
                still.append(key)
        active = still
    return {k: n for k, n in take.items() if n > 0}


def next_end(start: Mapping[QueueKey, int], latest: Mapping[QueueKey, int], max_messages: int | None) -> Offsets:
    """The end offsets of the next batch: every queue of `start` and `latest`, moved towards
    `latest` by at most `max_messages` in all (None: no cap). Never behind `start`."""
    end: Offsets = dict(start)
    available: dict[QueueKey, int] = {}
    for key, top in latest.items():
        begin = start.get(key, NEW_QUEUE_START)
        end[key] = begin
        if top > begin:
            available[key] = top - begin
    if max_messages is None:
        grant = available
    else:
        # Rotating by what was read so far gives every queue its turn under a tiny budget.
        grant = split_budget(available, max_messages, rotation=sum(start.values()))
    for key, n in grant.items():
        end[key] += n
    return end


@dataclass(frozen=True, slots=True)
class QueueRange:
    """Offsets [start, end) of one queue; `new_queue`: the batch's start offsets did not name it."""

    topic: str
    queue_id: int
    start: int
    end: int
    new_queue: bool = False
    broker_name: str = HOME

    @property
    def count(self) -> int:
        return self.end - self.start

    @property
    def key(self) -> QueueKey:
        return (self.topic, self.broker_name, self.queue_id)


def plan_ranges(start: Mapping[QueueKey, int], end: Mapping[QueueKey, int]) -> list[QueueRange]:
    """One range per queue with work, in key order. An end behind its start is a bug: raises."""
    ranges = []
    for key in sorted(end):
        begin = start.get(key, NEW_QUEUE_START)
        stop = end[key]
        if stop < begin:
            raise StreamReadError(
                f"{FORMAT}: the batch ends queue {queue_label(key)} at {stop}, before its start {begin}"
            )
        if stop > begin:
            ranges.append(QueueRange(key[0], key[2], begin, stop, new_queue=key not in start, broker_name=key[1]))
    return ranges


def queue_lag(end: Mapping[QueueKey, int], latest: Mapping[QueueKey, int]) -> dict[QueueKey, int]:
    """Messages each queue holds beyond `end` (queues `end` does not name count from 0)."""
    return {key: max(0, top - end.get(key, NEW_QUEUE_START)) for key, top in sorted(latest.items())}


@dataclass(frozen=True, slots=True)
class LagReport:
    batch_id: int
    num_input_rows: int
    end: Offsets
    latest: Offsets
    lag: dict[QueueKey, int]

    @property
    def total(self) -> int:
        return sum(self.lag.values())


def _offsets_field(value: Any) -> Offsets | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    try:
        return decode_offsets(value)
    except StreamSourceError:
        return None


def lag_from_progress(progress: Mapping[str, Any], source_index: int = 0) -> LagReport | None:
    """The lag in one StreamingQueryProgress (as a dict: `query.lastProgress`), from the source's
    `endOffset` and `latestOffset`; None when the entry does not carry both."""
    sources = progress.get("sources") or []
    if len(sources) <= source_index:
        return None
    source = sources[source_index]
    end = _offsets_field(source.get("endOffset"))
    latest = _offsets_field(source.get("latestOffset"))
    if end is None or latest is None:
        return None
    return LagReport(
        batch_id=int(progress.get("batchId", -1)),
        num_input_rows=int(progress.get("numInputRows", 0) or 0),
        end=end,
        latest=latest,
        lag=queue_lag(end, latest),
    )


# -- routes ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupQueues:
    """One broker group's readable queues of a topic, and the endpoints that serve them in the
    order to try: the source's endpoint for the group it belongs to, then broker id 0 (the master,
    or a slave acting for it), then the other brokers by id."""

    broker_name: str
    queue_ids: tuple[int, ...]
    endpoints: tuple[str, ...]


def route_groups(route: Iterable[QueueInfo], endpoint: str, home: str | None) -> list[GroupQueues]:
    """The route's readable queues by group, groups by name; see GroupQueues for the endpoints."""
    by_group: dict[str, list[QueueInfo]] = {}
    for q in route:
        if q.readable and q.endpoint:
            by_group.setdefault(q.broker_name, []).append(q)
    groups = []
    for name in sorted(by_group):
        entries = by_group[name]
        ordered = [q.endpoint for q in sorted(entries, key=lambda q: q.broker_id)]
        if name == home:
            ordered.insert(0, endpoint)
        ids = tuple(sorted({q.queue_id for q in entries}))
        groups.append(GroupQueues(name, ids, tuple(dict.fromkeys(ordered))))
    return groups


# -- reading one range -------------------------------------------------------------------------


class Puller(Protocol):
    def pull(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_messages: int = ...,
        tag_filter: str | None = ...,
        long_polling_ms: int = ...,
    ) -> PullResult: ...


def read_queue_range(
    consumer: Puller,
    qrange: QueueRange,
    *,
    page_size: int = DEFAULT_PULL_BATCH,
    empty_pull_retries: int = DEFAULT_EMPTY_PULL_RETRIES,
    retry_wait_ms: int = DEFAULT_RETRY_WAIT_MS,
    fail_on_data_loss: bool = True,
) -> Iterator[list[ReceivedMessage]]:
    """The messages of queue offsets [start, end), one page per pull, each in offset order.

    A pull that comes back with fewer messages is followed by the next page; one that comes back
    empty is retried as a long poll of `retry_wait_ms`, at most `empty_pull_retries` times in a row,
    then StreamReadError. A range the broker no longer holds (OFFSET_ILLEGAL below its min offset,
    or entries whose CommitLog bytes are gone) raises DataLossError, or with `fail_on_data_loss`
    false is skipped with a warning; at the start of a queue new to the batch, it is skipped
    silently (those messages were deleted before the stream knew the queue). A message whose body
    fails its digest raises CorruptMessageError."""
    if not 1 <= page_size <= MAX_BATCH:
        raise ValueError(f"page_size is 1..{MAX_BATCH}, got {page_size}")
    topic, queue_id, end = qrange.topic, qrange.queue_id, qrange.end
    label = queue_label(qrange.key)
    cur = qrange.start
    emitted = False
    empties = 0

    def lose(first: int, stop: int, why: str) -> None:
        if qrange.new_queue and not emitted and first == qrange.start:
            log.info(
                "%s: queue %s starts at %d (earlier messages were deleted before the stream found it)",
                FORMAT,
                label,
                stop,
            )
            return
        if fail_on_data_loss:
            raise DataLossError(qrange.key, first, stop, why)
        log.warning("%s: skipping lost offsets [%d, %d) of queue %s (%s)", FORMAT, first, stop, label, why)

    # Each pull either moves `cur` forward or counts an empty try; progress resets the tries.
    max_pulls = (qrange.count + 1) * (empty_pull_retries + 1)
    for _ in range(max_pulls):
        if cur >= end:
            return
        result = consumer.pull(
            topic,
            queue_id,
            cur,
            max_messages=min(page_size, end - cur),
            long_polling_ms=retry_wait_ms if empties else 0,
        )
        status = result.status
        if status is PullStatus.FOUND:
            page: list[ReceivedMessage] = []
            expected = cur
            for m in result.messages:
                if m.queue_offset < expected:
                    raise StreamReadError(
                        f"{FORMAT}: queue {label}: the broker answered offset {m.queue_offset} "
                        f"after {expected - 1} (pulled from {cur})"
                    )
                if m.queue_offset >= end:
                    break
                if not m.body_crc_ok:
                    raise CorruptMessageError(
                        f"{FORMAT}: queue {label} offset {m.queue_offset} (msgId {m.msg_id}): "
                        "the body does not match its digest"
                    )
                if m.queue_offset > expected:
                    lose(expected, m.queue_offset, "the broker skipped these offsets: their CommitLog bytes are gone")
                page.append(m)
                expected = m.queue_offset + 1
            stop = min(max(result.next_offset, expected), end)
            if stop > expected:
                lose(expected, stop, "the broker skipped these offsets: their CommitLog bytes are gone")
            if stop <= cur:
                empties += 1
            else:
                empties = 0
                cur = stop
            if page:
                emitted = True
                yield page
        elif status is PullStatus.OFFSET_ILLEGAL:
            fixed = result.next_offset
            if fixed <= cur:
                raise StreamReadError(
                    f"{FORMAT}: queue {label} ends at {fixed} on this broker, but the batch reads "
                    f"[{cur}, {end}): the broker holds less than the checkpoint says "
                    "(a replaced store, or another broker?)"
                )
            stop = min(fixed, end)
            lose(cur, stop, f"below the queue's min offset {fixed}: deleted by retention?")
            cur = stop
            empties = 0
        elif status is PullStatus.NO_MATCHED_MSG and result.next_offset > cur:
            stop = min(result.next_offset, end)
            lose(cur, stop, "the broker skipped these offsets: their CommitLog bytes are gone")
            cur = stop
            empties = 0
        else:  # NO_NEW_MSG, or nothing at all: the broker has not got these offsets yet
            empties += 1
        if empties > empty_pull_retries:
            raise StreamReadError(
                f"{FORMAT}: queue {label}: the broker served nothing from offset {cur} in "
                f"{empties} pulls, though the batch reads up to {end} "
                "(is the endpoint another broker, or a slave behind?)"
            )
    if cur < end:
        raise StreamReadError(
            f"{FORMAT}: queue {label}: stopped at {cur} of [{qrange.start}, {end}) after {max_pulls} pulls"
        )


def message_row(m: ReceivedMessage, broker_name: str) -> tuple:
    """One row in `COLUMNS` order; `broker_name`: the group whose queue it was read from."""
    return (
        m.topic,
        m.queue_id,
        m.queue_offset,
        m.commit_log_offset if m.commit_log_offset >= 0 else None,
        m.msg_id,
        m.body,
        m.tag,
        " ".join(m.keys) if m.keys else None,
        list(m.properties.items()),
        m.born_timestamp_ms,
        m.store_timestamp_ms if m.store_timestamp_ms >= 0 else None,
        m.born_host,
        m.store_host,
        m.reconsume_times,
        broker_name,
    )


# -- options -----------------------------------------------------------------------------------

_OPTIONS = (
    "endpoint",
    "topics",
    "startingOffsets",
    "maxMessagesPerTrigger",
    "group",
    "failOnDataLoss",
    "pullBatchSize",
    "emptyPullRetries",
    "retryWaitMs",
    "requestTimeoutS",
    "tlsCaFile",
)


@overload
def _int_option(options: Mapping[str, Any], name: str, default: int, low: int, high: int | None = None) -> int: ...


@overload
def _int_option(
    options: Mapping[str, Any], name: str, default: None, low: int, high: int | None = None
) -> int | None: ...


def _int_option(
    options: Mapping[str, Any], name: str, default: int | None, low: int, high: int | None = None
) -> int | None:
    raw = options.get(name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise StreamSourceError(f"{FORMAT}: option {name}={raw!r} is not an integer") from None
    if value < low or (high is not None and value > high):
        bounds = f"{low}..{high}" if high is not None else f"at least {low}"
        raise StreamSourceError(f"{FORMAT}: option {name} must be {bounds}, got {value}")
    return value


def _bool_option(options: Mapping[str, Any], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise StreamSourceError(f"{FORMAT}: option {name}={raw!r} is not true or false")


@dataclass(frozen=True, slots=True)
class StreamOptions:
    endpoint: str
    topics: tuple[str, ...]
    starting: str | Offsets = EARLIEST
    max_messages_per_trigger: int | None = None
    group: str | None = None
    fail_on_data_loss: bool = True
    pull_batch_size: int = DEFAULT_PULL_BATCH
    empty_pull_retries: int = DEFAULT_EMPTY_PULL_RETRIES
    retry_wait_ms: int = DEFAULT_RETRY_WAIT_MS
    timeout_s: float = DEFAULT_TIMEOUT_S
    tls_ca_file: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> StreamOptions:
        """From the DataSource's options (Spark's are case-insensitive; so is this)."""
        lowered = {str(k).lower(): v for k, v in options.items()}
        known = {name.lower(): name for name in _OPTIONS}
        unknown = sorted(k for k in lowered if k not in known and k != "path")
        if unknown:
            raise StreamSourceError(
                f"{FORMAT}: unknown option(s) {', '.join(unknown)}; options are {', '.join(_OPTIONS)}"
            )
        opts = {known[k]: v for k, v in lowered.items() if k in known}
        endpoint = str(opts.get("endpoint") or "").strip()
        if not endpoint:
            raise StreamSourceError(f"{FORMAT}: option endpoint is required (the broker's HOST:PORT)")
        try:
            endpoint = parse_endpoint(endpoint).target
        except ValueError as exc:
            raise StreamSourceError(f"{FORMAT}: option endpoint: {exc}") from None
        topics = tuple(dict.fromkeys(t.strip() for t in str(opts.get("topics") or "").split(",") if t.strip()))
        if not topics:
            raise StreamSourceError(f"{FORMAT}: option topics is required (comma-separated topic names)")
        group = opts.get("group")
        group = str(group).strip() if group is not None and str(group).strip() else None
        timeout_raw = opts.get("requestTimeoutS")
        try:
            timeout_s = float(timeout_raw) if timeout_raw not in (None, "") else DEFAULT_TIMEOUT_S
        except ValueError:
            raise StreamSourceError(f"{FORMAT}: option requestTimeoutS={timeout_raw!r} is not a number") from None
        if not timeout_s > 0:
            raise StreamSourceError(f"{FORMAT}: option requestTimeoutS must be positive")
        return cls(
            endpoint=endpoint,
            topics=topics,
            starting=parse_starting_offsets(opts.get("startingOffsets")),
            max_messages_per_trigger=_int_option(opts, "maxMessagesPerTrigger", None, 1),
            group=group,
            fail_on_data_loss=_bool_option(opts, "failOnDataLoss", True),
            pull_batch_size=_int_option(opts, "pullBatchSize", DEFAULT_PULL_BATCH, 1, MAX_BATCH),
            empty_pull_retries=_int_option(opts, "emptyPullRetries", DEFAULT_EMPTY_PULL_RETRIES, 0, 1000),
            retry_wait_ms=_int_option(opts, "retryWaitMs", DEFAULT_RETRY_WAIT_MS, 0, 60_000),
            timeout_s=timeout_s,
            tls_ca_file=str(opts["tlsCaFile"]) if opts.get("tlsCaFile") else None,
        )


# -- Spark -------------------------------------------------------------------------------------

_ARROW_TYPES = {
    "bigint": pa.int64(),
    "int": pa.int32(),
    "string": pa.string(),
    "binary": pa.binary(),
    "map<string,string>": pa.map_(pa.string(), pa.string()),
}
ARROW_SCHEMA = pa.schema([pa.field(name, _ARROW_TYPES[kind]) for name, kind in COLUMNS])


def messages_to_batch(messages: Iterable[ReceivedMessage], broker_name: str) -> pa.RecordBatch:
    rows = [message_row(m, broker_name) for m in messages]
    columns = list(zip(*rows)) if rows else [()] * len(COLUMNS)
    return pa.RecordBatch.from_arrays(
        [pa.array(list(col), type=field.type) for col, field in zip(columns, ARROW_SCHEMA)], schema=ARROW_SCHEMA
    )


class QueuePartition(InputPartition):
    def __init__(self, qrange: QueueRange, endpoints: tuple[str, ...]) -> None:
        super().__init__((qrange.topic, qrange.broker_name, qrange.queue_id, qrange.start, qrange.end))
        self.qrange = qrange
        self.endpoints = endpoints


class RocketStoreStreamSource(DataSource):
    """`spark.readStream.format("rocketstore")`: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA_DDL

    def streamReader(self, schema) -> RocketStoreStreamReader:
        return RocketStoreStreamReader(StreamOptions.parse(self.options))


class RocketStoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plain values only until the first planning call: Spark builds a reader in each worker and
    pickles its `read`."""

    def __init__(self, options: StreamOptions) -> None:
        self.options = options
        self._consumers: dict[str, PullConsumer] = {}
        self._home: str | None = None
        self._group_endpoints: dict[str, tuple[str, ...]] = {}
        self._initial: Offsets | None = None
        self._target: Offsets | None = None
        self._latest_seen: Offsets | None = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_consumers"] = {}  # gRPC channels do not travel
        return state

    # -- broker access (planning side) --

    def _open_consumer(self, endpoint: str) -> PullConsumer:
        o = self.options
        return PullConsumer(endpoint, o.group or DEFAULT_GROUP, timeout_s=o.timeout_s, tls_ca_file=o.tls_ca_file)

    def _planner(self, endpoint: str | None = None) -> PullConsumer:
        endpoint = endpoint or self.options.endpoint
        consumer = self._consumers.get(endpoint)
        if consumer is None:
            consumer = self._consumers[endpoint] = self._open_consumer(endpoint)
        return consumer

    def _groups(self, topic: str) -> list[GroupQueues]:
        """The topic's groups in the route the endpoint gives (any broker of a cluster gives
        every group's queues); remembers each group's endpoints for `partitions`."""
        try:
            route = self._planner().route(topic)
        except BrokerError as exc:
            if exc.code_name == "TOPIC_NOT_FOUND":
                return []  # a topic no message reached yet (on a slave, or without auto-creation)
            raise
        if self._home is None:
            self._home = home_group(route, self.options.endpoint)
        groups = route_groups(route, self.options.endpoint, self._home)
        self._group_endpoints.update((g.broker_name, g.endpoints) for g in groups)
        return groups

    def queue_offsets(self, policy: str) -> Offsets:
        """Each readable queue's BEGINNING or END offset, for every topic, asked of the broker
        each group is read from. A group other than the endpoint's own that does not answer is
        left out with a warning (its queues wait, the others go on); the endpoint's own raises."""
        out: Offsets = {}
        for topic in self.options.topics:
            for group in self._groups(topic):
                try:
                    consumer = self._planner(group.endpoints[0])
                    out.update(
                        ((topic, group.broker_name, q), consumer.query_offset(topic, q, policy))
                        for q in group.queue_ids
                    )
                except RocketStoreError as exc:
                    if group.endpoints[0] == self.options.endpoint:
                        raise
                    log.warning(
                        "%s: broker group %s did not answer for %s at %s (%s); its queues wait",
                        FORMAT,
                        group.broker_name,
                        topic,
                        group.endpoints[0],
                        exc,
                    )
        return out

    def resolve(self, offsets: Offsets) -> Offsets:
        """`offsets` with queues named by id alone given to the endpoint's group (see resolve_home)."""
        if self._home is None and any(key[1] == HOME for key in offsets):
            for topic in self.options.topics:
                self._groups(topic)
                if self._home is not None:
                    break
        return resolve_home(offsets, self._home)

    def _endpoints_of(self, broker_name: str) -> tuple[str, ...]:
        if broker_name not in self._group_endpoints:
            for topic in self.options.topics:  # a replayed batch is planned before any route query
                self._groups(topic)
        endpoints = self._group_endpoints.get(broker_name)
        if not endpoints:
            raise StreamReadError(
                f"{FORMAT}: the batch reads queues of broker group {broker_name}, which no route of "
                f"{', '.join(self.options.topics)} names now"
            )
        return endpoints

    # -- DataSourceStreamReader --

    def initialOffset(self) -> dict:
        # Spark may ask twice; under `latest` two answers could differ, so the first one stands.
        if self._initial is None:
            starting = self.options.starting
            if starting == LATEST:
                initial = self.queue_offsets("END")
            else:
                initial = self.queue_offsets("BEGINNING")
                if isinstance(starting, dict):
                    initial.update(self.resolve(starting))
            self._initial = initial
        return encode_offsets(self._initial)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_messages_per_trigger
        return ReadMaxRows(n) if n is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.queue_offsets("END")

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = self.resolve(decode_offsets(start))
        latest = self.queue_offsets("END")
        for key, top in latest.items():
            if top < begin.get(key, NEW_QUEUE_START):
                if self.options.fail_on_data_loss:
                    raise DataLossError(
                        key,
                        top,
                        begin[key],
                        f"the broker's queue ends at {top}, behind the stream's {begin[key]}: "
                        "a replaced store, or another broker?",
                    )
                log.warning(
                    "%s: queue %s ends at %d, behind the stream's %d; waiting for it to pass",
                    FORMAT,
                    queue_label(key),
                    top,
                    begin[key],
                )
        self._latest_seen = {**begin, **latest}
        if self._target is not None:
            latest = {key: min(top, self._target[key]) for key, top in latest.items() if key in self._target}
        cap: int | None = None
        if isinstance(limit, ReadMaxRows):
            cap = limit.max_rows
        elif isinstance(limit, ReadMinRows):
            waiting = sum(max(0, top - begin.get(key, NEW_QUEUE_START)) for key, top in latest.items())
            if waiting < limit.min_rows and self._target is None:
                return encode_offsets(begin)
        return encode_offsets(next_end(begin, latest, cap))

    def reportLatestOffset(self) -> dict | None:
        return encode_offsets(self._latest_seen) if self._latest_seen is not None else None

    def partitions(self, start: dict, end: dict) -> list[QueuePartition]:
        ranges = plan_ranges(self.resolve(decode_offsets(start)), self.resolve(decode_offsets(end)))
        return [QueuePartition(r, self._endpoints_of(r.broker_name)) for r in ranges]

    # Spark hands back the partitions `partitions` made: the narrower type is the truth here.
    def read(self, partition: QueuePartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        """The partition's range from the first of its endpoints that serves it; a broker that
        fails part way hands the rest of the range to the next endpoint (a slave of the group)."""
        o = self.options
        qrange = partition.qrange
        failures = []
        for endpoint in partition.endpoints:
            consumer = self._open_consumer(endpoint)
            try:
                pages = read_queue_range(
                    consumer,
                    qrange,
                    page_size=o.pull_batch_size,
                    empty_pull_retries=o.empty_pull_retries,
                    retry_wait_ms=o.retry_wait_ms,
                    fail_on_data_loss=o.fail_on_data_loss,
                )
                for page in pages:
                    yield messages_to_batch(page, qrange.broker_name)
                    qrange = dataclasses.replace(qrange, start=page[-1].queue_offset + 1, new_queue=False)
                return
            except (RocketStoreError, StreamReadError) as exc:
                if isinstance(exc, (DataLossError, CorruptMessageError)):
                    raise
                failures.append(f"{endpoint}: {exc}")
                log.warning("%s: reading queue %s at %s failed: %s", FORMAT, queue_label(qrange.key), endpoint, exc)
            finally:
                consumer.close()
        raise StreamReadError(
            f"{FORMAT}: no broker of group {qrange.broker_name or '?'} served queue {queue_label(qrange.key)} "
            f"[{qrange.start}, {qrange.end}): " + "; ".join(failures)
        )

    def commit(self, end: dict) -> None:
        """Advisory group offsets, each written to the broker its group is read from."""
        group = self.options.group
        if group is None:
            return
        for key, offset in sorted(self.resolve(decode_offsets(end)).items()):
            topic, broker_name, queue_id = key
            try:
                self._planner(self._endpoints_of(broker_name)[0]).update_offset(topic, queue_id, offset)
            except (RocketStoreError, StreamReadError) as exc:
                # Advisory only (the checkpoint is the truth): a failed commit must not stop the query.
                log.warning("%s: could not commit %s=%d for group %s: %s", FORMAT, queue_label(key), offset, group, exc)

    def stop(self) -> None:
        consumers, self._consumers = self._consumers, {}
        for consumer in consumers.values():
            consumer.close()


def register(spark) -> None:
    """Make `spark.readStream.format("rocketstore")` available in this session."""
    spark.dataSource.register(RocketStoreStreamSource)
