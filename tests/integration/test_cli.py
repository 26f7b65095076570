"""The `rocketstore` command line, run as a real process: inspect, repair, demo, usage errors.

Stores are built with `MessageStore` in temporary directories, damaged by hand where a test needs
it, and examined through the command (exit status, stdout, stderr) and by loading them again.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from store import Message, MessageStore, PutMessageStatus, StoreConfig, StoreCorruptedError

SEGMENT_SIZE = 64 * 1024
TOPICS = {"Orders": 3, "Audit": 2}  # topic -> queues
MESSAGES = 360  # two segments: recovery after a clean shutdown checks CRCs in the last three


def rocketstore_command() -> list[str]:
    script = Path(sys.executable).with_name("rocketstore")
    return [str(script)] if script.exists() else [sys.executable, "-m", "rocketstore.cli"]


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    result = subprocess.run(
        rocketstore_command() + [str(a) for a in args], capture_output=True, text=True, timeout=timeout
    )
    # Shown by pytest when the test fails.
    print(
        f"$ rocketstore {' '.join(map(str, args))}\n[exit "
        f"{result.returncode}]\n{result.stdout}\n[stderr]\n{result.stderr}"
    )
    assert "Traceback" not in result.stderr
    return result


def config(root: Path) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=SEGMENT_SIZE,
        mapped_file_size_consume_queue=1024 * 20,
        max_hash_slot_num=512,
        max_index_num=2048,
    )


def body(i: int) -> bytes:
    return f"message {i:05d} ".encode() * (4 + i % 7)


@dataclass(frozen=True)
class Put:
    i: int
    topic: str
    queue_id: int
    queue_offset: int
    offset: int
    size: int


@pytest.fixture
def good_store(tmp_path) -> tuple[Path, list[Put]]:
    root = tmp_path / "store"
    puts = []
    routes = [(t, q) for t, n in TOPICS.items() for q in range(n)]
    with MessageStore(config(root)) as store:
        for i in range(MESSAGES):
            topic, queue_id = routes[i % len(routes)]
            r = store.put_message(Message(topic, queue_id, body(i), properties={"KEYS": f"k{i}"}))
            assert r.status is PutMessageStatus.PUT_OK
            puts.append(Put(i, topic, queue_id, r.queue_offset, r.wrote_offset, r.wrote_bytes))
    return root, puts


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name != "lock":
            h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()


def flip_body_byte(root: Path, put: Put) -> None:
    """Flip one byte inside the body of the message `put` wrote (IPv4 hosts: body at +88)."""
    name = root / "commitlog" / f"{put.offset - put.offset % SEGMENT_SIZE:020d}"
    position = put.offset % SEGMENT_SIZE + 88 + 3
    with open(name, "r+b") as f:
        f.seek(position)
        old = f.read(1)
        f.seek(position)
        f.write(bytes([old[0] ^ 0x5A]))


# -- inspect -----------------------------------------------------------------------------------


def test_inspect_good_store_text(good_store):
    root, puts = good_store
    result = run_cli("inspect", "--store-dir", root)
    assert result.returncode == 0
    out = result.stdout
    assert "RESULT: OK" in out
    assert f"offsets [0, {puts[-1].offset + puts[-1].size}) valid" in out
    assert f"messages      {MESSAGES} " in out
    for topic, queues in TOPICS.items():
        for q in range(queues):
            n = sum(1 for p in puts if (p.topic, p.queue_id) == (topic, q))
            row = next(line.split() for line in out.splitlines() if line.split()[:2] == [topic, str(q)])
            assert row[2:4] == [str(n), str(sum(p.size for p in puts if (p.topic, p.queue_id) == (topic, q)))]
            assert row[4:7] == ["0", str(n - 1), "yes"]
    assert "abort file    absent" in out and "lock          free" in out


def test_inspect_good_store_json(good_store):
    root, puts = good_store
    result = run_cli("inspect", "--store-dir", root, "--json", "--show-messages", "3")
    assert result.returncode == 0
    report = json.loads(result.stdout)
    end = puts[-1].offset + puts[-1].size
    assert (report["min_offset"], report["end_offset"], report["data_end"]) == (0, end, end)
    assert report["messages"] == MESSAGES
    assert report["message_bytes"] == sum(p.size for p in puts)
    assert report["bad_offsets"] == [] and report["problems_found"] is False
    assert report["checkpoint"]["trusted"] and report["checkpoint"]["physic_flushed_offset"] == end
    assert report["flushed_offset"] == end
    assert report["abort_present"] is False
    assert report["segment_size"] == SEGMENT_SIZE
    queues = {(q["topic"], q["queue_id"]): q for q in report["queues"]}
    assert set(queues) == {(t, q) for t, n in TOPICS.items() for q in range(n)}
    for (topic, queue_id), q in queues.items():
        mine = [p for p in puts if (p.topic, p.queue_id) == (topic, queue_id)]
        assert q["messages"] == len(mine)
        assert q["bytes"] == sum(p.size for p in mine)
        assert q["body_bytes"] == sum(len(body(p.i)) for p in mine)
        assert (q["min_queue_offset"], q["max_queue_offset"], q["dense"]) == (0, len(mine) - 1, True)
    topics = {t["topic"]: t for t in report["topics"]}
    assert {t: topics[t]["messages"] for t in topics} == {t: sum(1 for p in puts if p.topic == t) for t in TOPICS}
    shown = report["first_messages"]
    assert [m["offset"] for m in shown] == [p.offset for p in puts[:3]]
    assert shown[1]["properties"] == {"KEYS": "k1"} and shown[1]["body_length"] == len(body(1))


def test_inspect_reports_progress(good_store, monkeypatch):
    import ops.inspect

    root, puts = good_store
    monkeypatch.setattr(ops.inspect, "PROGRESS_EVERY_BYTES", 8192)
    calls = []
    ops.inspect.inspect_store(root, on_progress=lambda done, total: calls.append((done, total)))
    assert len(calls) >= SEGMENT_SIZE // 8192  # at least every 8 KiB of the full first segment
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert calls[-1] == (2 * SEGMENT_SIZE, 2 * SEGMENT_SIZE)


def test_inspect_corrupt_body_below_flushed_offset(good_store):
    root, puts = good_store
    victim = puts[100]
    assert victim.offset < SEGMENT_SIZE < puts[-1].offset
    flip_body_byte(root, victim)
    before = digest(root)

    result = run_cli("inspect", "--store-dir", root)
    assert result.returncode == 1
    assert f"corrupt at offset {victim.offset} (body CRC mismatch)" in result.stdout
    report = json.loads(run_cli("inspect", "--store-dir", root, "--json").stdout)
    (bad,) = report["bad_offsets"]
    assert (bad["offset"], bad["kind"], bad["below_flushed"]) == (victim.offset, "corrupt", True)
    assert report["end_offset"] == victim.offset
    assert report["messages"] == 100
    # After the bad record the walk goes on with the next valid one.
    assert report["messages_beyond_end"] == MESSAGES - 101
    assert digest(root) == before, "inspect changed the store"

    with pytest.raises(StoreCorruptedError) as caught:
        MessageStore(config(root)).load()
    assert caught.value.offset == victim.offset
    assert str(victim.offset) in str(caught.value)


def test_inspect_finds_damage_after_damage(good_store):
    """Garbage to the end of the first segment: the walk resumes at the next segment start; a
    second bad record there is reported too, and the messages between them are counted."""
    root, puts = good_store
    first = puts[50]
    with open(root / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(first.offset)
        f.write(bytes(range(7, 250)) * ((SEGMENT_SIZE - first.offset) // 243 + 1))
        f.truncate(SEGMENT_SIZE)
    in_second = [p for p in puts if p.offset >= SEGMENT_SIZE]
    second = in_second[10]
    flip_body_byte(root, second)
    report = json.loads(run_cli("inspect", "--store-dir", root, "--json").stdout)
    assert [(b["offset"], b["kind"]) for b in report["bad_offsets"]] == [
        (first.offset, "corrupt"),
        (second.offset, "corrupt"),
    ]
    assert report["messages"] == 50
    assert report["messages_beyond_end"] == len(in_second) - 1
    assert [s["state"] for s in report["segments"]] == ["damaged", "damaged"]


def test_inspect_reports_a_torn_tail_and_the_store_cuts_it(good_store):
    root, puts = good_store
    last = puts[-1]
    end = last.offset + last.size
    # What a writer killed mid-copy leaves: every byte of a record but its TOTALSIZE.
    segment = root / "commitlog" / f"{end - end % SEGMENT_SIZE:020d}"
    record = (segment.read_bytes())[last.offset % SEGMENT_SIZE : end % SEGMENT_SIZE]
    with open(segment, "r+b") as f:
        f.seek(end % SEGMENT_SIZE + 4)
        f.write(record[4:])
    (root / "abort").touch()

    result = run_cli("inspect", "--store-dir", root, "--json")
    assert result.returncode == 0
    report = json.loads(result.stdout)
    (bad,) = report["bad_offsets"]
    assert (bad["offset"], bad["kind"], bad["below_flushed"]) == (end, "torn-tail", False)
    assert report["data_end"] == end + last.size and report["abort_present"] is True
    text = run_cli("inspect", "--store-dir", root).stdout
    assert f"torn tail at offset {end} ({last.size} bytes)" in text
    dry = run_cli("repair", "--store-dir", root)
    assert dry.returncode == 0 and "no repair needed" in dry.stdout

    with MessageStore(config(root)) as store:
        assert store.recovery.abnormal and store.recovery.truncated_from == end
        assert store.max_offset == end
    assert run_cli("inspect", "--store-dir", root).returncode == 0


# -- repair ------------------------------------------------------------------------------------


def test_repair_dry_run_names_the_offset_and_changes_nothing(good_store):
    root, puts = good_store
    victim = puts[200]
    flip_body_byte(root, victim)
    before = digest(root)
    result = run_cli("repair", "--store-dir", root)
    assert result.returncode == 1
    assert f"First bad offset: {victim.offset}" in result.stdout
    assert f"holding {MESSAGES - 201} valid message(s)" in result.stdout
    assert f"--truncate-at {victim.offset} --yes" in result.stdout
    # Naming the offset without --yes is still a dry run.
    result = run_cli("repair", "--store-dir", root, "--truncate-at", victim.offset)
    assert "Dry run; nothing changed" in result.stdout
    assert digest(root) == before


def test_repair_truncates_and_the_store_loads_again(good_store):
    root, puts = good_store
    victim = puts[200]
    flip_body_byte(root, victim)
    result = run_cli("repair", "--store-dir", root, "--truncate-at", victim.offset, "--yes")
    assert result.returncode == 0, result.stderr
    assert f"now ends at {victim.offset} (200 messages)" in result.stdout

    with MessageStore(config(root)) as store:
        assert store.max_offset == victim.offset
        for p in puts[:200]:
            msg = store.read_message(p.offset)
            assert (msg.body, msg.topic, msg.queue_id, msg.queue_offset) == (
                body(p.i),
                p.topic,
                p.queue_id,
                p.queue_offset,
            )
        assert sum(1 for _ in store.iter_messages()) == 200
        # Queue offsets go on from what was kept.
        r = store.put_message(Message(victim.topic, victim.queue_id, b"after repair"))
        assert r.status is PutMessageStatus.PUT_OK and (r.wrote_offset, r.queue_offset) == (
            victim.offset,
            victim.queue_offset,
        )
    result = run_cli("inspect", "--store-dir", root)
    assert result.returncode == 0 and "RESULT: OK" in result.stdout


def test_repair_refuses_an_offset_that_is_not_a_boundary(good_store):
    root, puts = good_store
    victim = puts[200]
    flip_body_byte(root, victim)
    before = digest(root)
    inside = run_cli("repair", "--store-dir", root, "--truncate-at", puts[100].offset + 5, "--yes")
    assert inside.returncode == 1
    assert f"not a record boundary; the nearest ones are {puts[100].offset} and {puts[101].offset}" in inside.stderr
    beyond = run_cli("repair", "--store-dir", root, "--truncate-at", puts[300].offset, "--yes")
    assert beyond.returncode == 1 and f"past the first bad offset {victim.offset}" in beyond.stderr
    assert digest(root) == before


def test_repair_dry_run_over_a_last_segment_cut_inside_its_data_names_both_steps(good_store):
    """Issue 30: the dry run crashed (`mmap length is greater than file size`) when the last
    segment file was cut inside its data. It says what repair would do; both steps then work."""
    root, puts = good_store
    last = puts[-1]
    segment = root / "commitlog" / f"{last.offset - last.offset % SEGMENT_SIZE:020d}"
    os.truncate(segment, last.offset % SEGMENT_SIZE + 30)  # inside the last record
    before = digest(root)
    dry = run_cli("repair", "--store-dir", root)
    assert dry.returncode == 1
    assert f"Would zero-fill the short last segment {segment.name}" in dry.stdout
    assert f"at offset {last.offset}" in dry.stdout and "holding 0 valid message(s)" in dry.stdout
    assert "--extend-short-segment --yes" in dry.stdout
    assert f"--truncate-at {last.offset} --yes" in dry.stdout
    assert digest(root) == before
    assert run_cli("repair", "--store-dir", root, "--extend-short-segment", "--yes").returncode == 1  # the cut is left
    done = run_cli("repair", "--store-dir", root, "--truncate-at", last.offset, "--yes")
    assert done.returncode == 0 and f"now ends at {last.offset} ({MESSAGES - 1} messages)" in done.stdout
    with MessageStore(config(root)) as store:
        assert store.max_offset == last.offset
        assert store.read_message(puts[-2].offset).body == body(MESSAGES - 2)


HOLDER = """
import sys
from store import MessageStore, StoreConfig
store = MessageStore(StoreConfig(
    store_path_root_dir=sys.argv[1], mapped_file_size_commit_log=int(sys.argv[2]),
    mapped_file_size_consume_queue=1024 * 20, max_hash_slot_num=512, max_index_num=2048,
))
store.load()
print("READY", flush=True)
sys.stdin.read()
store.shutdown()
"""


def test_repair_refuses_while_another_process_holds_the_store(good_store):
    root, puts = good_store
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(root), str(SEGMENT_SIZE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # The holder prints READY once it has the lock; wait for it with a deadline.
        readable, _, _ = select.select([holder.stdout], [], [], 30)
        assert readable, "the lock holder did not start within 30 s"
        assert holder.stdout.readline().strip() == "READY", holder.stderr.read()
        before = digest(root)
        result = run_cli("repair", "--store-dir", root, "--truncate-at", puts[10].offset, "--yes")
        assert result.returncode == 1
        assert f"in use by another process (pid {holder.pid})" in result.stderr
        assert digest(root) == before
        # Inspection is read-only and works beside the running store, naming the holder.
        seen = run_cli("inspect", "--store-dir", root)
        assert seen.returncode == 0 and f"held by pid {holder.pid}" in seen.stdout
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()
        holder.stderr.close()
    assert holder.returncode == 0


# -- demo --------------------------------------------------------------------------------------


def test_crash_demo_runs_and_loses_nothing():
    result = run_cli("crash-demo", "--messages", "800", "--seed", "7", timeout=120)
    assert result.returncode == 0
    out = result.stdout
    assert "lost                0" in out
    assert "RESULT: OK, 0 acknowledged messages lost" in out
    acked = int(next(line.split()[1] for line in out.splitlines() if line.strip().startswith("acknowledged")))
    recovered = int(next(line.split()[1] for line in out.splitlines() if line.strip().startswith("recovered")))
    assert acked == recovered > 0


def test_crash_demo_keeps_its_store_with_dir(tmp_path):
    target = tmp_path / "kept"
    result = run_cli("crash-demo", "--dir", target, "--messages", "300", "--threads", "2")
    assert result.returncode == 0 and "RESULT: OK" in result.stdout
    assert run_cli("inspect", "--store-dir", target).returncode == 0


def test_cluster_demo_produces_with_sync_replication_and_consumes_from_both(tmp_path):
    target = tmp_path / "cluster"
    result = run_cli("demo", "--dir", target, "--messages", "300", "--concurrency", "8", "--json", timeout=180)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["statuses"] == {"SEND_OK": 300}
    assert summary["consumed"] == {"master": 300, "slave": 300}
    assert summary["lost"] == 0 and summary["ok"]
    assert summary["replication"]["lag_bytes"] == 0
    # Both brokers were shut down cleanly.
    assert not (target / "master" / "store" / "abort").exists()
    assert not (target / "slave1" / "store" / "abort").exists()


# -- usage -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "required: COMMAND"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["inspect"], "required: --store-dir"),
        (["inspect", "--store-dir", "{missing}"], "no such directory"),
        (["inspect", "--store-dir", "{tmp}", "--show-messages", "-1"], "cannot be negative"),
        (["repair", "--store-dir", "{tmp}", "--yes"], "--yes needs --truncate-at"),
        (["repair", "--store-dir", "{tmp}", "--truncate-at", "ten"], "not an offset: 'ten'"),
        (["repair", "--store-dir", "{tmp}", "--truncate-at", "-5"], "argument --truncate-at"),
        (["crash-demo", "--messages", "0"], "must be positive, got 0"),
        (["crash-demo", "--size", "300000"], "above the demo's limit"),
        (["demo", "--messages", "0"], "must be at least 1"),
        (["demo", "--size", "9000000"], "at most"),
        (["inspect", "--store-dir", "{tmp}", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_arguments_exit_2_with_a_clear_message(tmp_path, args, message):
    args = [a.format(tmp=tmp_path, missing=tmp_path / "missing") for a in args]
    result = run_cli(*args)
    assert result.returncode == 2
    assert "usage: rocketstore" in result.stderr
    assert message in result.stderr


def test_a_directory_that_is_not_a_store_is_an_error_not_a_crash(tmp_path):
    result = run_cli("inspect", "--store-dir", tmp_path)
    assert result.returncode == 1
    assert "is not a store directory" in result.stderr


def test_help_lists_the_commands():
    result = run_cli("--help")
    assert result.returncode == 0
    for name in ("inspect", "repair", "demo", "crash-demo", "broker", "produce", "consume", "status", "topic"):
        assert name in result.stdout


def test_broker_without_a_config_or_a_secret_refuses_before_writing_anything(tmp_path):
    import os

    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home))
    bare = subprocess.run([*rocketstore_command(), "broker"], capture_output=True, text=True, timeout=60, env=env)
    assert bare.returncode == 2 and "-c" in bare.stderr and "storePathRootDir" in bare.stderr
    root = tmp_path / "store"
    unsigned = subprocess.run(
        [*rocketstore_command(), "broker", f"--storePathRootDir={root}", "--listenPort=0", "--haListenPort=0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert unsigned.returncode == 1 and "replication must be authenticated" in unsigned.stderr
    assert list(home.iterdir()) == [] and not root.exists()
