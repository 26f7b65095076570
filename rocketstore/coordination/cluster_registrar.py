"""`ClusterRegistrar`: keeps one broker's route record in etcd and reads everybody else's.

A thread of its own, once per tick (`interval_ms`, and at most a third of the lease's TTL so that
a keepalive never comes late):
1. keeps the broker's lease alive, granting a new one when etcd lost it (the record is then
   written again under it);
2. writes the broker's `BrokerRegistration` when it differs from the one last written (a role
   change, a new topic, brokerPermission: the next tick);
3. reads the cluster's records (one range read) into a `ClusterView`, which `view` returns.

etcd unreachable: the tick logs the first failure and the recovery (not each one) and keeps the
last view, whose `read_at_ms` then ages; callers decide how old a view they use. `stop` revokes
the lease, so the record goes at once. Records that do not decode are skipped and logged once per
key and revision: one broker's garbage does not hide the others.

Thread-safety: `view` and `refresh_now` may be called from any thread; `view` returns an immutable
value swapped whole.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from store.clock import wall_clock_ms

from .cluster_routes import BrokerRegistration, ClusterView, RegistrationError, RouteKeys
from .etcd import EtcdClient, EtcdError, LeaseNotFound

log = logging.getLogger(__name__)


class ClusterRegistrar:
    def __init__(
        self,
        etcd: EtcdClient,
        keys: RouteKeys,
        cluster: str,
        registration: Callable[[], BrokerRegistration],
        *,
        lease_ttl_s: int,
        interval_ms: int,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self._etcd = etcd
        self._keys = keys
        self._cluster = cluster
        self._registration = registration
        self._ttl_s = lease_ttl_s
        self.tick_s = min(interval_ms / 1000, lease_ttl_s / 3)
        self._clock = clock
        self._lease = 0
        self._written: bytes | None = None
        self._key = ""
        self._view = ClusterView(cluster)
        self._failing = False
        self._bad: set[tuple[str, int]] = set()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def view(self) -> ClusterView:
        return self._view

    @property
    def max_age_ms(self) -> int:
        """How old a view may be and still be used: a lease's TTL and a tick past the last read,
        the time in which a dead broker's record would have gone anyway."""
        return int(self._ttl_s * 1000 + 2 * self.tick_s * 1000)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="cluster-registrar", daemon=True)
        self._thread.start()

    def refresh_now(self) -> None:
        """Register and read on the next moment rather than the next tick (a topic was created)."""
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.tick_s + 5)
        if self._lease:
            try:
                self._etcd.lease_revoke(self._lease)
            except EtcdError as exc:
                log.warning("could not withdraw this broker's route record (it expires with its lease): %s", exc)
            self._lease = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            self.tick()
            self._wake.wait(self.tick_s)
            self._wake.clear()

    def tick(self) -> None:
        """One round: lease, record, read. Never raises for etcd's failures."""
        try:
            self._register()
            self._read()
        except EtcdError as exc:
            if not self._failing:
                log.warning("cluster registry unreachable; routes name this group only until it answers: %s", exc)
            self._failing = True
            return
        if self._failing:
            log.info("cluster registry reachable again")
        self._failing = False

    def _register(self) -> None:
        registration = self._registration()
        key = self._keys.broker(registration.broker_name, registration.broker_id)
        data = registration.to_json()
        if self._lease:
            try:
                self._etcd.lease_keepalive(self._lease)
            except LeaseNotFound:
                log.warning("this broker's registry lease expired; registering again")
                self._lease, self._written = 0, None
        if not self._lease:
            self._lease = self._etcd.lease_grant(self._ttl_s).id
            self._written = None
        if data != self._written or key != self._key:
            self._etcd.put(key, data, lease=self._lease)
            self._written, self._key = data, key

    def _read(self) -> None:
        answer = self._etcd.get_prefix(self._keys.prefix)
        now = self._clock()
        registrations = []
        for item in answer.kvs:
            try:
                registrations.append(BrokerRegistration.from_json(item.value))
            except RegistrationError as exc:
                mark = (item.key, item.mod_revision)
                if mark not in self._bad:
                    self._bad.add(mark)
                    log.error("skipping route record %s: %s", item.key, exc)
        self._view = ClusterView.from_registrations(self._cluster, registrations, now)
