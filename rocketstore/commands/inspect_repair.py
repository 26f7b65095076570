"""`rocketstore inspect` and `rocketstore repair`: the operator's tools over a store on disk
(the broker stopped, or not: inspect only reads), on top of `ops.inspect` and `ops.repair`, which
hold the logic. Repair only says what it would cut unless told `--yes` with the offset to cut at;
it never cuts at an offset it chose itself.

Progress lines go to stderr for stores of at least LARGE_STORE_BYTES, or whenever stderr is a
terminal. Runs on the command's main thread.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from .args import count, existing_dir, offset, positive
from .common import EXIT_OK, EXIT_PROBLEMS, CommandError

# Progress lines for stores at least this big, or whenever stderr is a terminal.
LARGE_STORE_BYTES = 256 * 1024 * 1024


# -- progress ----------------------------------------------------------------------------------


def _progress_printer(label: str) -> Callable[[int, int], None]:
    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if tty or total >= LARGE_STORE_BYTES:
            print(f"{label}: scanned {done >> 20} of {total >> 20} MiB", file=sys.stderr, flush=True)

    return progress


# -- inspect -----------------------------------------------------------------------------------


def inspect_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store-dir", required=True, type=existing_dir, metavar="DIR", help="the store's root directory")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--show-messages", type=count, default=0, metavar="N", help="also list the first N messages")
    p.add_argument("--segment-size", type=positive, metavar="BYTES", help="segment size (default: the files' size)")


def run_inspect(args: argparse.Namespace) -> int:
    from ops.inspect import InspectError, format_report, inspect_store

    try:
        report = inspect_store(
            args.store_dir,
            segment_size=args.segment_size,
            show_messages=args.show_messages,
            on_progress=_progress_printer("inspect"),
        )
    except InspectError as exc:
        raise CommandError(str(exc)) from None
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, sort_keys=False))
    else:
        print(format_report(report))
    return EXIT_PROBLEMS if report.problems_found else EXIT_OK


# -- repair ------------------------------------------------------------------------------------


def repair_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store-dir", required=True, type=existing_dir, metavar="DIR", help="the store's root directory")
    p.add_argument("--truncate-at", type=offset, metavar="OFFSET", help="cut the CommitLog at this record boundary")
    p.add_argument(
        "--extend-short-segment",
        action="store_true",
        help="zero-fill a last segment file shorter than the segment size back to size",
    )
    p.add_argument("--yes", action="store_true", help="really do it (with --truncate-at or --extend-short-segment)")


def _extend_short_segment(args: argparse.Namespace) -> int:
    from ops.inspect import InspectError, inspect_store
    from ops.repair import RepairError, extend_short_segment

    store_dir = args.store_dir
    if args.truncate_at is not None:
        args.parser.error("--extend-short-segment and --truncate-at are separate repairs: one at a time")
    try:
        if not args.yes:
            report = inspect_store(store_dir)
            if not report.short_segment:
                print(f"No short segment in {store_dir}: nothing to extend.")
                return EXIT_OK
            print(f"Dry run; nothing changed. Would zero-fill {report.short_segment} to {report.segment_size} bytes.")
            print(f"To do it: rocketstore repair --store-dir {store_dir} --extend-short-segment --yes")
            return EXIT_PROBLEMS
        result = extend_short_segment(store_dir)
    except (InspectError, RepairError) as exc:
        raise CommandError(str(exc)) from None
    after = result.report_after
    print(f"Extended {result.segment} from {result.size_before} to {result.size_after} bytes (zero-filled, fsynced).")
    print(f"The CommitLog of {store_dir} now ends at {after.end_offset} ({after.messages} messages).")
    if after.problems_found:
        print("But an inspection still finds problems; run `rocketstore inspect`.")
        return EXIT_PROBLEMS
    return EXIT_OK


def run_repair(args: argparse.Namespace) -> int:
    from ops.inspect import InspectError, inspect_store
    from ops.repair import RepairError, format_plan, plan_repair, repair

    store_dir = args.store_dir
    if args.extend_short_segment:
        return _extend_short_segment(args)
    if args.yes and args.truncate_at is None:
        args.parser.error("--yes needs --truncate-at OFFSET (repair never cuts at an offset it chose itself)")
    try:
        if args.yes:
            result = repair(store_dir, args.truncate_at, on_progress=_progress_printer("repair"))
            plan, after = result.plan, result.report_after
            print(format_plan(plan))
            print(
                f"Done: the CommitLog of {store_dir} now ends at {after.end_offset} "
                f"({after.messages} messages); the store starts again."
            )
            if after.problems_found:
                print("But an inspection still finds problems; run `rocketstore inspect`.")
                return EXIT_PROBLEMS
            return EXIT_OK
        report = inspect_store(store_dir, on_progress=_progress_printer("repair"))
        planned = plan_repair(report, args.truncate_at)
    except (InspectError, RepairError) as exc:
        raise CommandError(str(exc)) from None
    if report.short_segment:
        print(
            f"The last segment {report.short_segment} is shorter than the segment size: the store does not load it. "
            f"To zero-fill it back to size: rocketstore repair --store-dir {store_dir} --extend-short-segment --yes"
        )
        if planned is not None:
            # The file was cut inside its data: extending it leaves a record in part, cut next.
            print("Dry run; nothing changed. " + format_plan(planned).replace("Zero-fill", "Would zero-fill", 1))
            print(f"Then: rocketstore repair --store-dir {store_dir} --truncate-at {planned.offset} --yes")
        return EXIT_PROBLEMS
    if planned is None:
        print(
            f"Nothing to repair: the CommitLog of {store_dir} is valid from {report.min_offset} to {report.end_offset}."
        )
        return EXIT_OK
    first = report.bad_offsets[0] if report.bad_offsets else None
    if first is not None:
        print(f"First bad offset: {first.offset} in segment {first.segment}: {first.kind}, {first.reason}")
    if args.truncate_at is None and not report.problems_found:
        if first is not None and first.kind == "in-flight":
            print(f"pid {report.lock_holder_pid} holds the store and is writing there; nothing to repair.")
        else:
            print(
                f"This is a torn tail above the flushed offset: the store cuts it by itself when it starts; "
                f"no repair needed. To cut it now anyway: rocketstore repair --store-dir {store_dir} "
                f"--truncate-at {planned.offset} --yes"
            )
        return EXIT_OK
    print("Dry run; nothing changed. " + format_plan(planned).replace("Cut the", "Would cut the", 1))
    print(f"To do it: rocketstore repair --store-dir {store_dir} --truncate-at {planned.offset} --yes")
    # A dry run over real damage is a finding (1); one for a chosen offset over a sound store is not.
    return EXIT_PROBLEMS if report.problems_found else EXIT_OK
