"""The remoting loop's own CPU per message on the send path (`python -m bench.send_path_bench`).

A `MessageStore` in a temp dir (ASYNC_MASTER + ASYNC_FLUSH, no slave: nothing to wait for), a
`BrokerCore` and a `RemotingServer`'s connections, driven in one of two ways:

- in the loop (default): the requests' frames are made before the clock starts (SEND_BATCH_MESSAGE
  for batches, SEND_MESSAGE_V2 for single messages, the fields a 4.x producer sends, a UNIQ_KEY
  each) and handed to the connections' `data_received` on one event loop, whose thread's CPU
  (`time.thread_time`) is the figure: frame and header decoding, the core's checks and planning,
  the record's encoding, the append, the outcomes and the answer's encoding, nothing else. Each
  turn hands one request to each of CLIENTS connections and runs the loop until all are answered.
- `--sockets`: the server on 127.0.0.1 port 0 with its own loop thread, and producers
  (`client.remoting.AsyncRemotingProducer`, one connection each) on a loop in another thread; the
  server thread's user and system CPU (`/proc/self/task/TID/stat`) per message, socket I/O and GIL
  waits included (the producers share the process's GIL, so rates here are not the broker's).

The store's dispatcher and flush threads run beside it in both. Compare two trees by running them
in turn, a few rounds each, with `uptime` beside the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common import default_parent_dir, environment, load_average, print_environment, progress
from bench.vs_redis import _cell

TOPIC = "SendPathBench"
QUEUES = 8
HZ = os.sysconf("SC_CLK_TCK")


def parse_args(argv) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.send_path_bench", description=__doc__.splitlines()[0])
    p.add_argument("--cells", default="1x32,64x1", help="comma list of CLIENTSxBATCH (default 1x32,64x1)")
    p.add_argument("--messages", type=int, default=64_000, help="messages per round and cell (default 64000)")
    p.add_argument("--rounds", type=int, default=3, help="rounds per cell (default 3)")
    p.add_argument("--size", type=int, default=1024, help="body bytes (default 1024)")
    p.add_argument("--sockets", action="store_true", help="real connections and the server's own loop thread")
    p.add_argument("--dir", type=Path, help="parent directory of the run (default: a disk-backed temp dir)")
    return p.parse_args(argv)


# -- in the loop ------------------------------------------------------------------------------------


class _Transport(asyncio.Transport):
    """Where a connection's answers go: counted, their bytes dropped."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.port = port
        self.answers = 0

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", self.port) if name == "peername" else default

    def write(self, data) -> None:
        self.answers += 1

    def is_closing(self) -> bool:
        return False


def _frames(requests: int, batch: int, size: int, opaques: itertools.count) -> list[bytes]:
    """`requests` send requests as a RocketMQ 4.x producer frames them (`bench.edge.remoting_inputs`'
    header), each message a UNIQ_KEY of its own."""
    from bench.edge.remoting_inputs import send_header, v2_fields
    from client.convert import new_message_id
    from wire.remoting import BatchItem, RemotingCommand, RequestCode, encode, encode_batch_body, properties_to_string

    body = bytes(size)
    frames = []
    for n in range(requests):
        props = [{"UNIQ_KEY": new_message_id(), "WAIT": "true"} for _ in range(batch)]
        if batch > 1:
            header = send_header(TOPIC, n % QUEUES, "", batch=True)
            data = encode_batch_body(BatchItem(body, 0, p) for p in props)
            code = RequestCode.SEND_BATCH_MESSAGE
        else:
            header = send_header(TOPIC, n % QUEUES, properties_to_string(props[0]))
            data = body
            code = RequestCode.SEND_MESSAGE_V2
        frames.append(encode(RemotingCommand(code, next(opaques), 0, v2_fields(header), data)))
    return frames


async def _in_loop_round(server, clients: int, batch: int, size: int, messages: int) -> tuple[int, float, float]:
    from rocketstore.broker.remoting_server import _Connection

    transports = [_Transport(40000 + i) for i in range(clients)]
    conns = []
    for transport in transports:
        conn = _Connection(server)
        conn.connection_made(transport)
        conns.append(conn)
    turns = max(1, messages // (clients * batch))
    opaques = itertools.count(1)
    frames = [_frames(clients, batch, size, opaques) for _ in range(turns)]
    expected = 0
    cpu, started = time.thread_time(), time.perf_counter()
    for turn in frames:
        for conn, frame in zip(conns, turn):
            conn.data_received(frame)
        expected += 1
        while any(t.answers < expected for t in transports):
            await asyncio.sleep(0)
    cpu, elapsed = time.thread_time() - cpu, time.perf_counter() - started
    for conn in conns:
        conn.connection_lost(None)
    return turns * clients * batch, cpu, elapsed


# -- over sockets -----------------------------------------------------------------------------------


def _thread_cpu_s(thread: threading.Thread) -> float:
    """The thread's user and system CPU seconds (`/proc/self/task/TID/stat`)."""
    fields = Path(f"/proc/self/task/{thread.native_id}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / HZ


async def _sockets_round(endpoint: str, clients: int, batch: int, size: int, messages: int) -> int:
    from client import ProducerMessage
    from client.remoting import AsyncRemotingProducer

    body = bytes(size)
    producers = [AsyncRemotingProducer(endpoint, timeout_s=30) for _ in range(clients)]
    per_client = max(1, messages // (clients * batch))
    sent = 0

    async def run(producer: AsyncRemotingProducer) -> None:
        nonlocal sent
        for _ in range(per_client):
            if batch == 1:
                results = [await producer.send(TOPIC, body)]
            else:
                results = await producer.send_batch(TOPIC, [ProducerMessage(body) for _ in range(batch)])
            bad = [r.status.name for r in results if r.status.name != "SEND_OK"]
            if bad:
                raise RuntimeError(f"not acknowledged: {bad[0]}")
            sent += len(results)

    try:
        await asyncio.gather(*(run(p) for p in producers))
    finally:
        for producer in producers:
            await producer.close()
    return sent


def _sockets_cell(server, endpoint: str, clients: int, batch: int, args) -> tuple[int, float, float]:
    loop_thread = server._thread
    assert loop_thread is not None
    cpu, started = _thread_cpu_s(loop_thread), time.perf_counter()
    sent = asyncio.run(_sockets_round(endpoint, clients, batch, args.size, args.messages))
    return sent, _thread_cpu_s(loop_thread) - cpu, time.perf_counter() - started


# -- the run ----------------------------------------------------------------------------------------


def main(argv=None) -> int:
    from ha.config import HaConfig
    from rocketstore.broker.config import BrokerConfig, BrokerConfigs
    from rocketstore.broker.core.services import BrokerCore
    from rocketstore.broker.event_loop import new_event_loop
    from rocketstore.broker.remoting_server import RemotingServer
    from rocketstore.broker.view import StaticView
    from store import BrokerRole, FlushDiskType, MessageStore, StoreConfig, TopicConfig

    args = parse_args(argv)
    cells = [_cell(c) for c in args.cells.split(",")]
    run_dir = Path(tempfile.mkdtemp(prefix="send-path-", dir=args.dir or default_parent_dir()))
    env = environment(run_dir)
    print_environment("The remoting loop's CPU per message on the send path", env, tuple(env), 12)
    how = "over sockets, the server's loop thread" if args.sockets else "frames handed to the loop"
    print(
        f"  config       ASYNC_MASTER + ASYNC_FLUSH, no slave, remoting ({how}), {args.size} B bodies,"
        f" {args.messages} messages per round, {args.rounds} rounds per cell"
    )
    config = StoreConfig(
        store_path_root_dir=str(run_dir / "store"),
        flush_disk_type=FlushDiskType.ASYNC_FLUSH,
        broker_role=BrokerRole.ASYNC_MASTER,
    )
    loop = None if args.sockets else new_event_loop()
    try:
        with MessageStore(config) as store:
            store.topics.create_or_update(TopicConfig(TOPIC, QUEUES, QUEUES))
            configs = BrokerConfigs(BrokerConfig(broker_name="broker-a"), config, HaConfig())
            server = RemotingServer(BrokerCore(store, configs, StaticView(BrokerRole.ASYNC_MASTER)))
            endpoint = server.start("127.0.0.1", 0, "127.0.0.1") if args.sockets else ""
            try:
                progress("warming up")
                if loop is not None:
                    loop.run_until_complete(_in_loop_round(server, 1, 1, args.size, 500))
                else:
                    asyncio.run(_sockets_round(endpoint, 1, 1, args.size, 500))
                for clients, batch in cells:
                    per_msg: list[float] = []
                    for round_ in range(1, args.rounds + 1):
                        if loop is not None:
                            run = _in_loop_round(server, clients, batch, args.size, args.messages)
                            sent, cpu, elapsed = loop.run_until_complete(run)
                        else:
                            sent, cpu, elapsed = _sockets_cell(server, endpoint, clients, batch, args)
                        per_msg.append(1e6 * cpu / sent)
                        print(
                            f"  {clients}x{batch} round {round_}: {sent:>6} msgs {sent / elapsed:>7,.0f} msgs/s"
                            f"  loop CPU {1e6 * cpu / sent:6.1f} us/msg {1e6 * cpu * batch / sent:7.1f} us/request"
                            f"  load {load_average()}",
                            flush=True,
                        )
                    print(f"  {clients}x{batch} median loop CPU {statistics.median(per_msg):.1f} us/msg", flush=True)
            finally:
                server.stop()
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        if loop is not None:
            loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
