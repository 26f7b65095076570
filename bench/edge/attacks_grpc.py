"""The issue's attacks on the gRPC client and admin APIs (items 3, 4, 7, 8 and the gRPC parts of
11), reproduced from the outside against brokers started for each scenario. Each returns a
`Result` with the figure the issue quotes, PASS when the broker now does what the issue expects.

Plain functions of an `AttackEnv`; a Telemetry stream reads its answers on a thread of its own.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
from google.protobuf import duration_pb2

from client import AdminClient, BrokerError, Credentials, Producer, PullConsumer, PullStatus, RocketStoreError
from client.remoting import AsyncRemotingProducer, AsyncRemotingPullConsumer
from wire import admin_auth, client_signature
from wire.rpc import messaging_pb2 as pb
from wire.rpc import messaging_pb2_grpc

from .attack_kit import AttackEnv, Result, rss_mib
from .brokers import APP, OUTSIDER
from .grpc_calls import METHODS, RawChannel
from .observe import Sampler, disk_usage

SERVICE = "/apache.rocketmq.v2.MessagingService/"


def _duration(ms: int) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromMilliseconds(ms)
    return d


def _signed(credentials: Credentials | None) -> tuple[tuple[str, str], ...]:
    if credentials is None:
        return ()
    return client_signature.metadata(credentials.access_key, credentials.secret_key)


class TelemetryStream:
    """A producer's Telemetry stream announcing `topic`; the check-backs it receives are counted
    on a thread (it never answers them). Held open until `close`."""

    def __init__(self, endpoint: str, topic: str, credentials: Credentials | None) -> None:
        self._channel = grpc.insecure_channel(endpoint)
        stub = messaging_pb2_grpc.MessagingServiceStub(self._channel)
        self._done = threading.Event()
        self.checks: queue.Queue[pb.RecoverOrphanedTransactionCommand] = queue.Queue()
        self.statuses: list[str] = []
        settings = pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name=topic)]))
        self._call = stub.Telemetry(
            self._commands(pb.TelemetryCommand(settings=settings)), metadata=_signed(credentials)
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _commands(self, first: pb.TelemetryCommand) -> Iterator[pb.TelemetryCommand]:
        yield first
        self._done.wait(120)

    def _read(self) -> None:
        try:
            for command in self._call:
                if command.HasField("status"):
                    self.statuses.append(pb.Code.Name(command.status.code))
                if command.HasField("recover_orphaned_transaction_command"):
                    self.checks.put(command.recover_orphaned_transaction_command)
        except grpc.RpcError as exc:
            self.statuses.append(exc.code().name)

    def close(self) -> None:
        self._done.set()
        self._call.cancel()
        self._reader.join(timeout=5)
        self._channel.close()


def _check_backs(stream: TelemetryStream, seconds: float) -> list[pb.RecoverOrphanedTransactionCommand]:
    deadline = time.monotonic() + seconds
    got = []
    while (remaining := deadline - time.monotonic()) > 0:
        try:
            got.append(stream.checks.get(timeout=remaining))
        except queue.Empty:
            break
    return got


def telemetry_acl(env: AttackEnv) -> Result:
    result = Result(
        "telemetry-acl",
        "4",
        "an account without rights on a topic receives none of its transaction check-backs",
    )
    window = env.seconds(8)
    settings = {"transactionTimeOut": "1000", "transactionCheckInterval": "1000"}
    with env.group(result, acl=True, slaves=0, master_role="ASYNC_MASTER", settings=settings) as cluster:
        master = cluster.master
        with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:
            admin.create_topic("Orders", 4)
        message = pb.Message(
            topic=pb.Resource(name="Orders"),
            body=b"secret order body",
            system_properties=pb.SystemProperties(message_id=uuid.uuid4().hex.upper(), message_type=pb.TRANSACTION),
        )
        channel = grpc.insecure_channel(master.client_endpoint)
        stub = messaging_pb2_grpc.MessagingServiceStub(channel)
        sent = stub.SendMessage(pb.SendMessageRequest(messages=[message]), metadata=_signed(APP), timeout=10)
        channel.close()
        outsider = TelemetryStream(master.client_endpoint, "Orders", OUTSIDER)
        stolen = _check_backs(outsider, window)
        outsider.close()
        owner = TelemetryStream(master.client_endpoint, "Orders", APP)
        owned = _check_backs(owner, env.seconds(4))
        owner.close()
    bodies = sum(1 for c in stolen if c.message.body == b"secret order body")
    result.figure("half message sent by the account with rights", pb.Code.Name(sent.status.code))
    result.figure(
        f"check-backs received by an account without rights in {window:g} s", f"{len(stolen)} ({bodies} with the body)"
    )
    result.figure("check-backs then received by the account with rights (sanity)", len(owned))
    result.passed = not stolen
    return result


def pop_topics(env: AttackEnv) -> Result:
    result = Result(
        "pop-topics",
        "3",
        "retry and dead-letter topics a client causes stay within the auto-creation limits",
    )
    seconds = env.seconds(15)
    with env.group(result, slaves=0, master_role="ASYNC_MASTER") as cluster:
        master = cluster.master
        with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:
            admin.create_topic("PopTopic", 1)
            config = {e["key"]: e["value"] for e in admin.broker_config()}
            before = len(admin.list_topics())
        per_minute = int(config.get("autoCreateTopicPerMinute", "60"))
        max_topics = int(config.get("autoCreateTopicMaxTopics", "1024"))
        with Producer(master.client_endpoint) as producer:
            producer.send("PopTopic", b"pop me")
        rss_before, disk_before = rss_mib(master), disk_usage(master.store_dir)
        channel = grpc.insecure_channel(master.client_endpoint)
        stub = messaging_pb2_grpc.MessagingServiceStub(channel)
        groups = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            group = pb.Resource(name=f"PopGroup{groups}")
            handle, msg_id = _receive_one(stub, group)
            if handle is not None:
                if groups % 2 == 0:
                    request = pb.ForwardMessageToDeadLetterQueueRequest(
                        group=group,
                        topic=pb.Resource(name="PopTopic"),
                        receipt_handle=handle,
                        message_id=msg_id,
                        delivery_attempt=1,
                        max_delivery_attempts=16,
                    )
                    stub.ForwardMessageToDeadLetterQueue(request, timeout=10)
                else:
                    change = pb.ChangeInvisibleDurationRequest(
                        group=group,
                        topic=pb.Resource(name="PopTopic"),
                        receipt_handle=handle,
                        invisible_duration=_duration(0),
                        message_id=msg_id,
                    )
                    stub.ChangeInvisibleDuration(change, timeout=10)
                    _receive_one(stub, group)  # the redelivery goes through the retry topic
            groups += 1
        channel.close()
        with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:
            after = len(admin.list_topics())
        rss_after, disk_after = rss_mib(master), disk_usage(master.store_dir)
    created = after - before
    allowed = min(max_topics, per_minute + int(per_minute * seconds / 60))
    result.figure("new consumer groups, each receiving then dead-lettering or redelivering", groups)
    result.figure(f"topics created in {seconds:g} s", f"{created} (auto-creation allows {allowed})")
    result.figure("limits", f"autoCreateTopicPerMinute={per_minute}, autoCreateTopicMaxTopics={max_topics}")
    result.figure(
        "broker RSS / store disk growth",
        f"{rss_after - rss_before:+.0f} MiB / {(disk_after - disk_before) / (1 << 20):+.0f} MiB",
    )
    result.passed = created <= allowed
    return result


def _receive_one(stub, group: pb.Resource) -> tuple[str | None, str]:
    request = pb.ReceiveMessageRequest(
        group=group,
        message_queue=pb.MessageQueue(topic=pb.Resource(name="PopTopic"), id=-1),
        batch_size=1,
        invisible_duration=_duration(1000),
        long_polling_timeout=_duration(0),
    )
    for response in stub.ReceiveMessage(request, timeout=10):
        if response.HasField("message"):
            sp = response.message.system_properties
            return sp.receipt_handle, sp.message_id
    return None, ""


def admin_replay(env: AttackEnv) -> Result:
    result = Result(
        "admin-replay",
        "7",
        "an admin header captured on the slave is refused by the master with another body",
    )
    method = METHODS["/rocketstore.admin.v1.Admin/SetBrokerConfig"]
    with env.group(result) as cluster:
        slave = cluster.slave_brokers[0]

        def body(value: str) -> bytes:
            return method.request(values={"autoCreateTopicPerMinute": value}).SerializeToString()

        channel = RawChannel(slave.client_endpoint)
        try:  # what an operator's client signs for the slave, and the attacker captures
            header = admin_auth.Signer(cluster.admin_secret()).header(method.path, channel.identify(), body("60"))
        finally:
            channel.close()
        metadata = ((admin_auth.HEADER, header),)

        def call(endpoint: str, value: str) -> str:
            channel = RawChannel(endpoint)
            try:
                outcome = channel.call(method, [body(value)], metadata, 10)
            finally:
                channel.close()
            return outcome.answer or f"no answer ({outcome.transport})"

        on_slave = call(slave.client_endpoint, "60")
        on_master = call(cluster.master.client_endpoint, "61")
        again_on_slave = call(cluster.slave_brokers[0].client_endpoint, "62")
    result.figure("the header used once on the slave (body autoCreateTopicPerMinute=60)", on_slave)
    result.figure("the same header on the master with another body (=61)", on_master)
    result.figure("the same header on the slave again (=62)", again_on_slave)
    result.passed = on_master == "UNAUTHENTICATED"
    return result


def telemetry_nonreading(env: AttackEnv) -> Result:
    result = Result(
        "telemetry-nonreading",
        "8",
        f"a Telemetry stream that never reads leaves the broker's RSS within +{env.rss_limit_mib:g} MiB "
        "(outbox bounded, the stream dropped)",
    )
    seconds = env.seconds(10)
    with env.group(result, slaves=0, master_role="ASYNC_MASTER") as cluster:
        master = cluster.master
        before = rss_mib(master)
        sampler = Sampler(lambda: {"master": master.process.pid if master.process else None}).start()
        # No BDP probing and a 1 KiB stream window: the client's transport stops granting the
        # broker room to write once a KiB of answers waits unread, as a client that reads nothing.
        channel = grpc.insecure_channel(
            master.client_endpoint, options=[("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 1024)]
        )
        settings = pb.TelemetryCommand(
            settings=pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="T")]))
        ).SerializeToString()
        stop = threading.Event()
        sent = 0

        def commands() -> Iterator[bytes]:
            nonlocal sent
            while not stop.is_set():
                sent += 1
                yield settings

        call = channel.stream_stream(SERVICE + "Telemetry")(commands(), timeout=seconds + 30)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not call.done():
            stop.wait(0.2)  # the attack's duration; the stream is checked for an end by the broker
        ended = call.done()
        during = rss_mib(master)
        stop.set()
        call.cancel()
        channel.close()
        sampler.stop()
        after = rss_mib(master)
    peak = (sampler.rss["master"].peak or 0) / (1 << 20)
    result.figure("settings commands sent, answers never read", f"{sent} in {seconds:g} s")
    result.figure(
        "broker RSS before / at the end / peak / after cancel",
        f"{before:.0f} / {during:.0f} / {peak:.0f} / {after:.0f} MiB",
    )
    result.figure("the broker ended the stream", "yes" if ended else "no")
    result.passed = peak - before <= env.rss_limit_mib
    return result


def telemetry_malformed(env: AttackEnv) -> Result:
    result = Result(
        "telemetry-malformed",
        "11",
        "a Telemetry command that does not decode ends its stream with INVALID_ARGUMENT before the deadline",
    )
    streams = env.count(20)
    method = METHODS[SERVICE + "Telemetry"]
    settings = pb.TelemetryCommand(
        settings=pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name="T")]))
    ).SerializeToString()
    with env.group(result, slaves=0, master_role="ASYNC_MASTER") as cluster:
        endpoint = cluster.master.client_endpoint
        hold = threading.Event()

        def one(_: int) -> str:
            def commands() -> Iterator[bytes]:
                yield settings  # answered: the stream has sent a message when the bad one comes
                yield b"\xff\xff"  # not a TelemetryCommand
                hold.wait(10)  # the client keeps its half open: only the broker can end the call

            channel = grpc.insecure_channel(endpoint)
            try:
                for _answer in channel.stream_stream(method.path)(commands(), timeout=5):
                    pass
                return "OK"
            except grpc.RpcError as exc:
                return exc.code().name
            finally:
                channel.close()

        with ThreadPoolExecutor(max_workers=streams) as pool:
            outcomes = list(pool.map(one, range(streams)))
        hold.set()
    counts = {o: outcomes.count(o) for o in sorted(set(outcomes))}
    result.figure(f"{streams} streams: a settings command, then undecodable bytes; 5 s deadline", counts)
    result.passed = counts.get("INVALID_ARGUMENT", 0) == streams
    return result


def receipt_non_ascii(env: AttackEnv) -> Result:
    result = Result(
        "receipt-non-ascii",
        "11",
        "a receipt handle with non-ASCII characters answers INVALID_RECEIPT_HANDLE",
    )
    handles = ("é", "1.2.3.4.é" + "0" * 31, "\uff11.\uff12.\uff13.\uff14." + "0" * 32, "0.0.0.0." + "\u0660" * 32)
    with env.group(result, slaves=0, master_role="ASYNC_MASTER") as cluster:
        endpoint = cluster.master.client_endpoint
        with Producer(endpoint) as producer:
            producer.send("ReceiptTopic", b"x")
        channel = grpc.insecure_channel(endpoint)
        stub = messaging_pb2_grpc.MessagingServiceStub(channel)
        group, topic = pb.Resource(name="ReceiptGroup"), pb.Resource(name="ReceiptTopic")
        codes = []
        for handle in handles:
            ack = stub.AckMessage(
                pb.AckMessageRequest(
                    group=group, topic=topic, entries=[pb.AckMessageEntry(message_id="m", receipt_handle=handle)]
                ),
                timeout=10,
            )
            entry = ack.entries[0].status if ack.entries else ack.status
            codes.append(("AckMessage", handle, pb.Code.Name(entry.code)))
            change = stub.ChangeInvisibleDuration(
                pb.ChangeInvisibleDurationRequest(
                    group=group, topic=topic, receipt_handle=handle, invisible_duration=_duration(1000), message_id="m"
                ),
                timeout=10,
            )
            codes.append(("ChangeInvisibleDuration", handle, pb.Code.Name(change.status.code)))
        channel.close()
    for method_name, handle, code in codes:
        result.figure(f"{method_name} {handle[:12]!r}...", code)
    result.passed = all(code == "INVALID_RECEIPT_HANDLE" for _, _, code in codes)
    return result


def pull_after_send(env: AttackEnv) -> Result:
    result = Result(
        "pull-after-send",
        "11",
        "a pull at the acknowledged offset + 1 right after the send never answers an illegal offset",
    )
    tries = env.count(300)
    illegal = 0
    # With ASYNC_FLUSH a put is answered as soon as it is replicated (or appended): the dispatcher
    # has the least time to put it in its queue before the pull comes.
    for role, slaves in (("SYNC_MASTER", 1), ("ASYNC_MASTER", 0)):
        with env.group(
            result, remoting=True, slaves=slaves, master_role=role, flush_disk_type="ASYNC_FLUSH"
        ) as cluster:
            master = cluster.master
            with AdminClient(master.client_endpoint, cluster.admin_secret()) as admin:
                admin.create_topic("AfterSendTopic", 1)
            grpc_counts: dict[str, int] = {}
            with (
                Producer(master.client_endpoint, retry_timeout_s=0) as producer,
                PullConsumer(master.client_endpoint) as consumer,
            ):
                for i in range(tries):
                    sent = producer.send("AfterSendTopic", f"g{i}".encode(), queue_id=0)
                    try:
                        status = consumer.pull("AfterSendTopic", 0, sent.queue_offset + 1).status.name
                    except RocketStoreError as exc:
                        status = str(exc).split(":")[0]
                    grpc_counts[status] = grpc_counts.get(status, 0) + 1
            remoting_counts = asyncio.run(_remoting_pulls_after_send(master.remoting_endpoint, tries))
        mode = f"{role}+ASYNC_FLUSH"
        result.figure(f"{mode}, gRPC: {tries} sends, each then a pull at offset + 1", grpc_counts)
        result.figure(f"{mode}, remoting: {tries} sends, each then a pull at offset + 1", remoting_counts)
        illegal += grpc_counts.get(PullStatus.OFFSET_ILLEGAL.name, 0)
        illegal += remoting_counts.get(PullStatus.OFFSET_ILLEGAL.name, 0)
    result.passed = illegal == 0
    return result


async def _remoting_pulls_after_send(endpoint: str, tries: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    async with AsyncRemotingProducer(endpoint) as producer, AsyncRemotingPullConsumer(endpoint) as consumer:
        for i in range(tries):
            sent = await producer.send("AfterSendTopic", f"r{i}".encode(), queue_id=0)
            try:
                status = (await consumer.pull("AfterSendTopic", 0, sent.queue_offset + 1)).status.name
            except BrokerError as exc:
                status = str(exc).split(":")[0]
            counts[status] = counts.get(status, 0) + 1
    return counts
