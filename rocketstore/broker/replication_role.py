"""`ReplicationRole`: one broker's replication side, and the role transitions over it.

It owns what changes when the broker's role does:
- the master's side: the replication server on haListenPort (one stream per slave; shared
  secret and/or mutual TLS) with its servicer: a `grpc.aio` server on the master's loop (the
  broker's serving loop) and `LoopReplicationServicer` when the broker gives one (haStreamOnEventLoop),
  else a threaded `grpc` server and `ReplicationServicer`; and the `ReplicaTracker` that
  SYNC_MASTER puts wait on (installed as the store's replica gate);
- the slave's side: the replicator streaming from a master (and copying its metadata):
  `LoopSlaveReplicator` on the slave's loop (the same serving loop) when given one, else
  `SlaveReplicator` on its own threads;
- the role in force (`role`): brokerRole as broker.conf and any role override set it, changed by
  a static switchover; in controller mode how the broker acknowledges when it is master (it
  never changes: elections decide whether it is master, the store says which it is now);
- the master it follows (`master_address`), and the role lock (`lock`).

States, by what runs (the store's own role says master or slave):

    state                    server and tracker        replicator      store
    static master            serving                   -               SYNC/ASYNC_MASTER
    static slave             -                         following       SLAVE
    taking over (static)     serving (bound first)     stopped last    SLAVE -> master
    controller mode master   serving                   -               SYNC/ASYNC_MASTER
    controller mode slave    serving (standby)         following       SLAVE
    stopped                  -                         -               (shut down next)

Transitions: `serve`/`release` bind and give back haListenPort (a failure to bind changes
nothing); `follow`/`stop_following` start and stop a replicator; `become_master` and
`step_down` turn the tracker and the store over; `become_slave` is a static master's whole
step down (step down, then follow); `stop` ends everything at shutdown. The policies that order
them (elections: `rocketstore.failover.controller_roles`; planned switchovers:
`rocketstore.failover.switchover`) drive this object through
`rocketstore.failover.replication_side.ReplicationSide`.

Thread-safety: every transition takes `lock`, a re-entrant lock; a caller that orders several
(a promotion, a hand-over, a take-over) holds it around all of them, so role changes never
interleave (the controller's thread, admin worker threads). `stop` does not take it: it runs
once, at shutdown, after the controller's threads ended. The queries (`tracker`, `replicator`,
`ha_endpoint`, `role`, `confirmed_offset`) read single attributes without the lock: the put
path and the dispatcher ask them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import grpc

from ha.epoch_keeper import EpochKeeper
from ha.peer_auth import Identity, MasterAuth
from ha.replica_tracker import ReplicaTracker
from master.loop_replication_server import LoopReplicationServicer, LoopServer
from master.replication_server import ReplicationServicer
from slave.loop_replication_client import LoopSlaveReplicator
from slave.replication_client import SlaveReplicator
from store import BrokerRole, MessageStore
from store.pop.pop_journal import PopJournal
from store.pop.pop_state import Event as PopEvent
from wire.auth import channel_credentials, server_credentials
from wire.request_guard import ThreadedMalformedRequestGuard

from .config import BrokerConfigs
from .listening import bind, host_port

log = logging.getLogger("rocketstore.broker")

# Replication streams each hold a worker thread; a few spare ones serve refusals promptly.
HA_MAX_STREAMS = 16


class ReplicationRole:
    def __init__(
        self,
        store: MessageStore,
        configs: BrokerConfigs,
        ha_secret: bytes,
        *,
        client_endpoint: str,
        pop_journal: PopJournal | None = None,
        take_pop_events: Callable[[list[PopEvent]], tuple[bool, str]] | None = None,
        epochs: EpochKeeper | None = None,
        master_loop: asyncio.AbstractEventLoop | None = None,
        slave_loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        """`configs` as the broker runs them (after a role override); `epochs` in controller
        mode only; `take_pop_events` merges what a slave hands back (the master's servicer).
        With haStreamOnEventLoop the broker gives its serving loop (`broker-loop`, where both client
        APIs' puts run) as `master_loop`, which serves replication on a `grpc.aio` server, and as
        `slave_loop`, which runs a slave's stream; without them both ends run on threads."""
        self.store = store
        self._configs = configs
        self._ha_secret = ha_secret
        self._client_endpoint = client_endpoint
        self._pop_journal = pop_journal
        self._take_pop_events = take_pop_events
        self._epochs = epochs
        self._master_loop = master_loop
        self._slave_loop = slave_loop
        self.lock = threading.RLock()
        self._role = configs.store.broker_role
        self._master_address = configs.ha.ha_master_address
        self._tracker: ReplicaTracker | None = None
        self._server: grpc.Server | LoopServer | None = None
        self._servicer: ReplicationServicer | None = None
        self._replicator: SlaveReplicator | None = None
        self._ha_endpoint = ""

    # -- queries -------------------------------------------------------------------------------

    @property
    def role(self) -> BrokerRole:
        return self._role

    @property
    def master_address(self) -> str:
        """The master's haListenPort this broker follows, or last followed ("" once master)."""
        return self._master_address

    @property
    def tracker(self) -> ReplicaTracker | None:
        """The slaves' progress and the SYNC_MASTER gate, while serving replication."""
        return self._tracker

    @property
    def replicator(self) -> SlaveReplicator | None:
        """The stream from the master, while following one."""
        return self._replicator

    @property
    def ha_endpoint(self) -> str:
        """The replication endpoint served, host:port; "" while not serving."""
        return self._ha_endpoint

    def confirmed_offset(self) -> int:
        """Static mode's confirmed offset: what enough slaves acknowledged on a master, the log's
        end on a slave (controller mode asks `ControllerRoles.confirmed_offset`)."""
        tracker = self._tracker
        return tracker.confirmed_offset if tracker is not None else self.store.max_offset

    # -- start and stop ------------------------------------------------------------------------

    def open(self) -> None:
        """Static mode, before the store starts: a master serves replication from now on.
        (Controller mode opens with `ControllerRoles.open` instead.)"""
        if self._role is not BrokerRole.SLAVE:
            self.serve()

    def start(self) -> None:
        """Once the store runs: a static slave follows its master from now on. (In controller
        mode `role` is never SLAVE: elections decide whom to follow.)"""
        if self._role is BrokerRole.SLAVE:
            self.follow(self._master_address)

    def stop(self) -> None:
        """Shutdown: streams end, the port is given back, puts still waiting for a slave get their
        answer, the replicator stops. Blocks (a few seconds at most)."""
        if self._servicer is not None:
            self._servicer.stop()
        if self._server is not None:
            self._server.stop(grace=None)
        if self._tracker is not None:
            self._tracker.close()
        if self._replicator is not None:
            self._replicator.stop()

    # -- transitions ---------------------------------------------------------------------------

    def serve(self) -> ReplicaTracker:
        """Serve replication on haListenPort and make its tracker the store's replica gate (the
        tracker as it is when already serving). The port is bound before anything is installed: a
        failure (ConfigError) leaves everything as it was (a slave taking over stays a slave)."""
        with self.lock:
            if self._tracker is not None:
                return self._tracker
            broker, ha, store = self._configs.broker, self._configs.ha, self.store
            tracker = ReplicaTracker(
                self._role,
                ha.in_sync_replicas,
                self._configs.store.slave_timeout_ms,
                ha.ha_slave_fallbehind_max,
                lambda: store.max_offset,
            )
            server, servicer = self._new_server(tracker)
            try:
                port = bind(
                    server, broker.host, ha.ha_listen_port, self._server_credentials(), "replication", "haListenPort"
                )
            except BaseException:
                tracker.close()
                server.stop(grace=None)
                raise
            self._tracker, self._server, self._servicer = tracker, server, servicer
            store.set_replica_gate(tracker)
            self._ha_endpoint = host_port(broker.ha_host, port)
            server.start()
            return tracker

    def _new_server(self, tracker: ReplicaTracker) -> tuple[grpc.Server | LoopServer, ReplicationServicer]:
        """The replication server (not bound, not started) and its servicer over `tracker`: a
        `grpc.aio` server on the master's loop when there is one, else a threaded server."""
        broker, ha, epochs = self._configs.broker, self._configs.ha, self._epochs
        options = [("grpc.so_reuseport", 0), ("grpc.max_send_message_length", 64 * 1024 * 1024)]
        auth = MasterAuth(self._ha_secret, Identity(broker.broker_name, broker.broker_id)) if self._ha_secret else None
        servicer_class = ReplicationServicer if self._master_loop is None else LoopReplicationServicer
        servicer = servicer_class(
            self.store,
            ha,
            broker.broker_name,
            tracker,
            client_endpoint=self._client_endpoint,
            epochs=(lambda: epochs.history) if epochs is not None else None,
            auth=auth,
            take_pop_events=self._take_pop_events,
        )
        if isinstance(servicer, LoopReplicationServicer):
            assert self._master_loop is not None
            loop_server = LoopServer(self._master_loop, options=options, maximum_concurrent_rpcs=HA_MAX_STREAMS)
            loop_server.add_to(servicer)
            return loop_server, servicer
        # The servicer authenticates every replication call itself in shared-secret mode (its
        # answers are MACed under a per-call key only it can derive); the one interceptor answers
        # requests that do not decode (grpc's own answer is INTERNAL and a logged traceback each).
        server = grpc.server(
            ThreadPoolExecutor(max_workers=HA_MAX_STREAMS + 4, thread_name_prefix="ha-stream"),
            interceptors=[ThreadedMalformedRequestGuard()],
            options=options,
            maximum_concurrent_rpcs=HA_MAX_STREAMS,
        )
        servicer.add_to_server(server)
        return server, servicer

    def release(self) -> None:
        """Undo `serve` (a take-over that failed): the port is given back, the tracker closed."""
        with self.lock:
            server, tracker = self._server, self._tracker
            self._server = self._servicer = self._tracker = None
            self._ha_endpoint = ""
            if server is not None:
                server.stop(grace=None)
            if tracker is not None:
                tracker.close()

    def follow(self, master_address: str) -> None:
        """Stream from the master serving replication at `master_address` (host:port), instead
        of any master followed so far. The store must be a slave's."""
        with self.lock:
            self.stop_following()
            ha = self._configs.ha
            credentials = None
            if ha.ha_tls_ca_file:
                credentials = channel_credentials(ha.ha_tls_ca_file, ha.ha_tls_cert_file, ha.ha_tls_key_file)
            broker = self._configs.broker
            replicator_class: Callable[..., SlaveReplicator] = SlaveReplicator
            if self._slave_loop is not None:
                replicator_class = functools.partial(LoopSlaveReplicator, loop=self._slave_loop)
            replicator = replicator_class(
                self.store,
                ha,
                broker_name=broker.broker_name,
                broker_id=broker.broker_id,
                client_endpoint=self._client_endpoint,
                secret=self._ha_secret,
                channel_credentials=credentials,
                master_address=master_address,
                epochs=self._epochs,
                pop_journal=self._pop_journal,
            )
            self._replicator, self._master_address = replicator, master_address
            replicator.start()

    def stop_following(self) -> int | None:
        """Stop the replicator (blocks until its threads ended); the master's confirmed offset as
        it last reported it, or None when nothing was followed."""
        with self.lock:
            replicator, self._replicator = self._replicator, None
            if replicator is None:
                return None
            replicator.stop()
            return replicator.confirmed_offset

    def become_master(
        self,
        role: BrokerRole,
        *,
        confirmed_floor: int = 0,
        put_fence: Callable[[], str | None] | None = None,
    ) -> None:
        """Take puts as `role` (SYNC_MASTER or ASYNC_MASTER), serving replication already: the
        replicator stops, the tracker starts over for `role` with `confirmed_floor` (what the
        previous master is known to have confirmed), `put_fence` (when given) is installed, and
        the store turns master. The role in force is `role` once the store took it."""
        with self.lock:
            tracker = self._tracker
            if tracker is None:
                raise RuntimeError("become_master needs the replication server (serve) first")
            self.stop_following()
            tracker.reset(role, confirmed_floor=confirmed_floor)
            if put_fence is not None:
                # After the reset: a fence that asks the tracker must see the new role's needs.
                self.store.set_put_fence(put_fence)
            self.store.become_master(role)
            self._role, self._master_address = role, ""

    def step_down(self, reason: str, *, confirmed_floor: int = 0) -> None:
        """Stop being master: every replication stream ends (`reason` goes to the slaves), the
        tracker starts over (`confirmed_floor`), the store refuses puts. The server keeps
        serving: a controller-mode slave stays ready to be elected."""
        with self.lock:
            if self._servicer is not None:
                self._servicer.close_all(f"the master stepped down: {reason}")
            if self._tracker is not None:
                self._tracker.reset(self._role, confirmed_floor=confirmed_floor)
            self.store.become_slave()

    def become_slave(self, master_address: str, reason: str) -> None:
        """A static master's whole step down: step down, then follow `master_address` as SLAVE."""
        with self.lock:
            self.step_down(reason)
            self._role = BrokerRole.SLAVE
            self.follow(master_address)

    def _server_credentials(self) -> grpc.ServerCredentials | None:
        ha = self._configs.ha
        if not ha.ha_tls_cert_file:
            return None
        return server_credentials(ha.ha_tls_cert_file, ha.ha_tls_key_file, ha.ha_tls_ca_file)
