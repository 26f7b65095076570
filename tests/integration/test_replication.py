"""Replication in one process: a master's ReplicationServicer on a real gRPC server (127.0.0.1,
port 0) and SlaveReplicators streaming into their own MessageStores, each in a tmp dir.

Conditions are awaited with deadlines (`support.wait_until`), never with fixed sleeps.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from ha.chunks import crc32c
from ha.config import HaConfig
from ha.peer_auth import Identity, MasterAuth
from ha.replica_tracker import ReplicaTracker
from master.loop_replication_server import LoopReplicationServicer, LoopServer
from master.replication_server import ReplicationServicer
from rocketstore.broker.event_loop import LoopThread
from slave.loop_replication_client import LoopSlaveReplicator
from slave.replication_client import SlaveReplicator
from store import BrokerRole, FlushDiskType, Message, MessageStore, StoreConfig
from store import PutMessageStatus as S
from store.clock import wall_clock_ms
from support import run_threads, wait_until
from wire.request_guard import ThreadedMalformedRequestGuard
from wire.rpc import ha_pb2, ha_pb2_grpc

SEGMENT = 64 * 1024
BROKER = "broker-a"
TOPIC = "ReplTopic"
SECRET = b"0123456789abcdef-replication-secret"


def store_config(root: Path, role: BrokerRole, flush: FlushDiskType = FlushDiskType.SYNC_FLUSH) -> StoreConfig:
    return StoreConfig(
        store_path_root_dir=str(root),
        broker_role=role,
        flush_disk_type=flush,
        mapped_file_size_commit_log=SEGMENT,
        mapped_file_size_consume_queue=20480,
        max_hash_slot_num=512,
        max_index_num=2048,
        slave_timeout_ms=1000,
    )


def ha_config(master_address: str = "", **kwargs) -> HaConfig:
    settings = dict(
        ha_master_address=master_address,
        ha_send_heartbeat_interval_ms=200,
        ha_housekeeping_interval_ms=2000,
        ha_transfer_batch_size=8 * 1024,
        ha_reconnect_backoff_min_ms=20,
        ha_reconnect_backoff_max_ms=200,
    )
    settings.update(kwargs)
    return HaConfig(**settings)


def open_store(config: StoreConfig) -> MessageStore:
    store = MessageStore(config)
    store.load()
    store.start()
    return store


def body(i: int, size: int = 600) -> bytes:
    head = f"message-{i:08d}|".encode()
    return head + bytes((i + k) % 251 for k in range(size - len(head)))


def put_all(store: MessageStore, start: int, count: int) -> list:
    return [store.put_message(Message(TOPIC, i % 4, body(i), {"KEYS": f"k{i}"})) for i in range(start, start + count)]


class Master:
    def __init__(
        self,
        root: Path,
        role: BrokerRole = BrokerRole.SYNC_MASTER,
        secret: bytes | None = None,
        in_sync: int = 2,
        ha: HaConfig | None = None,
        port: int = 0,
        wall_clock: Callable[[], int] = wall_clock_ms,
        tracker_class: type[ReplicaTracker] = ReplicaTracker,
    ):
        self.store = open_store(store_config(root, role))
        ha = ha or ha_config()
        self.tracker = tracker_class(role, in_sync, 1000, ha.ha_slave_fallbehind_max, lambda: self.store.max_offset)
        self.store.set_replica_gate(self.tracker)
        auth = MasterAuth(secret, Identity(BROKER, 0)) if secret else None
        servicer_class = LoopReplicationServicer if SHAPE.on_loop else ReplicationServicer
        self.servicer = servicer_class(
            self.store, ha, BROKER, self.tracker, client_endpoint="127.0.0.1:10911", auth=auth, clock_ms=wall_clock
        )
        self.loop_thread: LoopThread | None = None
        if isinstance(self.servicer, LoopReplicationServicer):
            # As the broker builds it under haStreamOnEventLoop: a grpc.aio server on a loop of its
            # own (the broker's remoting loop); the puts here come from other threads.
            self.loop_thread = LoopThread("ha-master-loop")
            self.server = LoopServer(self.loop_thread.loop, options=[])
            self.server.add_to(self.servicer)
        else:
            # As the broker builds it on threads: undecodable requests are answered by the guard.
            self.server = grpc.server(ThreadPoolExecutor(max_workers=8), interceptors=[ThreadedMalformedRequestGuard()])
            self.servicer.add_to_server(self.server)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.address = f"127.0.0.1:{self.port}"
        self.server.start()

    def close(self) -> None:
        self.servicer.stop()
        self.server.stop(grace=None).wait(10)
        if self.loop_thread is not None:
            self.loop_thread.stop()
        self.store.shutdown()


class Slave:
    def __init__(
        self,
        root: Path,
        address: str,
        *,
        flush: FlushDiskType = FlushDiskType.SYNC_FLUSH,
        broker_name: str = BROKER,
        broker_id: int = 1,
        secret: bytes | None = SECRET,
        wall_clock: Callable[[], int] = wall_clock_ms,
        **ha,
    ):
        self.store = open_store(store_config(root, BrokerRole.SLAVE, flush))
        self.loop_thread: LoopThread | None = None
        replicator_class: Callable[..., SlaveReplicator] = SlaveReplicator
        if SHAPE.on_loop:
            # The broker's main loop, in a broker.
            self.loop_thread = LoopThread("ha-slave-loop")
            replicator_class = functools.partial(LoopSlaveReplicator, loop=self.loop_thread.loop)
        self.replicator = replicator_class(
            self.store,
            ha_config(address, **ha),
            broker_name=broker_name,
            broker_id=broker_id,
            client_endpoint=f"127.0.0.1:{20000 + broker_id}",
            secret=secret or b"",
            clock_ms=wall_clock,
        )
        self.replicator.start()

    def close(self) -> None:
        self.replicator.stop()
        if self.loop_thread is not None:
            self.loop_thread.stop()
        self.store.shutdown()


@dataclass
class Shape:
    """Where both ends of a stream run: gRPC's threads, or event loops (haStreamOnEventLoop)."""

    on_loop: bool = False


SHAPE = Shape()


@pytest.fixture(autouse=True, params=["threads", "loop"])
def shape(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test here runs with both ends of replication on threads, then on event loops."""
    SHAPE.on_loop = request.param == "loop"
    yield request.param
    SHAPE.on_loop = False


@pytest.fixture
def closing():
    """Registers things to close at the end of the test, last first."""
    things = []
    yield things.append
    for thing in reversed(things):
        thing.close()


def make_master(tmp_path, closing, **kwargs) -> Master:
    master = Master(tmp_path / "master", **kwargs)
    closing(master)
    return master


def make_slave(tmp_path, closing, master_address: str, name: str = "slave", **kwargs) -> Slave:
    slave = Slave(tmp_path / name, master_address, **kwargs)
    closing(slave)
    return slave


def assert_logs_identical(master: MessageStore, slave: MessageStore) -> None:
    assert slave.min_offset == master.min_offset
    assert slave.max_offset == master.max_offset
    offset = master.min_offset
    for _ in range(100_000):
        if offset >= master.max_offset:
            break
        want = master.commit_log_data(offset, SEGMENT)
        assert want, f"master has no bytes at {offset}"
        assert slave.commit_log_data(offset, len(want)) == want, f"the logs differ in {offset}..{offset + len(want)}"
        offset += len(want)
    assert offset == master.max_offset


def queue_contents(store: MessageStore) -> dict:
    assert store.wait_dispatched()
    out = {}
    for queue_id in range(4):
        offset = 0
        for _ in range(1000):
            result = store.get_message("g", TOPIC, queue_id, offset, 64, 1 << 20)
            if not result.found:
                break
            for m in result.messages:
                out[(queue_id, m.queue_offset)] = (m.physical_offset, m.msg_id, m.body)
            offset = result.next_begin_offset
    return out


def connected(master: Master, count: int = 1) -> bool:
    return master.tracker.session_count >= count


# -- sync replication ----------------------------------------------------------------------------


def test_sync_master_puts_are_replicated_byte_for_byte(tmp_path, closing):
    master = make_master(tmp_path, closing)
    slave = make_slave(tmp_path, closing, master.address, secret=None)
    wait_until(lambda: connected(master), 10, "the slave to connect")

    results = put_all(master.store, 0, 300)  # ~200 KB: crosses several 64 KiB segment ends
    assert {r.status for r in results} == {S.PUT_OK}
    # PUT_OK under SYNC_MASTER: the slave held every byte already, on disk.
    end = max(r.wrote_offset + r.wrote_bytes for r in results)
    assert slave.store.flushed_offset >= end
    assert_logs_identical(master.store, slave.store)

    on_master = queue_contents(master.store)
    assert len(on_master) == 300
    assert queue_contents(slave.store) == on_master

    [snapshot] = master.tracker.snapshots(int(time.time() * 1000))
    assert snapshot.broker_id == 1 and snapshot.client_endpoint == "127.0.0.1:20001"
    assert snapshot.ack_offset == master.store.max_offset and snapshot.lag_bytes == 0 and snapshot.fit
    state = wait_until(lambda: (s := slave.replicator.state()).durable_offset == end and s, 10, "the slave's state")
    assert state.connected and state.master_address == master.address and state.last_error == ""
    assert state.master_client_endpoint == "127.0.0.1:10911"
    assert master.tracker.confirmed_offset == end


def test_async_flush_slave_acknowledges_what_it_wrote(tmp_path, closing):
    master = make_master(tmp_path, closing)
    slave = make_slave(tmp_path, closing, master.address, flush=FlushDiskType.ASYNC_FLUSH, secret=None)
    wait_until(lambda: connected(master), 10, "the slave to connect")
    assert {r.status for r in put_all(master.store, 0, 50)} == {S.PUT_OK}
    assert slave.store.max_offset == master.store.max_offset
    assert_logs_identical(master.store, slave.store)


def test_records_larger_than_a_transfer_batch_go_whole(tmp_path, closing):
    master = make_master(tmp_path, closing)
    slave = make_slave(tmp_path, closing, master.address, secret=None)
    wait_until(lambda: connected(master), 10, "the slave to connect")
    results = [master.store.put_message(Message(TOPIC, i % 4, body(i, 20_000))) for i in range(12)]  # batch: 8 KiB
    assert {r.status for r in results} == {S.PUT_OK}
    assert_logs_identical(master.store, slave.store)
    assert queue_contents(slave.store) == queue_contents(master.store)


def test_concurrent_puts_and_puts_that_do_not_wait_are_replicated(tmp_path, closing):
    master = make_master(tmp_path, closing)
    slave = make_slave(tmp_path, closing, master.address, secret=None)
    wait_until(lambda: connected(master), 10, "the slave to connect")
    statuses = []

    def producer(k: int):
        def run():
            for i in range(60):
                statuses.append(master.store.put_message(Message(TOPIC, k, body(k * 1000 + i))).status)
            batch = [Message(TOPIC, k, body(k * 1000 + 100 + j, 300)) for j in range(20)]
            statuses.append(master.store.put_messages(batch).status)

        return run

    run_threads([producer(k) for k in range(4)], timeout_s=60)
    assert statuses == [S.PUT_OK] * len(statuses) and len(statuses) == 4 * 61
    # WAIT=false: answered at once, replicated all the same (no new-data signal from such puts).
    quiet = master.store.put_message(Message(TOPIC, 0, body(9999), {"WAIT": "false"}))
    assert quiet.status is S.PUT_OK
    wait_until(lambda: slave.store.max_offset == master.store.max_offset, 10, "the quiet put to reach the slave")
    assert_logs_identical(master.store, slave.store)
    assert queue_contents(slave.store) == queue_contents(master.store)


def test_an_empty_slave_joins_a_master_with_history(tmp_path, closing):
    master = make_master(tmp_path, closing, role=BrokerRole.ASYNC_MASTER)
    assert {r.status for r in put_all(master.store, 0, 250)} == {S.PUT_OK}
    slave = make_slave(tmp_path, closing, master.address, secret=None)
    wait_until(lambda: slave.store.max_offset == master.store.max_offset, 10, "the slave to catch up")
    assert_logs_identical(master.store, slave.store)
    assert queue_contents(slave.store) == queue_contents(master.store)


def test_stopped_slave_gives_slave_not_available_and_messages_stay_stored(tmp_path, closing):
    master = make_master(tmp_path, closing)
    slave = make_slave(tmp_path, closing, master.address, secret=None)
    wait_until(lambda: connected(master), 10, "the slave to connect")
    assert put_all(master.store, 0, 5)[-1].status is S.PUT_OK
    slave.replicator.stop()
    wait_until(lambda: not connected(master), 10, "the master to notice the stream ended")
    [late] = put_all(master.store, 5, 1)
    assert late.status is S.SLAVE_NOT_AVAILABLE
    assert master.store.read_message(late.wrote_offset).msg_id == late.msg_id


class SilentSlave:
    """A raw client that handshakes and then never acknowledges anything."""

    def __init__(self, address: str, durable_offset: int, broker_id: int = 7) -> None:
        self.channel = grpc.insecure_channel(address)
        self.done = threading.Event()
        self.chunks: list[ha_pb2.Chunk] = []

        def reports():
            yield ha_pb2.SlaveReport(durable_offset=durable_offset, broker_name=BROKER, broker_id=broker_id)
            self.done.wait(30)

        self.call = ha_pb2_grpc.ReplicationStub(self.channel).Replicate(reports())
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        try:
            for chunk in self.call:
                self.chunks.append(chunk)
        except grpc.RpcError:
            pass

    def close(self) -> None:
        self.done.set()
        self.call.cancel()
        self.reader.join(10)
        self.channel.close()


def test_a_slave_that_does_not_acknowledge_gives_flush_slave_timeout(tmp_path, closing):
    master = make_master(tmp_path, closing)
    silent = SilentSlave(master.address, 0)
    closing(silent)
    wait_until(lambda: connected(master), 10, "the silent slave to connect")
    started = time.monotonic()
    [timed_out] = put_all(master.store, 0, 1)
    assert timed_out.status is S.FLUSH_SLAVE_TIMEOUT
    assert time.monotonic() - started < 1.0 + 4.0  # slaveTimeout, with room for a loaded machine
    # The bytes went out all the same (the slave just never acknowledged them).
    wait_until(lambda: any(c.data for c in silent.chunks), 10, "the chunk to reach the silent slave")
    silent.close()
    wait_until(lambda: not connected(master), 10, "the master to drop the silent slave")
    [late] = put_all(master.store, 1, 1)
    assert late.status is S.SLAVE_NOT_AVAILABLE
    for r in (timed_out, late):
        assert master.store.read_message(r.wrote_offset).msg_id == r.msg_id


class SteppedWallClock:
    """Unix ms that an administrator or NTP can set back (`step_back`)."""

    def __init__(self) -> None:
        self.behind_ms = 0

    def __call__(self) -> int:
        return wall_clock_ms() - self.behind_ms

    def step_back(self, ms: int) -> None:
        self.behind_ms += ms


@pytest.mark.parametrize("set_back_ms", [0, 3_600_000], ids=["steady clock", "clock set back an hour"])
def test_master_closes_a_stream_whose_slave_went_silent(tmp_path, closing, set_back_ms):
    # Set back an hour after the slave connected: timed on the wall clock, the silence would not
    # show for that long.
    wall = SteppedWallClock()
    master = make_master(
        tmp_path,
        closing,
        ha=ha_config(ha_send_heartbeat_interval_ms=50, ha_housekeeping_interval_ms=300),
        wall_clock=wall,
    )
    silent = SilentSlave(master.address, 0)
    closing(silent)
    wait_until(lambda: connected(master), 10, "the silent slave to connect")
    wall.step_back(set_back_ms)
    wait_until(lambda: not connected(master), 10, "the master to give the silent slave up")
    silent.reader.join(10)
    assert silent.call.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert "no report from the slave within 300 ms (haHousekeepingInterval)" in silent.call.details()


class TrackerFailingOnce(ReplicaTracker):
    """`expire` raises the first time: a bug in a round of the master's housekeeping."""

    failures = 0

    def expire(self, now_ms: int) -> int:
        if not TrackerFailingOnce.failures:
            TrackerFailingOnce.failures += 1
            raise RuntimeError("expire failed once (test)")
        return super().expire(now_ms)


def test_housekeeping_outlives_a_failing_round_and_ends_a_stream_stuck_sending(tmp_path, closing, caplog):
    caplog.set_level(logging.INFO, logger="store.service_thread")
    TrackerFailingOnce.failures = 0
    master = make_master(
        tmp_path,
        closing,
        role=BrokerRole.ASYNC_MASTER,
        ha=ha_config(ha_send_heartbeat_interval_ms=50, ha_housekeeping_interval_ms=300),
        tracker_class=TrackerFailingOnce,
    )
    put_all(master.store, 0, 8_000)  # ~5 MB: more than gRPC lets out to a slave that reads nothing
    channel = grpc.insecure_channel(master.address)
    closing(channel)
    done = threading.Event()

    def reports():
        yield ha_pb2.SlaveReport(durable_offset=0, broker_name=BROKER, broker_id=7)
        done.wait(30)

    # Handshakes, then neither reads a chunk nor reports: the stream's sender blocks in gRPC, and
    # only the housekeeping thread can end the session (then cancel the stuck call).
    call = ha_pb2_grpc.ReplicationStub(channel).Replicate(reports())
    try:
        wait_until(lambda: connected(master), 10, "the stuck slave to connect")
        wait_until(lambda: not connected(master), 10, "the master to end the stuck slave's session")
        wait_until(lambda: master.servicer.stream_count == 0, 10, "the stuck stream to be cancelled")
    finally:
        done.set()
        call.cancel()
    assert TrackerFailingOnce.failures == 1
    assert "ha-housekeeping failed a round" in caplog.text
    assert "ha-housekeeping works again after 1 failed round(s) (last: RuntimeError: expire failed once (test))" in (
        caplog.text
    )


class MuteMaster(ha_pb2_grpc.ReplicationServicer):
    """Accepts the handshake with one heartbeat, then says nothing more."""

    def __init__(self) -> None:
        self.streams = 0
        self.closed = threading.Event()

    def Replicate(self, request_iterator, context):
        # Each stream stays silent until the slave gives that stream up (a shared event would
        # let a reconnected stream end at once, which the slave reports as the master's doing).
        ended = threading.Event()
        context.add_callback(ended.set)
        context.add_callback(self.closed.set)
        handshake = next(request_iterator)
        self.streams += 1
        yield ha_pb2.Chunk(
            start_offset=handshake.durable_offset,
            master_max_offset=handshake.durable_offset,
            checksum=crc32c(b""),
            segment_size=SEGMENT,
        )
        ended.wait(10)


@contextlib.contextmanager
def serving(servicer: ha_pb2_grpc.ReplicationServicer) -> Iterator[str]:
    """A fake master's servicer on a gRPC server on 127.0.0.1: its address."""
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    ha_pb2_grpc.add_ReplicationServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(grace=None).wait(10)


@pytest.fixture
def mute_master():
    """A MuteMaster served on 127.0.0.1: (the servicer, its address)."""
    mute = MuteMaster()
    with serving(mute) as address:
        yield mute, address


def give_up_silence(slave: Slave, mute: MuteMaster) -> None:
    """The slave gives the silent master's stream up within its housekeeping interval, and says why."""
    wait_until(lambda: mute.closed.is_set(), 10, "the slave to give the stream up")
    assert "no chunk from the master within 300 ms" in wait_until(
        lambda: slave.replicator.state().last_error, 10, "the slave's error"
    )


def test_slave_gives_up_a_master_that_went_silent_and_reconnects(tmp_path, closing, mute_master):
    mute, address = mute_master
    slave = make_slave(
        tmp_path, closing, address, secret=None, ha_send_heartbeat_interval_ms=50, ha_housekeeping_interval_ms=300
    )
    give_up_silence(slave, mute)
    wait_until(lambda: mute.streams >= 2, 10, "the slave to reconnect")
    slave.replicator.stop()


def test_a_wall_clock_set_back_does_not_hide_a_silent_master_from_the_slave(tmp_path, closing, mute_master):
    mute, address = mute_master
    wall = SteppedWallClock()
    slave = make_slave(
        tmp_path,
        closing,
        address,
        secret=None,
        wall_clock=wall,
        ha_send_heartbeat_interval_ms=50,
        ha_housekeeping_interval_ms=300,
    )
    wait_until(lambda: slave.replicator.state().connected, 10, "the slave to take the handshake chunk")
    wall.step_back(3_600_000)
    # The last chunk is reported on the clock the slave was given, set back with it.
    assert 0 < slave.replicator.state().last_chunk_ms <= wall()
    # The age `contact` gives (acting for the master reads it) is not moved by the step.
    since_chunk_ms = slave.replicator.contact()[1]
    assert since_chunk_ms is not None and 0 <= since_chunk_ms < 60_000
    give_up_silence(slave, mute)
    slave.replicator.stop()


def test_restarted_slave_resumes_from_its_own_offset(tmp_path, closing, caplog):
    caplog.set_level(logging.INFO, logger="master.replication_server")
    master = make_master(tmp_path, closing)
    slave = Slave(tmp_path / "slave", master.address, secret=None)
    wait_until(lambda: connected(master), 10, "the slave to connect")
    assert {r.status for r in put_all(master.store, 0, 60)} == {S.PUT_OK}
    held = slave.store.max_offset
    slave.close()
    wait_until(lambda: not connected(master), 10, "the master to notice the slave left")
    missed = put_all(master.store, 60, 40)
    assert {r.status for r in missed} == {S.SLAVE_NOT_AVAILABLE}

    slave = make_slave(tmp_path, closing, master.address, secret=None)
    wait_until(lambda: slave.store.max_offset == master.store.max_offset, 10, "the restarted slave to catch up")
    # The master's session log names where the reopened slave stood when it asked: its own end,
    # not 0 (the store's offset read here would race the catch-up that starts with the replicator).
    assert f"from offset {held} (slave max {held}," in caplog.text
    assert {r.status for r in put_all(master.store, 100, 20)} == {S.PUT_OK}
    assert_logs_identical(master.store, slave.store)
    assert queue_contents(slave.store) == queue_contents(master.store)


def test_async_master_never_waits(tmp_path, closing):
    master = make_master(tmp_path, closing, role=BrokerRole.ASYNC_MASTER)
    assert {r.status for r in put_all(master.store, 0, 5)} == {S.PUT_OK}  # no slave at all
    silent = SilentSlave(master.address, master.store.max_offset)
    closing(silent)
    wait_until(lambda: connected(master), 10, "the silent slave to connect")
    # PUT_OK although the slave never acknowledges: nobody waited for it.
    assert {r.status for r in put_all(master.store, 5, 5)} == {S.PUT_OK}
    assert master.tracker.waiting == 0
    end = master.store.max_offset
    wait_until(
        lambda: any(c.start_offset + len(c.data) == end for c in list(silent.chunks) if c.data),
        10,
        "the bytes to reach the slave all the same",
    )


# -- refusals and protocol errors ---------------------------------------------------------------


def test_slave_with_a_longer_log_is_refused_with_a_clear_error(tmp_path, closing, caplog):
    caplog.set_level(logging.INFO)
    # The slave's directory first served as a master and took more than the master has.
    longer = open_store(store_config(tmp_path / "slave", BrokerRole.ASYNC_MASTER))
    put_all(longer, 0, 30)
    longer.shutdown()
    master = make_master(tmp_path, closing)
    put_all(master.store, 0, 3)
    slave = make_slave(tmp_path, closing, master.address, secret=None)
    held = slave.store.max_offset
    expected = (
        f"the slave's log ({held}) is longer than the master's ({master.store.max_offset}); "
        "it has to be truncated first"
    )
    wait_until(lambda: expected in slave.replicator.state().last_error, 10, "the refusal")
    wait_until(lambda: caplog.text.count("refused replication to") >= 3, 10, "the slave to retry")
    refusals = [r for r in caplog.records if r.name == "slave.replication_client" and "refused" in r.getMessage()]
    assert [r.levelno for r in refusals if r.levelno >= logging.ERROR] == [logging.ERROR]  # once per message
    state = slave.replicator.state()
    assert not state.connected and "FAILED_PRECONDITION" in state.last_error
    assert slave.store.max_offset == held
    assert not connected(master)


def test_slave_whose_log_ends_inside_a_master_record_is_refused(tmp_path, closing):
    diverged = open_store(store_config(tmp_path / "slave", BrokerRole.ASYNC_MASTER))
    diverged.put_message(Message(TOPIC, 0, b"short"))
    diverged.shutdown()
    master = make_master(tmp_path, closing)
    put_all(master.store, 0, 3)
    slave = make_slave(tmp_path, closing, master.address, secret=None)
    wait_until(lambda: "the logs diverge" in slave.replicator.state().last_error, 10, "the refusal")
    assert "is not a record boundary of the master's log" in slave.replicator.state().last_error
    assert not connected(master)


def test_an_ack_beyond_what_was_sent_closes_the_stream(tmp_path, closing):
    master = make_master(tmp_path, closing)
    put_all(master.store, 0, 2)
    channel = grpc.insecure_channel(master.address)
    closing(channel)

    def reports():
        yield ha_pb2.SlaveReport(durable_offset=0, broker_name=BROKER, broker_id=3)
        yield ha_pb2.SlaveReport(durable_offset=10**9)

    call = ha_pb2_grpc.ReplicationStub(channel).Replicate(reports())
    with pytest.raises(grpc.RpcError) as info:
        for _ in range(1000):
            next(call)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "acknowledged offset 1000000000, beyond the" in info.value.details()
    wait_until(lambda: not connected(master), 10, "the session to be removed")


def test_slave_of_another_broker_is_refused(tmp_path, closing):
    master = make_master(tmp_path, closing)
    slave = make_slave(tmp_path, closing, master.address, broker_name="broker-b", secret=None)
    wait_until(lambda: "this master is 'broker-a'" in slave.replicator.state().last_error, 10, "the refusal")
    assert not connected(master)


class FakeMaster(ha_pb2_grpc.ReplicationServicer):
    """Answers a handshake with one bad chunk of real records, and records when the slave
    closes the stream."""

    def __init__(self, bad: str, data: bytes) -> None:
        self.bad = bad
        self.data = data
        self.closed = threading.Event()
        self.handshakes: list[ha_pb2.SlaveReport] = []

    def Replicate(self, request_iterator, context):
        ended = threading.Event()  # this stream's own end (see MuteMaster)
        context.add_callback(ended.set)
        context.add_callback(self.closed.set)
        handshake = next(request_iterator)
        self.handshakes.append(handshake)
        start = handshake.durable_offset
        checksum = crc32c(self.data)
        if self.bad == "offset":
            start += 4096
        else:
            checksum ^= 1
        yield ha_pb2.Chunk(
            start_offset=start,
            data=self.data,
            master_max_offset=start + len(self.data),
            checksum=checksum,
            segment_size=SEGMENT,
        )
        ended.wait(10)


def some_records(root: Path) -> bytes:
    """Real CommitLog records, as a master would send them."""
    source = open_store(store_config(root, BrokerRole.ASYNC_MASTER))
    try:
        results = put_all(source, 0, 3)
        return source.commit_log_data(0, sum(r.wrote_bytes for r in results))
    finally:
        source.shutdown()


@pytest.mark.parametrize("bad, verdict", [("offset", "WRONG_OFFSET"), ("checksum", "BAD_CHECKSUM")])
def test_a_bad_chunk_closes_the_stream_and_nothing_is_appended(tmp_path, closing, bad, verdict):
    fake = FakeMaster(bad, some_records(tmp_path / "scratch"))
    with serving(fake) as address:
        slave = make_slave(tmp_path, closing, address, secret=None)
        wait_until(lambda: fake.closed.is_set(), 10, "the slave to close the stream")
        state = wait_until(lambda: (s := slave.replicator.state()).last_error and s, 10, "the slave's error")
        assert f"protocol error ({verdict})" in state.last_error
        assert not state.connected
        assert fake.handshakes[0].broker_name == BROKER and fake.handshakes[0].durable_offset == 0
        slave.replicator.stop()
        assert slave.store.max_offset == 0


def test_slave_with_the_wrong_secret_is_refused(tmp_path, closing, caplog):
    caplog.set_level(logging.INFO)
    master = make_master(tmp_path, closing, secret=SECRET)
    put_all(master.store, 0, 3)
    intruder = make_slave(tmp_path, closing, master.address, name="intruder", secret=b"not-the-secret-0123456789")
    # With another secret, neither side can prove itself to the other: the slave stops at the
    # master's proof and never opens the stream.
    wait_until(lambda: "failed to prove" in intruder.replicator.state().last_error, 10, "the refusal")
    assert intruder.store.max_offset == 0
    assert not connected(master)
    # The right secret gets through the same server.
    slave = make_slave(tmp_path, closing, master.address, secret=SECRET)
    wait_until(lambda: slave.store.max_offset == master.store.max_offset, 10, "the slave with the secret to catch up")
    assert intruder.store.max_offset == 0
    for secret in (SECRET, b"not-the-secret-0123456789"):
        assert secret.decode() not in caplog.text


def test_stopping_the_servicer_ends_every_stream_promptly(tmp_path, closing):
    master = make_master(tmp_path, closing)
    slaves = [make_slave(tmp_path, closing, master.address, name=f"slave{i}", broker_id=i, secret=None) for i in (1, 2)]
    wait_until(lambda: connected(master, 2), 10, "both slaves to connect")
    started = time.monotonic()
    master.servicer.stop()
    assert master.servicer.stream_count == 0
    assert not connected(master)
    assert time.monotonic() - started < 3
    for slave in slaves:
        wait_until(lambda: not slave.replicator.state().connected, 10, "the slave to notice")


# -- mutual authentication (shared secret) -------------------------------------------------------


class ImpostorMaster(ha_pb2_grpc.ReplicationServicer):
    """A master without the secret where the slave expects its master: it answers the Hello with
    a proof under another secret and would stream real records and a topic table of its own.
    Records every call it gets past the Hello."""

    def __init__(self, data: bytes) -> None:
        self.auth = MasterAuth(b"not-the-secret-0123456789", Identity(BROKER, 0))
        self.data = data
        self.hellos = 0
        self.calls: list[str] = []

    def Hello(self, request, context):
        self.hellos += 1
        answer = self.auth.hello(request.client_nonce, Identity(request.broker_name, request.broker_id), 0)
        return ha_pb2.HelloResponse(
            server_nonce=answer.server_nonce, server_proof=answer.server_proof, broker_name=BROKER, broker_id=0
        )

    def Replicate(self, request_iterator, context):
        self.calls.append("Replicate")
        handshake = next(request_iterator)
        yield ha_pb2.Chunk(
            start_offset=handshake.durable_offset,
            data=self.data,
            checksum=crc32c(self.data),
            master_max_offset=len(self.data),
            segment_size=SEGMENT,
        )

    def GetMetadata(self, request, context):
        self.calls.append("GetMetadata")
        return ha_pb2.MetadataResponse(
            is_master=True,
            topics_json=b'{"topicConfigTable": {"Evil": {}}}',
            consumer_offsets_json=b'{"offsetTable": {}}',
        )

    def GetEpochs(self, request, context):
        self.calls.append("GetEpochs")
        return ha_pb2.EpochsResponse(is_master=True)


def test_a_master_without_the_secret_is_refused_and_the_real_one_still_accepts_the_slave(tmp_path, closing, caplog):
    caplog.set_level(logging.INFO)
    impostor = ImpostorMaster(some_records(tmp_path / "scratch"))
    slave_root = tmp_path / "slave"
    with serving(impostor) as address:
        slave = Slave(slave_root, address, secret=SECRET)
        wait_until(
            lambda: "failed to prove" in slave.replicator.state().last_error, 10, "the slave to refuse the impostor"
        )
        wait_until(
            lambda: "failed to prove" in slave.replicator.metadata.state().last_error,
            10,
            "the metadata copy to refuse it",
        )
        assert impostor.hellos >= 2 and impostor.calls == []  # nothing past the Hello: no handshake, no request
        assert slave.store.max_offset == 0
        assert slave.store.topics.get("Evil") is None
        slave.close()
    master = make_master(tmp_path, closing, secret=SECRET)
    slave = make_slave(tmp_path, closing, master.address, secret=SECRET)
    wait_until(lambda: connected(master), 10, "the real master to accept the slave")
    results = put_all(master.store, 0, 5)
    assert [r.status for r in results] == [S.PUT_OK] * 5
    assert_logs_identical(master.store, slave.store)
    assert SECRET.decode() not in caplog.text


def _captured_header(master: Master, method: str) -> tuple[tuple[str, str], ...]:
    """What a relay that passed the slave's Hello through to the real master would capture of the
    call that follows: a header for a nonce the real master issued and nobody used yet."""
    from ha.peer_auth import SlaveAuth
    from slave.peer_login import login

    with grpc.insecure_channel(master.address) as channel:
        _, metadata = login(channel, SlaveAuth(SECRET, Identity(BROKER, 1)), method, master.address, 5)
    return metadata


def test_a_relayed_or_replayed_header_gets_nothing_from_the_real_master(tmp_path, closing):
    from wire.admin_auth import BrokerIdentity, Signer

    master = make_master(tmp_path, closing, secret=SECRET)
    put_all(master.store, 0, 5)
    handshake = ha_pb2.SlaveReport(durable_offset=0, broker_name=BROKER, broker_id=1)
    with grpc.insecure_channel(master.address) as channel:
        stub = ha_pb2_grpc.ReplicationStub(channel)
        # A fresh header without the session key: the handshake carries no valid MAC.
        call = stub.Replicate(iter([handshake]), metadata=_captured_header(master, "Replicate"), timeout=5)
        with pytest.raises(grpc.RpcError) as refused:
            list(call)
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert "failed its MAC" in refused.value.details()
        # The same header a second time: its nonce is spent.
        metadata = _captured_header(master, "GetMetadata")
        stub.GetMetadata(ha_pb2.MetadataRequest(broker_name=BROKER), metadata=metadata, timeout=5)
        with pytest.raises(grpc.RpcError) as replayed:
            stub.GetMetadata(ha_pb2.MetadataRequest(broker_name=BROKER), metadata=metadata, timeout=5)
        assert replayed.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert "already used" in replayed.value.details()
        # An admin header, valid under the secret, does not open replication at all.
        request = ha_pb2.EpochsRequest(broker_name=BROKER)
        old = Signer(SECRET).metadata(
            "/rocketstore.ha.v1.Replication/GetEpochs", BrokerIdentity("c", BROKER, 0), request.SerializeToString()
        )
        with pytest.raises(grpc.RpcError) as old_style:
            stub.GetEpochs(request, metadata=old, timeout=5)
        assert old_style.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert not connected(master)


def test_a_replication_report_that_does_not_decode_ends_its_stream_invalid_argument(tmp_path, closing, caplog):
    """Issue 30: a report that did not decode ended the stream's reader with a logged traceback.
    It closes the stream INVALID_ARGUMENT now, before or after the handshake, and slaves that send
    good reports still replicate."""
    master = make_master(tmp_path, closing)
    put_all(master.store, 0, 5)
    caplog.set_level(logging.INFO, logger="master.replication_server")
    handshake = ha_pb2.SlaveReport(durable_offset=0, broker_name=BROKER, broker_id=1).SerializeToString()
    garbage = bytes(range(256))
    with grpc.insecure_channel(master.address) as channel:
        replicate = channel.stream_stream("/rocketstore.ha.v1.Replication/Replicate")
        for reports in ([garbage], [handshake, garbage]):
            with pytest.raises(grpc.RpcError) as ended:
                for _ in replicate(iter(reports), timeout=30):
                    pass
            assert ended.value.code() is grpc.StatusCode.INVALID_ARGUMENT, ended.value
            assert "malformed request" in ended.value.details()
    assert not [r for r in caplog.records if r.exc_info is not None or r.levelno >= logging.ERROR]
    slave = make_slave(tmp_path, closing, master.address, secret=None)
    wait_until(lambda: slave.store.max_offset == master.store.max_offset, 20, "the slave to catch up")


def test_a_flood_of_refused_calls_costs_one_log_line_per_peer(tmp_path, closing, caplog):
    """Issue 30: every refused call logged a WARNING (3.1 MB of log in 10 s from a peer without
    the secret). Now the first refusal of a peer is logged, and the rest are counted into one line
    per peer per interval."""
    master = make_master(tmp_path, closing, secret=SECRET)
    caplog.set_level(logging.WARNING, logger="master.replication_server")
    refused = 0
    with grpc.insecure_channel(master.address) as channel:
        stub = ha_pb2_grpc.ReplicationStub(channel)
        for i in range(500):
            bogus = (("x-rs-auth", f"v2 {i:064x} {'0' * 64}"),)
            with pytest.raises(grpc.RpcError) as call:
                stub.GetEpochs(ha_pb2.EpochsRequest(broker_name=BROKER), metadata=bogus, timeout=10)
            refused += call.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert refused == 500
    lines = [r.getMessage() for r in caplog.records if r.name == "master.replication_server"]
    # One window of 10 s per peer: on a machine so slow that 500 calls took longer, one more.
    assert 1 <= len(lines) <= 1 + 500 // 50, lines
    assert "refused GetEpochs from ipv4:127.0.0.1:" in lines[0]
