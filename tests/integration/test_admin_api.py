"""The admin API servicer (rocketstore/broker/admin.py) on a real grpc.aio server on 127.0.0.1
beside the client API, over a real MessageStore, with the shared-secret interceptor in front."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass

import grpc

from ha.config import HaConfig
from ha.replica_tracker import SlaveSnapshot
from rocketstore.broker.admin import AdminServicer
from rocketstore.broker.config import BrokerConfig, BrokerConfigs
from rocketstore.broker.core.services import BrokerCore
from rocketstore.broker.messaging import MessagingServicer
from rocketstore.broker.view import StaticView
from slave.replication_client import ReplicationState
from store import BrokerRole, FlushDiskType, MessageStore, StoreConfig
from wire.admin_auth import AsyncAuthInterceptor, BrokerIdentity, Signer, Verifier
from wire.request_guard import MalformedRequestGuard
from wire.rpc import admin_pb2, admin_pb2_grpc, messaging_pb2_grpc
from wire.rpc import messaging_pb2 as pb

SECRET = b"admin-secret-for-tests-0123456789"
ADMIN_PREFIX = "/rocketstore.admin.v1.Admin/"
NOW_MS = 1_700_000_100_000


def identity(broker_id: int = 0) -> BrokerIdentity:
    return BrokerIdentity("ClusterT", "broker-t", broker_id)


def auth_interceptor(broker_id: int = 0) -> grpc.aio.ServerInterceptor:
    return AsyncAuthInterceptor(Verifier(SECRET, identity(broker_id)), [ADMIN_PREFIX])


@dataclass
class Harness:
    store: MessageStore
    admin: admin_pb2_grpc.AdminStub
    messaging: messaging_pb2_grpc.MessagingServiceStub
    channel: grpc.aio.Channel
    view: StaticView
    signer: Signer
    broker_id: int

    def creds(self, method: str, request):
        """The header of a call to `method` of this broker with `request`."""
        return self.signer.metadata(ADMIN_PREFIX + method, identity(self.broker_id), request.SerializeToString())

    def call(self, method: str, request):
        """A signed call to `method` with `request` (an awaitable of its answer)."""
        return getattr(self.admin, method)(request, metadata=self.creds(method, request), timeout=10)


@contextlib.asynccontextmanager
async def serving(root, view: StaticView, *, broker_id: int = 0, **store_overrides):
    config = StoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=20480,
        max_hash_slot_num=512,
        max_index_num=2048,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        broker_role=view.broker_role,
        **store_overrides,
    )
    store = MessageStore(config)
    store.load()
    store.start()
    configs = BrokerConfigs(
        BrokerConfig(broker_cluster_name="ClusterT", broker_name="broker-t", broker_id=broker_id),
        config,
        HaConfig(in_sync_replicas=2),
    )
    server = grpc.aio.server(interceptors=[auth_interceptor(broker_id), MalformedRequestGuard()])
    port = server.add_insecure_port("127.0.0.1:0")
    view.client = f"127.0.0.1:{port}"
    messaging = MessagingServicer(BrokerCore(store, configs, view))
    admin = AdminServicer(store, configs, view, clock_ms=lambda: NOW_MS)
    messaging_pb2_grpc.add_MessagingServiceServicer_to_server(messaging, server)
    admin_pb2_grpc.add_AdminServicer_to_server(admin, server)
    store.add_arrival_listener(messaging.on_arrival)
    messaging.bind_loop(asyncio.get_running_loop())
    await server.start()
    channel = grpc.aio.insecure_channel(view.client)
    try:
        yield Harness(
            store,
            admin_pb2_grpc.AdminStub(channel),
            messaging_pb2_grpc.MessagingServiceStub(channel),
            channel,
            view,
            Signer(SECRET),
            broker_id,
        )
    finally:
        await channel.close()
        await server.stop(0)
        await messaging.close()
        await asyncio.to_thread(store.shutdown)


def run(coro) -> None:
    asyncio.run(asyncio.wait_for(coro, 120))


async def expect_error(call, code: grpc.StatusCode) -> str:
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        assert exc.code() == code, exc
        return exc.details()
    raise AssertionError(f"expected {code}")


def master_view() -> StaticView:
    return StaticView(
        BrokerRole.SYNC_MASTER,
        ha="127.0.0.1:20912",
        confirmed=0,
        slaves=[
            SlaveSnapshot(
                "127.0.0.1:50001",
                1,
                "127.0.0.1:30911",
                ack_offset=10,
                lag_bytes=5,
                lag_seconds=1.5,
                fit=True,
                connected_at_ms=NOW_MS - 5000,
                silent_ms=120,
            ),
        ],
        epoch_value=3,
        started_ms=NOW_MS - 60_000,
    )


def test_master_status(tmp_path):
    async def body():
        async with serving(tmp_path, master_view()) as h:
            send = pb.SendMessageRequest(
                messages=[pb.Message(topic=pb.Resource(name="StatusTopic"), body=b"x" * 100) for _ in range(3)]
            )
            response = await h.messaging.SendMessage(send, timeout=30)
            # SYNC_MASTER with no replica gate: stored, no slave took it.
            assert response.status.code == pb.HA_NOT_AVAILABLE
            assert await asyncio.to_thread(h.store.wait_dispatched)
            h.view.confirmed = h.store.max_offset
            status = await h.call("GetStatus", admin_pb2.GetStatusRequest())
            assert (status.cluster_name, status.broker_name, status.broker_id) == ("ClusterT", "broker-t", 0)
            assert (status.role, status.epoch, status.flush_disk_type) == ("SYNC_MASTER", 3, "SYNC_FLUSH")
            assert (status.client_endpoint, status.ha_endpoint) == (h.view.client, "127.0.0.1:20912")
            assert status.max_offset == h.store.max_offset > 0
            assert status.min_offset == 0
            assert status.flushed_offset == h.store.max_offset  # SYNC_FLUSH answered after the fsync
            assert status.confirmed_offset == h.store.max_offset
            assert status.dispatched_offset == h.store.max_offset and status.dispatch_lag_bytes == 0
            assert (status.uptime_ms, status.in_sync_replicas) == (60_000, 2)
            (slave,) = status.slaves
            assert (slave.ha_peer, slave.broker_id, slave.client_endpoint) == ("127.0.0.1:50001", 1, "127.0.0.1:30911")
            assert (slave.ack_offset, slave.lag_bytes, slave.lag_seconds, slave.fit) == (10, 5, 1.5, True)
            assert slave.connected_at_ms == NOW_MS - 5000
            assert slave.silent_ms == 120
            assert not status.master_ha_address and not status.master_connected
            assert isinstance(json.loads(status.stats_json), dict)

            view = await h.call("GetClusterView", admin_pb2.ClusterViewRequest())
            assert view.HasField("master") and not view.HasField("self")
            assert view.master.broker_name == "broker-t" and view.master.role == "SYNC_MASTER"

    run(body())


def test_slave_status_and_cluster_view(tmp_path):
    async def body():
        view = StaticView(
            BrokerRole.SLAVE,
            master_client="127.0.0.1:10911",
            replication=ReplicationState(
                "127.0.0.1:10912",
                connected=True,
                master_max_offset=4096,
                durable_offset=0,
                last_chunk_ms=0,
                last_error="chunk at 5 does not start at 0",
            ),
        )
        async with serving(tmp_path, view, broker_id=1) as h:
            status = await h.call("GetStatus", admin_pb2.GetStatusRequest())
            assert (status.role, status.broker_id) == ("SLAVE", 1)
            assert (status.master_ha_address, status.master_connected, status.master_max_offset) == (
                "127.0.0.1:10912",
                True,
                4096,
            )
            assert status.replication_error == "chunk at 5 does not start at 0"
            assert not status.slaves and status.uptime_ms == 0
            cluster = await h.call("GetClusterView", admin_pb2.ClusterViewRequest())
            assert cluster.HasField("self") and not cluster.HasField("master")
            assert cluster.self.role == "SLAVE"
            spec = admin_pb2.TopicSpec(name="OnSlave", read_queue_nums=2, write_queue_nums=2, perm=6)
            details = await expect_error(
                h.call("CreateTopic", admin_pb2.CreateTopicRequest(topic=spec)),
                grpc.StatusCode.FAILED_PRECONDITION,
            )
            assert "not master" in details and "MASTER" in details and "127.0.0.1:10911" in details
            assert h.store.topics.get("OnSlave") is None

    run(body())


def test_create_and_list_topics(tmp_path):
    async def body():
        async with serving(tmp_path, master_view(), default_topic_queue_nums=4) as h:
            spec = admin_pb2.TopicSpec(name="Orders", read_queue_nums=8, write_queue_nums=6, perm=6)
            created = await h.call("CreateTopic", admin_pb2.CreateTopicRequest(topic=spec))
            assert (
                created.topic.name,
                created.topic.read_queue_nums,
                created.topic.write_queue_nums,
                created.topic.perm,
            ) == (
                "Orders",
                8,
                6,
                6,
            )
            defaults = admin_pb2.TopicSpec(name="Defaults")
            created = await h.call("CreateTopic", admin_pb2.CreateTopicRequest(topic=defaults))
            assert (created.topic.read_queue_nums, created.topic.write_queue_nums, created.topic.perm) == (4, 4, 6)
            listed = await h.call("ListTopics", admin_pb2.ListTopicsRequest())
            names = [t.name for t in listed.topics]
            assert "Orders" in names and "Defaults" in names and names == sorted(names)
            ask = pb.QueryRouteRequest(topic=pb.Resource(name="Orders"), replicas=True)
            route = await h.messaging.QueryRoute(ask, timeout=10)
            # The master's 8 queues (id 0), and its connected slave's 8 read-only ones beside them.
            on_master = [q for q in route.message_queues if q.broker.id == 0]
            assert len(on_master) == 8
            assert all(q.permission == pb.READ for q in route.message_queues if q.broker.id != 0)

            bad_specs = [
                admin_pb2.TopicSpec(name="bad name"),
                admin_pb2.TopicSpec(name=""),
                admin_pb2.TopicSpec(name="x" * 200),
                admin_pb2.TopicSpec(name="Big", read_queue_nums=5000, write_queue_nums=4),
                admin_pb2.TopicSpec(name="Neg", read_queue_nums=-1, write_queue_nums=4),
                admin_pb2.TopicSpec(name="Perm", perm=99),
                admin_pb2.TopicSpec(name="SCHEDULE_TOPIC_XXXX"),
            ]
            for spec in bad_specs:
                details = await expect_error(
                    h.call("CreateTopic", admin_pb2.CreateTopicRequest(topic=spec)),
                    grpc.StatusCode.INVALID_ARGUMENT,
                )
                assert details, spec
            await expect_error(
                h.call("CreateTopic", admin_pb2.CreateTopicRequest()),
                grpc.StatusCode.INVALID_ARGUMENT,
            )
            assert h.store.topics.get("Big") is None

    run(body())


def test_admin_refuses_calls_without_valid_credentials(tmp_path):
    async def body():
        async with serving(tmp_path, master_view()) as h:
            await expect_error(
                h.admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=10), grpc.StatusCode.UNAUTHENTICATED
            )
            wrong = Signer(b"another-secret-of-enough-length").metadata(ADMIN_PREFIX + "GetStatus", identity(), b"")
            await expect_error(
                h.admin.GetStatus(admin_pb2.GetStatusRequest(), metadata=wrong, timeout=10),
                grpc.StatusCode.UNAUTHENTICATED,
            )
            # Credentials are per method: a GetStatus signature does not create topics.
            spec = admin_pb2.TopicSpec(name="Sneaky")
            await expect_error(
                h.admin.CreateTopic(
                    admin_pb2.CreateTopicRequest(topic=spec),
                    metadata=h.creds("GetStatus", admin_pb2.CreateTopicRequest(topic=spec)),
                    timeout=10,
                ),
                grpc.StatusCode.UNAUTHENTICATED,
            )
            assert h.store.topics.get("Sneaky") is None
            # The client API stays open, and valid credentials pass.
            route = await h.messaging.QueryRoute(pb.QueryRouteRequest(topic=pb.Resource(name="Open")), timeout=10)
            assert route.status.code == pb.OK
            status = await h.call("GetStatus", admin_pb2.GetStatusRequest())
            assert status.broker_name == "broker-t"

    run(body())
