"""The `rocketstore-commitlog` batch data source (PySpark Python Data Source API).

    pipeline.register(spark)
    df = spark.read.format("rocketstore-commitlog").load("/data/store")          # one store
    df = spark.read.format("rocketstore-commitlog").load(["/m/store", "/s/store"]) # several
    df = spark.read.format("rocketstore-commitlog").option("paths", "/a,/b").load()

    df = spark.read.format("rocketstore-commitlog").option("brokers", "broker-a=/a,broker-b=/b").load()

Options (all optional): `path` / `paths` (a JSON list or comma-separated), `brokers` (a cluster's
stores by group: `NAME=DIR,...` or a JSON object of name to directory; each row's `broker_name`
is its store's name, "" for stores given by path alone), `startOffset`,
`endOffset` (records whose physical offset lies in [start, end)), `topics` (comma-separated; error
rows are always kept), `partitionBytes` (bytes of a segment per input partition, default 64 MiB),
`verifyCrc` (default true; false leaves `body_crc_ok` null), `tornTail` (`end`, the default: a
torn tail ends the log as the store's recovery would; `report`: it becomes an error row),
`batchRows` (rows per Arrow batch, default 32768).

Column pruning: the source has no pushdown, but a user schema naming a subset of the columns
(`spark.read.format(...).schema("physical_offset bigint, topic string")`) makes the tasks build only
those columns; any other user schema is refused.

Partitions are `ScanRange`s (`pipeline.layout`); tasks walk records with `pipeline.walk` and decode
them with `pipeline.decode`, opening each segment read-only (mmap) inside `read()`: readers carry
plain values only, nothing open (Spark pickles them). Every row's `broker` is the store directory as
given.

Each task reads its range with `pipeline.scan.read_range`.

Thread-safety: each task's reader is used by one Spark task thread; nothing is shared.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from .decode import COLUMN_NAMES, COLUMNS, SCHEMA_DDL
from .layout import DEFAULT_PARTITION_BYTES, ScanRange, plan_ranges, read_layout
from .scan import TORN_END, TORN_REPORT, read_range

FORMAT = "rocketstore-commitlog"


class SourceOptionError(ValueError):
    """A bad option value."""


def parse_brokers(options: Mapping[str, str]) -> dict[str, str]:
    """The `brokers` option: store directory -> broker group name, from a JSON object
    {"broker-a": "/a/store", ...} or "broker-a=/a/store,broker-b=/b/store"."""
    raw = (options.get("brokers") or "").strip()
    if not raw:
        return {}
    if raw.startswith("{"):
        try:
            named = {str(k): str(v) for k, v in json.loads(raw).items()}
        except (ValueError, AttributeError):
            raise SourceOptionError(f"{FORMAT}: option brokers is not a JSON object of name -> directory") from None
    else:
        named = {}
        for item in (p.strip() for p in raw.split(",") if p.strip()):
            name, sep, directory = item.partition("=")
            if not sep or not name.strip() or not directory.strip():
                raise SourceOptionError(f"{FORMAT}: option brokers: expected NAME=DIR, got {item!r}")
            named[name.strip()] = directory.strip()
    return {directory: name for name, directory in named.items()}


def parse_paths(options: Mapping[str, str]) -> list[str]:
    paths: list[str] = []
    raw = options.get("paths")
    if raw:
        raw = raw.strip()
        if raw.startswith("["):
            paths = [str(p) for p in json.loads(raw)]
        else:
            paths = [p.strip() for p in raw.split(",") if p.strip()]
    if options.get("path"):
        paths.insert(0, options["path"])
    paths += list(parse_brokers(options))
    if not paths:
        raise SourceOptionError(f"{FORMAT}: give a store directory: .load(DIR), .load([DIR, ...]) or option paths")
    return list(dict.fromkeys(paths))


def _int_option(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    raw = options.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(str(raw), 0)
    except ValueError:
        raise SourceOptionError(f"{FORMAT}: option {name}={raw!r} is not an integer") from None
    if value < 0:
        raise SourceOptionError(f"{FORMAT}: option {name} cannot be negative: {value}")
    return value


def _bool_option(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise SourceOptionError(f"{FORMAT}: option {name}={raw!r} is not true or false")


class RangePartition(InputPartition):
    def __init__(self, scan_range: ScanRange) -> None:
        super().__init__(scan_range)
        self.scan_range = scan_range


class CommitLogSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> "CommitLogReader":
        return CommitLogReader(self.options, schema)


_SPARK_TYPES = {
    "bigint": LongType(),
    "int": IntegerType(),
    "string": StringType(),
    "binary": BinaryType(),
    "boolean": BooleanType(),
    "map<string,string>": MapType(StringType(), StringType()),
}


def full_schema() -> StructType:
    """The source's schema (built without a session: readers are made in Spark's workers)."""
    return StructType([StructField(name, _SPARK_TYPES[kind]) for name, kind in COLUMNS])


def requested_columns(schema: StructType) -> list[str]:
    """Column names of a user schema, checked against the source's columns and types."""
    known = {f.name: f.dataType for f in full_schema().fields}
    names = []
    for field in schema.fields:
        if field.name not in known:
            raise SourceOptionError(f"{FORMAT}: no column {field.name!r}; columns are {', '.join(COLUMN_NAMES)}")
        if field.dataType != known[field.name]:
            raise SourceOptionError(
                f"{FORMAT}: column {field.name} is {known[field.name].simpleString()}, not "
                f"{field.dataType.simpleString()}"
            )
        names.append(field.name)
    return names


class CommitLogReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.paths = parse_paths(options)
        self.broker_names = parse_brokers(options)
        self.columns = requested_columns(schema)
        self.start_offset = _int_option(options, "startOffset", 0) or 0
        self.end_offset = _int_option(options, "endOffset", None)
        self.partition_bytes = (
            _int_option(options, "partitionBytes", DEFAULT_PARTITION_BYTES) or DEFAULT_PARTITION_BYTES
        )
        self.batch_rows = _int_option(options, "batchRows", 32768) or 32768
        self.verify_crc = _bool_option(options, "verifyCrc", True)
        topics = options.get("topics")
        self.topics = sorted({t.strip() for t in topics.split(",") if t.strip()}) if topics else None
        self.torn_tail = str(options.get("tornTail", TORN_END)).lower()
        if self.torn_tail not in (TORN_END, TORN_REPORT):
            raise SourceOptionError(f"{FORMAT}: option tornTail must be {TORN_END} or {TORN_REPORT}")
        self.plan_id = uuid.uuid4().hex

    def partitions(self) -> list[RangePartition]:
        layouts = [read_layout(p, self.broker_names.get(p, "")) for p in self.paths]
        ranges = plan_ranges(
            layouts,
            start_offset=self.start_offset,
            end_offset=self.end_offset,
            partition_bytes=self.partition_bytes,
            plan_id=self.plan_id,
        )
        return [RangePartition(r) for r in ranges]

    # Spark hands back the partitions `partitions` made: the narrower type is the truth here.
    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        yield from read_range(
            partition.scan_range,
            columns=self.columns,
            verify_crc=self.verify_crc,
            topics=self.topics,
            torn_tail=self.torn_tail,
            batch_rows=self.batch_rows,
        )
