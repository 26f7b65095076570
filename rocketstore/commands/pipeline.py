"""`rocketstore pipeline scan|audit|rebuild|export`: the Spark pipeline from the command line.

    rocketstore pipeline [--master SPARK_MASTER] [--conf KEY=VALUE ...] scan --store-dir DIR [--store-dir DIR ...]
    rocketstore pipeline [--master SPARK_MASTER] audit   --master DIR --slave DIR [--slave DIR] [--up-to OFFSET]
    rocketstore pipeline rebuild --store-dir DIR --out-dir DIR
    rocketstore pipeline [--master SPARK_MASTER] export  --store-dir DIR --out-dir DIR [--topics A,B]

`--master` before the job names the Spark master (default local[*], bound to 127.0.0.1) and
`--conf KEY=VALUE` adds a Spark setting (executor memory, ...); the audit's own `--master` after
the job names the master broker's store directory. The project's
CLI conventions (rocketstore/commands/common.py): results on stdout (`--json` for JSON), progress on stderr,
exit 0 when all is well, 1 when problems were found (corrupt records, a divergence, a gap, a rebuild stopped by a bad
record) or the job failed, 2 for usage errors; expected failures print one line. Runs on the
command's main thread; Spark runs the work in its own threads and processes.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from .args import at_least_one, existing_dir_text, key_value, names, natural
from .args import offset as offset_arg
from .common import EXIT_OK, EXIT_PROBLEMS, CommandError, print_progress


def _spark_setting(text: str) -> tuple[str, str]:
    key, value = key_value(text)
    return key.strip(), value


def _stores_and_range(job: argparse.ArgumentParser) -> None:
    """What scan and export read: store directories, a CommitLog range, topics."""
    job.add_argument(
        "--store-dir",
        dest="store_dirs",
        action="append",
        required=True,
        type=existing_dir_text,
        metavar="DIR",
        help="a store's root directory (repeat for several)",
    )
    job.add_argument(
        "--start-offset", type=offset_arg, metavar="OFFSET", help="first CommitLog offset (default: the start)"
    )
    job.add_argument(
        "--end-offset", type=offset_arg, metavar="OFFSET", help="CommitLog offset to stop before (default: the end)"
    )
    job.add_argument("--topics", type=names, metavar="A,B", help="only these topics")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--master",
        "--spark-master",
        dest="spark_master",
        default="local[*]",
        metavar="SPARK_MASTER",
        help="Spark master URL (default local[*])",
    )
    parser.add_argument(
        "--conf",
        dest="spark_conf",
        action="append",
        default=[],
        type=_spark_setting,
        metavar="KEY=VALUE",
        help="a Spark setting, as spark-submit's --conf (repeat for several)",
    )
    jobs = parser.add_subparsers(dest="pipeline_command", metavar="JOB", required=True)

    scan = jobs.add_parser("scan", help="read CommitLogs: messages per broker and topic, corrupt records")
    _stores_and_range(scan)
    scan.add_argument("--show", type=natural, default=0, metavar="N", help="also list the first N messages")
    scan.add_argument(
        "--partition-bytes", type=at_least_one, metavar="BYTES", help="CommitLog bytes per Spark partition"
    )
    scan.add_argument("--json", action="store_true", help="print the result as JSON")

    audit = jobs.add_parser("audit", help="are the slaves' CommitLogs byte-identical to the master's?")
    audit.add_argument(
        "--master",
        dest="master_dir",
        required=True,
        type=existing_dir_text,
        metavar="DIR",
        help="the master broker's store directory",
    )
    audit.add_argument(
        "--slave",
        dest="slave_dirs",
        action="append",
        required=True,
        type=existing_dir_text,
        metavar="DIR",
        help="a slave's store directory (repeat for several)",
    )
    audit.add_argument(
        "--up-to", type=offset_arg, metavar="OFFSET", help="acknowledged/confirmed offset both must hold"
    )
    audit.add_argument("--context", type=natural, default=3, metavar="N", help="records shown around a divergence")
    audit.add_argument("--json", action="store_true", help="print the result as JSON")

    rebuild = jobs.add_parser("rebuild", help="write ConsumeQueues and IndexFiles from a CommitLog")
    rebuild.add_argument(
        "--store-dir", required=True, type=existing_dir_text, metavar="DIR", help="the store's root directory"
    )
    rebuild.add_argument("--out-dir", required=True, metavar="DIR", help="where consumequeue/ and index/ go")
    rebuild.add_argument(
        "--consume-queue-file-size",
        type=at_least_one,
        metavar="BYTES",
        help="mappedFileSizeConsumeQueue (default 6000000)",
    )
    rebuild.add_argument("--hash-slot-num", type=at_least_one, metavar="N", help="maxHashSlotNum (default 5000000)")
    rebuild.add_argument("--index-num", type=at_least_one, metavar="N", help="maxIndexNum (default 20000000)")
    rebuild.add_argument("--message-delay-level", metavar="LEVELS", help="messageDelayLevel (RocketMQ's default)")
    rebuild.add_argument("--no-index", action="store_true", help="ConsumeQueues only")
    rebuild.add_argument("--json", action="store_true", help="print the result as JSON")

    export = jobs.add_parser("export", help="topics to Parquet, partitioned by topic and date")
    _stores_and_range(export)
    export.add_argument("--out-dir", required=True, metavar="DIR", help="where the Parquet files go")
    export.add_argument(
        "--mode",
        choices=("errorifexists", "append", "overwrite"),
        default="errorifexists",
        help="what to do when the output exists (Spark's save modes; default errorifexists)",
    )
    export.add_argument("--json", action="store_true", help="print the result as JSON")

    from .pipeline_stream import add_stream_arguments

    stream = jobs.add_parser(
        "stream", help="topics of a running broker into Parquet (Structured Streaming, exactly once)"
    )
    add_stream_arguments(stream)


def _layouts(dirs: list[str]):
    from pipeline.layout import LayoutError, read_layout

    try:
        return [read_layout(d) for d in dirs]
    except LayoutError as exc:
        raise CommandError(str(exc)) from None


def _session(args):
    from pipeline.spark import session

    print_progress(f"pipeline {args.pipeline_command}: starting Spark ({args.spark_master})")
    return session(args.spark_master, progress_bar=sys.stderr.isatty(), conf=dict(args.spark_conf))


# What the pipeline imports that a plain `pip install rocketstore` does not bring.
SPARK_MODULES = ("pyspark", "pyarrow", "numpy")


def missing_extra() -> str | None:
    """The Spark extra's modules that are not installed, with how to install them; None when all are."""
    import importlib.util

    missing = [name for name in SPARK_MODULES if importlib.util.find_spec(name) is None]
    if not missing:
        return None
    return (
        f"the Spark pipeline needs {', '.join(missing)}, which are not installed: "
        "pip install 'rocketstore[spark]' (the same as rocketstore[pipeline]); in a checkout, make setup"
    )


def run(args: argparse.Namespace) -> int:
    from pipeline.java_check import java_problem

    problem = missing_extra() or java_problem()
    if problem is not None:
        raise CommandError(problem)
    job = {
        "scan": run_scan,
        "audit": run_audit,
        "rebuild": run_rebuild,
        "export": run_export,
        "stream": run_stream,
    }[args.pipeline_command]
    return job(args)


def run_stream(args: argparse.Namespace) -> int:
    from .pipeline_stream import run_stream as run

    return run(args)


def run_scan(args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    layouts = _layouts(args.store_dirs)
    for layout in layouts:
        for problem in layout.problems:
            print_progress(f"pipeline scan: {problem}")
    spark = _session(args)
    reader = spark.read.format("rocketstore-commitlog").option("paths", json.dumps(args.store_dirs))
    for name, value in (
        ("startOffset", args.start_offset),
        ("endOffset", args.end_offset),
        ("partitionBytes", args.partition_bytes),
    ):
        if value is not None:
            reader = reader.option(name, str(value))
    if args.topics:
        reader = reader.option("topics", ",".join(args.topics))
    total = sum(layout.total_bytes for layout in layouts)
    print_progress(f"pipeline scan: {len(layouts)} store(s), {total >> 20} MiB of segments")
    df = reader.load().cache()
    try:
        topics = (
            df.where("error is null")
            .groupBy("broker", "topic")
            .agg(
                F.count("*").alias("messages"),
                F.sum("size").alias("bytes"),
                F.min("physical_offset").alias("first_offset"),
                F.max("physical_offset").alias("last_offset"),
            )
            .orderBy("broker", "topic")
            .collect()
        )
        errors = (
            df.where("error is not null")
            .orderBy("broker", "physical_offset")
            .select("broker", "physical_offset", "error")
            .collect()
        )
        shown = []
        if args.show:
            shown = (
                df.where("error is null")
                .orderBy("broker", "physical_offset")
                .limit(args.show)
                .select(
                    "broker",
                    "physical_offset",
                    "topic",
                    "queue_id",
                    "queue_offset",
                    "msg_id",
                    "tags",
                    "keys",
                    "store_timestamp",
                )
                .collect()
            )
    finally:
        df.unpersist()
    summary = {
        "stores": [
            {
                "store_dir": layout.store_dir,
                "segment_size": layout.segment_size,
                "segments": len(layout.segments),
                "min_offset": layout.min_offset,
                "flushed_offset": layout.flushed_offset,
                "problems": list(layout.problems),
            }
            for layout in layouts
        ],
        "topics": [r.asDict() for r in topics],
        "messages": sum(r["messages"] for r in topics),
        "errors": [r.asDict() for r in errors],
        "first_messages": [r.asDict() for r in shown],
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"Scanned {len(layouts)} store(s): {summary['messages']} messages, {len(errors)} error row(s)")
        for r in topics:
            print(
                f"  {r['broker']}  {r['topic']}: {r['messages']} messages, {r['bytes']} bytes, "
                f"offsets {r['first_offset']}..{r['last_offset']}"
            )
        for r in errors:
            print(f"  ERROR {r['broker']} @ {r['physical_offset']}: {r['error']}")
        for r in shown:
            print(
                f"  {r['broker']} @ {r['physical_offset']} {r['topic']}-{r['queue_id']} qoff={r['queue_offset']} "
                f"msgId={r['msg_id']} tags={r['tags']} keys={r['keys']}"
            )
        print("RESULT: OK" if not errors else "RESULT: PROBLEMS FOUND")
    return EXIT_PROBLEMS if errors else EXIT_OK


def run_audit(args: argparse.Namespace) -> int:
    from pipeline.audit import audit_replicas, format_audit

    _layouts([args.master_dir, *args.slave_dirs])
    spark = _session(args)
    report = audit_replicas(
        spark, args.master_dir, args.slave_dirs, args.up_to, context=args.context, on_progress=print_progress
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(format_audit(report))
    return EXIT_OK if report.ok else EXIT_PROBLEMS


def run_rebuild(args: argparse.Namespace) -> int:
    from pipeline.rebuild import RebuildError, format_rebuild, rebuild_store

    _layouts([args.store_dir])
    options = {}
    for name, value in (
        ("consume_queue_file_size", args.consume_queue_file_size),
        ("hash_slot_num", args.hash_slot_num),
        ("index_num", args.index_num),
        ("message_delay_level", args.message_delay_level),
    ):
        if value is not None:
            options[name] = value

    def dispatched(done: int, total: int) -> None:
        print_progress(f"pipeline rebuild: dispatched {done >> 20} of {total >> 20} MiB")

    try:
        report = rebuild_store(args.store_dir, args.out_dir, index=not args.no_index, on_progress=dispatched, **options)
    except (RebuildError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    if args.json:
        print(json.dumps({**asdict(report), "ok": report.ok}, indent=2))
    else:
        print(format_rebuild(report))
    return EXIT_OK if report.ok else EXIT_PROBLEMS


def run_export(args: argparse.Namespace) -> int:
    from pipeline.export import export_topics

    _layouts(args.store_dirs)
    out = Path(args.out_dir)
    if args.mode == "errorifexists" and out.exists():
        raise CommandError(f"{out} exists; choose --mode append or overwrite, or another --out-dir")
    spark = _session(args)
    report = export_topics(
        spark,
        args.store_dirs,
        args.out_dir,
        topics=args.topics,
        start_offset=args.start_offset,
        end_offset=args.end_offset,
        mode=args.mode,
    )
    if args.json:
        print(json.dumps(asdict(report), indent=2))
    else:
        print(
            f"Exported {report.rows} messages to {report.out_dir} in {len(report.partitions)} topic/date partition(s)"
            + (f"; {report.error_rows} corrupt record(s) not exported" if report.error_rows else "")
        )
        for topic, date, rows in report.partitions:
            print(f"  topic={topic}/date={date}: {rows}")
    return EXIT_PROBLEMS if report.error_rows else EXIT_OK
