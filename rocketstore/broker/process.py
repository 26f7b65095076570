"""The broker process: `rocketstore broker -c broker.conf [--key=value ...]`.

It owns the wiring and the lifecycle, nothing else:
- one `MessageStore`, opened with the configured role;
- the client API (`apache.rocketmq.v2.MessagingService`) and the admin API on `listenPort`, one
  `grpc.aio` server (admin calls need the admin secret), and the remoting API on
  `remotingListenPort`. Where replication streams run on event loops (haStreamOnEventLoop), one
  loop thread, `broker-loop`, serves both client APIs and both ends of replication: a put from
  either API, its chunk and the slave's ack cross no thread of ours but the flush thread's (the
  client API on the main loop handed every put and ack between the two loops: 32 against 19
  voluntary context switches per put at one gRPC client, docs/benchmarks.md, "twelfth round").
  Otherwise the client API serves on the main thread's loop and remoting on a loop of its own;
- the broker's replication side, `replication_role.ReplicationRole`: by role, the master's
  replication server on `haListenPort` and the SYNC_MASTER replica gate, or the slave's
  replication client streaming from `haMasterAddress`. It owns every role change; the policies
  (controller mode's elections, static mode's planned switchover) drive it.

Servers bind `bindAddress` (default: brokerIP1) only. Port 0 binds a free port; the ready line on
stdout names every bound port:

    rocketstore broker ready: name=broker-a id=0 role=SYNC_MASTER client=127.0.0.1:40123 ha=127.0.0.1:40124

Controller mode (enableControllerMode=true): the store opens as a slave and every broker serves
replication on haListenPort; `controller_agent.ControllerAgent` decides the role from etcd and
calls `controller_roles.ControllerRoles` (promote, follow, step down) on its own thread, under
the replication side's role lock. Static mode's planned switchover is `switchover`. brokerRole
then names how the broker acknowledges when it is master (SYNC_MASTER or ASYNC_MASTER).
Consumers see messages up to the confirmed offset only (the dispatch limit), puts are fenced
before they are appended when the broker may not acknowledge (`set_put_fence`), and again before
an answer leaves (`BrokerState.write_refusal`). The ready line says role=CONTROLLER; the admin
status says what the broker is now.

Once started, the broker's long-lived objects are frozen out of the cyclic collector's passes
(`heap.settle`), so a full pass no longer holds the GIL for tens of milliseconds under load.

SIGTERM or SIGINT shuts down cleanly (servers stop, the store flushes, the abort file goes); a
second one exits at once, which the store treats as a crash and recovers from. Logs go to stderr
and to `<brokerLogDir or storePathRootDir/logs>/broker.log`; secrets are never logged.
Thread-safety: `Broker` is driven from one thread (the one running its event loop).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
import os
import signal
from collections.abc import Callable
from typing import Any

import grpc

from ha.epoch_keeper import EpochKeeper
from ha.group_state import GroupKeys
from rocketstore.coordination import EtcdClient
from rocketstore.coordination.cluster_registrar import ClusterRegistrar
from rocketstore.coordination.cluster_routes import MASTER, SLAVE, BrokerRegistration, RouteKeys, TopicRoute
from rocketstore.failover import switchover
from rocketstore.failover.controller_agent import ControllerAgent
from rocketstore.failover.controller_roles import ControllerRoles
from store import BrokerRole, MessageStore
from store.clock import monotonic_ms, wall_clock_ms
from store.metadata.topic_config import SYSTEM_TOPICS, Permission
from store.pop.pop_journal import PopJournal
from store.pop.pop_state import Event as PopEvent
from store.properties import ConfigError
from wire.admin_auth import AsyncAuthInterceptor, Verifier
from wire.auth import server_credentials
from wire.generic_handlers import generic_only
from wire.request_guard import MalformedRequestGuard
from wire.rpc import admin_pb2_grpc, messaging_pb2_grpc

from . import crash_seam, heap
from .acl import AclGuard, load_acl
from .admin import AdminServicer
from .client_registry import ClientRegistry
from .client_sightings import ClientSightings
from .config import BrokerConfigs, is_loopback, load_secrets
from .core.services import BrokerCore
from .event_loop import LoopThread, new_event_loop
from .listening import bind, host_port
from .logs import capture_native_stderr, ready_json, setup_logging
from .messaging import MessagingServicer
from .metrics import BrokerCollector, Connections, MetricsServer, readiness, serving
from .proxy_forwarder import ProxyForwarder, proxy_standing
from .remoting_server import RemotingServer
from .replication_role import ReplicationRole
from .view import acts_for_master

log = logging.getLogger("rocketstore.broker")

ADMIN_PREFIX = "/rocketstore.admin.v1.Admin/"


class BrokerState:
    """What the API servicers ask about the broker (`rocketstore.broker.view.BrokerView`)."""

    def __init__(self, broker: "Broker", replication: ReplicationRole) -> None:
        self._broker = broker
        self._replication = replication

    @property
    def role(self) -> BrokerRole:
        return self._replication.store.broker_role

    def client_endpoint(self) -> str:
        return self._broker.client_endpoint

    def ha_endpoint(self) -> str:
        return self._replication.ha_endpoint

    def master_client_endpoint(self) -> str:
        broker = self._broker
        if broker.agent is not None and broker.roles is not None:
            if broker.roles.acting_epoch() is not None:
                return broker.client_endpoint
            master = broker.agent.master
            if master is None or master.broker_id == broker.configs.broker.broker_id:
                return ""
            return master.client_endpoint
        replicator = self._replication.replicator
        if replicator is None:
            return broker.client_endpoint
        return replicator.state().master_client_endpoint

    def controller_mode(self) -> bool:
        return self._broker.agent is not None

    def write_refusal(self) -> str | None:
        """Why this broker must not take or acknowledge a write now (controller mode), or None."""
        agent = self._broker.agent
        return agent.may_acknowledge() if agent is not None else None

    def controller_status(self):
        agent = self._broker.agent
        return agent.status() if agent is not None else None

    def hand_over(self, broker_id: int, timeout_s: float) -> tuple[int, int, str, int]:
        """Planned switchover to `broker_id`: (its id, the epoch, its client endpoint, the offset
        it took over at). HandoverError / HandoverTimeout when nothing changed."""
        broker, replication = self._broker, self._replication
        with replication.lock:
            if broker.agent is not None:
                master, offset = broker.agent.hand_over(broker_id, timeout_s)
                return master.broker_id, master.epoch, master.client_endpoint, offset
            endpoint, offset = switchover.hand_over(replication, broker.secrets.admin, broker_id, timeout_s)
            return broker_id, 0, endpoint, offset

    def take_over(self, expected_offset: int, role: str) -> tuple[str, str, int]:
        """Static mode: become master at `expected_offset` (ValueError when it cannot)."""
        broker, replication = self._broker, self._replication
        if broker.agent is not None:
            raise ValueError("in controller mode elections choose the master: use ElectMaster")
        with replication.lock:
            switchover.take_over(replication, expected_offset, role)
        return replication.ha_endpoint, broker.client_endpoint, replication.store.max_offset

    def in_sync(self):
        tracker = self._replication.tracker
        return tracker.in_sync() if tracker is not None else None

    def confirmed_offset(self) -> int:
        roles = self._broker.roles
        return roles.confirmed_offset() if roles is not None else self._replication.confirmed_offset()

    def slave_snapshots(self, now_ms: int) -> list:
        tracker = self._replication.tracker
        return tracker.snapshots(now_ms) if tracker is not None else []

    def replication_state(self):
        replicator = self._replication.replicator
        return replicator.state() if replicator is not None else None

    def epoch(self) -> int:
        roles = self._broker.roles
        return roles.epoch if roles is not None else 0

    def started_at_ms(self) -> int:
        return self._broker.started_at_ms

    def cluster_registry(self):
        registrar = self._broker.registrar
        return (registrar.view, registrar.max_age_ms) if registrar is not None else None

    def cluster_view(self):
        registry = self.cluster_registry()
        if registry is None:
            return None
        view, max_age_ms = registry
        if not view.fresh(wall_clock_ms(), max_age_ms):
            return None
        return view.without(self._broker.configs.broker.broker_name)

    def acting_master(self) -> bool:
        broker = self._broker
        config = broker.configs.broker
        if not config.enable_slave_acting_master or self.role is not BrokerRole.SLAVE:
            return False
        # Asked on every pop call and route of a slave: `contact`, not `state`, which waits for a
        # metadata round in flight (seconds, when the master is away).
        replicator = self._replication.replicator
        # Ages on monotonic clocks: a clock set back must not delay acting by the step.
        connected, since_chunk_ms = replicator.contact() if replicator is not None else (False, None)
        since_start_ms = monotonic_ms() - broker.started_monotonic_ms
        quiet_ms = since_start_ms if since_chunk_ms is None else min(since_chunk_ms, since_start_ms)
        return acts_for_master(connected, quiet_ms, config.slave_acting_master_delay_ms)


class Broker:
    def __init__(self, configs: BrokerConfigs) -> None:
        # As the broker started (after a role override); a switchover changes `replication`.
        self.configs = configs
        self.secrets = load_secrets(configs)
        self._store: MessageStore | None = None
        # The replication side and every role change: from `start` on.
        self.replication: ReplicationRole | None = None
        self.client_endpoint = ""
        self.started_at_ms = 0
        self.started_monotonic_ms = 0
        self._client_server: grpc.aio.Server | None = None
        self._acl_guard: AclGuard | None = None
        # Proxy mode's relay of a slave's master-only calls (None when off).
        self._proxy: ProxyForwarder | None = None
        # The broker core both client APIs hand requests to (`core/`), and the two front ends.
        self._core: BrokerCore | None = None
        self._messaging: MessagingServicer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # One journal object, shared by the pop service (acting slave) and the hand-back.
        self.pop_journal: PopJournal | None = None
        self._remoting: RemotingServer | None = None
        self.remoting_endpoint = ""
        # haStreamOnEventLoop: the loop the client API, the remoting server and both ends of
        # replication share (`broker-loop`), made before anything serves on it.
        self._broker_loop: LoopThread | None = None
        self._metrics: MetricsServer | None = None
        self.metrics_endpoint = ""
        self._etcd: EtcdClient | None = None
        self.registrar: ClusterRegistrar | None = None
        # The clients heard from lately (remoting consumer lists; admin API: consumer groups, their
        # members), within remotingMax* and channelExpiredTimeout.
        self.clients = ClientRegistry(configs.broker.client_limits)
        self._view: BrokerState | None = None
        self._stopped = False
        # Controller mode only.
        self.agent: ControllerAgent | None = None
        self.roles: ControllerRoles | None = None

    @property
    def store(self) -> MessageStore:
        """The store, once `start` opened it (RuntimeError before)."""
        if self._store is None:
            raise RuntimeError("the broker has not opened its store yet")
        return self._store

    @property
    def ha_endpoint(self) -> str:
        """The replication endpoint this broker serves now; "" when it serves none."""
        return self.replication.ha_endpoint if self.replication is not None else ""

    @property
    def controller_mode(self) -> bool:
        return self.configs.ha.enable_controller_mode

    # -- start ---------------------------------------------------------------------------------

    async def start(self) -> None:
        if not self.controller_mode:
            self.configs = await asyncio.to_thread(switchover.start_up_configs, self.configs, self.secrets)
        self._loop = asyncio.get_running_loop()
        broker = self.configs.broker
        if self.configs.ha.streams_on_event_loop():
            self._broker_loop = LoopThread("broker-loop")
        self._client_server = await self._on_api_loop(self._client_api_server)
        credentials = self._client_credentials()
        client_port = await self._on_api_loop(
            bind, self._client_server, broker.host, broker.listen_port, credentials, "client API", "listenPort"
        )
        self.client_endpoint = host_port(broker.broker_ip1, client_port)
        store = self._open_store(client_port)
        replication = self._replication_side(store)
        if self.roles is not None:
            self.roles.open()
        else:
            replication.open()
        store.start()
        replication.start()
        view = self._view = BrokerState(self, replication)
        await self._serve_clients(store, view)
        await self._on_api_loop(self._client_server.start)
        self.started_at_ms = wall_clock_ms()
        self.started_monotonic_ms = monotonic_ms()
        self._join_etcd()

    @property
    def _api_loop(self) -> asyncio.AbstractEventLoop | None:
        """The loop the client API serves on."""
        return self._broker_loop.loop if self._broker_loop is not None else self._loop

    async def _on_api_loop(self, call: Callable[..., Any], *args: Any) -> Any:
        """`call(*args)` on the client API's loop (awaited when it returns an awaitable), from the
        main loop: grpc.aio's server and the services it starts belong to the loop they are made on."""

        async def run() -> Any:
            result = call(*args)
            return await result if inspect.isawaitable(result) else result

        if self._broker_loop is None:
            return await run()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), self._broker_loop.loop))

    def _client_api_server(self) -> grpc.aio.Server:
        """The client and admin API's server, its interceptors in place (not bound yet)."""
        broker, store_config = self.configs.broker, self.configs.store
        max_message = store_config.max_message_size * 2 + 1024 * 1024
        interceptors: list[grpc.aio.ServerInterceptor] = [
            AsyncAuthInterceptor(Verifier(self.secrets.admin, broker.identity), [ADMIN_PREFIX]),
            MalformedRequestGuard(),
        ]
        acl_guard: AclGuard | None = None
        if broker.acl_enable:
            try:
                acl_guard = self._acl_guard = AclGuard(load_acl(broker.acl_file))
            except (OSError, ValueError) as exc:
                raise ConfigError(f"aclFile: {exc}") from None
            interceptors.append(acl_guard)
        elif not is_loopback(broker.host):
            log.warning(
                "the client API on %s accepts unsigned calls from anyone who can reach it (aclEnable=false)",
                broker.host,
            )
        # After the ACL guard: a call it refuses names no client.
        interceptors.append(ClientSightings(self.clients))
        message_limits = [
            ("grpc.max_receive_message_length", max_message),
            ("grpc.max_send_message_length", max_message),
        ]
        if broker.proxy_mode_enable and broker.tls_enable:
            log.warning("proxy mode is off under tlsEnable=true: routes name one address, slaves relay nothing")
        elif broker.relays_to_master:
            # Innermost: the guards and sightings above wrap a relayed call as they wrap the servicer.
            self._proxy = ProxyForwarder(message_limits)
            interceptors.append(self._proxy)
        return grpc.aio.server(interceptors=interceptors, options=[*message_limits, ("grpc.so_reuseport", 0)])

    def _client_credentials(self) -> grpc.ServerCredentials | None:
        broker = self.configs.broker
        if not broker.tls_enable:
            return None
        return server_credentials(broker.tls_server_cert_path, broker.tls_server_key_path)

    def _open_store(self, client_port: int) -> MessageStore:
        """Open and recover the store (not started yet)."""
        # Messages carry the broker's real address (STOREHOSTADDRESS, msgId), so a port chosen
        # by the OS goes into the store's config before the store opens.
        store_config = dataclasses.replace(self.configs.store, listen_port=client_port)
        if self.controller_mode:
            # Elections decide the role: no put before this broker wins one.
            store_config = dataclasses.replace(store_config, broker_role=BrokerRole.SLAVE)
        store = self._store = MessageStore(store_config)
        self.pop_journal = PopJournal(store_config.root)
        crash_seam.install(store)
        report = store.load()
        log.info("store loaded: %s", report)
        return store

    def _replication_side(self, store: MessageStore) -> ReplicationRole:
        """The replication side, and in controller mode the roles elections drive (not open yet)."""
        broker, ha = self.configs.broker, self.configs.ha
        keeper = EpochKeeper(store.config.root) if self.controller_mode else None
        replication = self.replication = ReplicationRole(
            store,
            self.configs,
            self.secrets.ha,
            client_endpoint=self.client_endpoint,
            pop_journal=self.pop_journal,
            take_pop_events=self._take_pop_events,
            epochs=keeper,
            master_loop=self._broker_loop.loop if self._broker_loop is not None else None,
            slave_loop=self._broker_loop.loop if self._broker_loop is not None else None,
        )
        if keeper is not None:
            self.roles = ControllerRoles(
                replication,
                keeper,
                broker_id=broker.broker_id,
                client_endpoint=self.client_endpoint,
                in_sync_replicas=ha.in_sync_replicas,
            )
        return replication

    async def _serve_clients(self, store: MessageStore, view: BrokerState) -> None:
        """The client and admin APIs on the client server, remoting and metrics when configured."""
        assert self._client_server is not None
        server = self._client_server
        broker = self.configs.broker
        core = self._core = BrokerCore(store, self.configs, view, self.clients)
        messaging = MessagingServicer(
            core,
            receipt_secret=self.secrets.ha or self.secrets.admin,
            pop_journal=self.pop_journal,
            telemetry_check=self._acl_guard.telemetry_check if self._acl_guard is not None else None,
        )
        admin = AdminServicer(
            store, self.configs, view, consumes_by_pop=messaging.consumes_by_pop, clients=self.clients
        )
        messaging_pb2_grpc.add_MessagingServiceServicer_to_server(messaging, generic_only(server))
        admin_pb2_grpc.add_AdminServicer_to_server(admin, generic_only(server))
        store.add_arrival_listener(messaging.on_arrival)
        # Long-poll wakes and the services the client API starts belong to its loop.
        await self._on_api_loop(lambda: messaging.bind_loop(asyncio.get_running_loop()))
        self._messaging = messaging
        if self._proxy is not None:
            self._proxy.bind(functools.partial(proxy_standing, view))
        if broker.remoting_listen_port >= 0:
            self._start_remoting(core)
        if broker.metrics_port >= 0:
            self._start_metrics(view, broker.host, broker.metrics_port)

    def _start_remoting(self, core: BrokerCore) -> None:
        broker = self.configs.broker
        self._remoting = RemotingServer(core, loop_thread=self._broker_loop)
        try:
            self.remoting_endpoint = self._remoting.start(broker.host, broker.remoting_listen_port, broker.broker_ip1)
        except OSError as exc:
            self._remoting = None
            address = host_port(broker.host, broker.remoting_listen_port)
            raise ConfigError(f"cannot listen for the remoting API on {address} (remotingListenPort): {exc}") from None

    def _join_etcd(self) -> None:
        """With etcdEndpoints: the controller agent (controller mode) and the route registrar."""
        broker, ha = self.configs.broker, self.configs.ha
        if not ha.etcd_endpoints.strip():
            return
        etcd = self._etcd = EtcdClient(
            ha.etcd_endpoints,
            timeout_s=ha.etcd_request_timeout_ms / 1000,
            user=ha.etcd_user,
            password=self.secrets.etcd,
            ca_file=ha.etcd_ca_file,
            cert_file=ha.etcd_cert_file,
            key_file=ha.etcd_key_file,
        )
        if self.roles is not None:
            agent = self.agent = ControllerAgent(
                etcd, GroupKeys.of(ha.etcd_prefix, broker.broker_cluster_name, broker.broker_name), ha, self.roles
            )
            self.roles.attach(agent.may_acknowledge)
            agent.start()
        self.registrar = ClusterRegistrar(
            etcd,
            RouteKeys.of(ha.etcd_prefix, broker.broker_cluster_name),
            broker.broker_cluster_name,
            self._registration,
            lease_ttl_s=ha.etcd_lease_ttl_s,
            interval_ms=broker.cluster_route_refresh_interval_ms,
        )
        self.registrar.start()

    def _registration(self) -> BrokerRegistration:
        """This broker's route record as it serves now (registrar thread)."""
        store, broker, view = self.store, self.configs.broker, self._view
        assert view is not None
        master = store.broker_role is not BrokerRole.SLAVE and view.write_refusal() is None
        acting = not master and view.acting_master()
        topics = {}
        if master or acting:
            topics = {
                config.topic_name: TopicRoute(
                    config.read_queue_nums, config.write_queue_nums, config.perm, config.order
                )
                for config in store.topics.topics()
                if config.topic_name not in SYSTEM_TOPICS
            }
        permission = store.config.broker_permission
        if master and store.put_fence_reason() is not None:
            # It cannot acknowledge a write yet (a new SYNC_MASTER until a replica is in sync):
            # routes name it read-only until it can, and producers return to it then, rather than
            # failing a send there and holding the group out for their failure pause.
            permission &= ~int(Permission.WRITE)
        return BrokerRegistration(
            cluster=broker.broker_cluster_name,
            broker_name=broker.broker_name,
            broker_id=broker.broker_id,
            role=MASTER if master else SLAVE,
            client_endpoint=self.client_endpoint,
            epoch=view.epoch(),
            remoting_endpoint=self.remoting_endpoint,
            acting=acting,
            broker_permission=permission,
            auto_create=store.config.auto_create_topic_enable,
            default_queues=store.config.default_topic_queue_nums,
            topics=topics,
        )

    def _start_metrics(self, view: BrokerState, host: str, port: int) -> None:
        collector = BrokerCollector(self.store, self.configs, view, self._connections)
        metrics = MetricsServer(collector, lambda: readiness(self.store, view), lambda: serving(view))
        try:
            bound = metrics.start(host, port)
        except OSError as exc:
            raise ConfigError(f"cannot listen for metrics on {host_port(host, port)} (metricsPort): {exc}") from None
        self._metrics = metrics
        self.metrics_endpoint = host_port(host, bound)
        if not is_loopback(host):
            log.warning(
                "metrics and health answers on %s are readable by anyone who can reach it", self.metrics_endpoint
            )

    def _connections(self) -> Connections:
        remoting, messaging, etcd = self._remoting, self._messaging, self._etcd
        return Connections(
            telemetry_streams=messaging.telemetry_streams if messaging is not None else 0,
            remoting=len(remoting.connections) if remoting is not None else 0,
            etcd_failed_calls=etcd.failed_calls if etcd is not None else 0,
        )

    def _take_pop_events(self, events: list[PopEvent]) -> tuple[bool, str]:
        """Replication thread: a slave hands back its pop journal; the event loop merges it."""
        messaging, loop = self._messaging, self._api_loop
        if messaging is None or loop is None:
            return False, "the broker is still starting"
        future = asyncio.run_coroutine_threadsafe(messaging.merge_pop_events(events), loop)
        try:
            store = self.configs.store
            return future.result((store.sync_flush_timeout_ms + store.slave_timeout_ms) / 1000 + 5)
        except TimeoutError:
            future.cancel()
            return False, "the merge did not finish in time"

    def ready_line(self) -> str:
        broker = self.configs.broker
        parts = [
            f"name={broker.broker_name}",
            f"id={broker.broker_id}",
            f"role={'CONTROLLER' if self.controller_mode else self.configs.store.broker_role.name}",
            f"client={self.client_endpoint}",
        ]
        if self.remoting_endpoint:
            parts.append(f"remoting={self.remoting_endpoint}")
        if self.metrics_endpoint:
            parts.append(f"metrics={self.metrics_endpoint}")
        if self.ha_endpoint:
            parts.append(f"ha={self.ha_endpoint}")
            if self.controller_mode:
                parts.append(f"etcd={self.configs.ha.etcd_endpoints}")
        else:
            parts.append(f"master={self.configs.ha.ha_master_address}")
        return "rocketstore broker ready: " + " ".join(parts)

    # -- stop ----------------------------------------------------------------------------------

    async def stop(self, grace_s: float = 2.0) -> None:
        """Stop taking requests, end replication, shut the store down cleanly. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        log.info("shutting down")
        if self.registrar is not None:
            # Routes stop naming this broker before it stops answering.
            await asyncio.to_thread(self.registrar.stop)
        if self.agent is not None:
            # The lease goes first: a master's key vanishes at once and a slave is elected.
            await asyncio.to_thread(self.agent.stop)
            if self.roles is not None:
                self.roles.released()
        if self.replication is not None:
            # Puts still waiting for a slave get their answer now.
            await asyncio.to_thread(self.replication.stop)
        if self._remoting is not None:
            await asyncio.to_thread(self._remoting.stop)
        if self._metrics is not None:
            await asyncio.to_thread(self._metrics.stop)
        if self._messaging is not None:
            await self._on_api_loop(self._messaging.close)
        if self._client_server is not None:
            await self._on_api_loop(self._client_server.stop, grace_s)
        if self._proxy is not None:
            await self._on_api_loop(self._proxy.close)
        if self._broker_loop is not None:
            await asyncio.to_thread(self._broker_loop.stop)
        if self._store is not None:
            await asyncio.to_thread(self._store.shutdown)
        log.info("shut down cleanly")


# -- the process -----------------------------------------------------------------------------------


async def serve(configs: BrokerConfigs) -> int:
    broker = Broker(configs)
    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    signals_seen = 0

    def on_signal(signum: int) -> None:
        nonlocal signals_seen
        signals_seen += 1
        if signals_seen > 1:
            log.error("second %s: exiting without a clean shutdown", signal.Signals(signum).name)
            logging.shutdown()
            os._exit(1)
        log.info("%s: shutting down cleanly", signal.Signals(signum).name)
        stop_requested.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await broker.start()
    except BaseException:
        await broker.stop(grace_s=0)
        raise
    # The started broker's tables are long-lived: later full collections need not walk them.
    frozen = heap.settle()
    log.debug("heap settled: %d long-lived objects frozen", frozen)
    line = broker.ready_line()
    log.info(line)
    print(ready_json(line, log.name) if configs.broker.log_format == "json" else line, flush=True)
    await stop_requested.wait()
    await broker.stop()
    return 0


def run(configs: BrokerConfigs, verbose: int = 0) -> int:
    # Messages, offsets, logs: nothing a broker writes is for other users of the machine.
    os.umask(0o077)
    capture_native_stderr()
    path = setup_logging(configs, verbose)
    where = f"log file {path}" if path is not None else "logging to stderr only"
    log.info("starting %s as %s; %s", configs.broker.broker_name, configs.store.broker_role.name, where)
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(serve(configs))
