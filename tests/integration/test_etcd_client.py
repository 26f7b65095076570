"""rocketstore.coordination.etcd against a real etcd on 127.0.0.1 (Debian's etcd-server)."""

from __future__ import annotations

import socket
import time

import pytest

from harness.local_etcd import EtcdServer
from rocketstore.coordination import Compare, Delete, EtcdClient, EtcdError, EtcdUnavailable, Get, LeaseNotFound, Put


@pytest.fixture
def clients():
    made: list[EtcdClient] = []

    def make(endpoints: str, **kwargs) -> EtcdClient:
        made.append(EtcdClient(endpoints, **kwargs))
        return made[-1]

    yield make
    for client in made:
        client.close()


def test_keys_prefixes_and_transactions(etcd, clients):
    c = clients(etcd.endpoint)
    assert c.get("/g/a") is None
    rev = c.put("/g/a", b"1")
    c.put("/g/b", b"2")
    c.put("/h", b"3")
    kv = c.get("/g/a")
    assert kv.value == b"1" and kv.mod_revision == rev and kv.create_revision == rev
    assert [k.key for k in c.get_prefix("/g/").kvs] == ["/g/a", "/g/b"]
    # Compare-and-swap: only the transaction that saw the current revision wins.
    won = c.txn([Compare.mod_revision("/g/a", rev)], [Put("/g/a", b"new")], [Get("/g/a")])
    lost = c.txn([Compare.mod_revision("/g/a", rev)], [Put("/g/a", b"late")], [Get("/g/a")])
    assert won.succeeded and not lost.succeeded
    assert lost.ranges[0].kvs[0].value == b"new"
    assert c.txn([Compare.absent("/g/c")], [Put("/g/c", b"x")]).succeeded
    assert not c.txn([Compare.absent("/g/c")], [Put("/g/c", b"y")]).succeeded
    assert c.txn([Compare.value_is("/g/c", b"x")], [Delete("/g/", prefix=True)]).succeeded
    assert c.get_prefix("/g/").kvs == () and c.get("/h").value == b"3"


def test_leases_bind_keys_and_expire(etcd, clients):
    c = clients(etcd.endpoint)
    lease = c.lease_grant(1)
    assert lease.ttl_s >= 1  # etcd raises short TTLs to its minimum (2 s with default timings)
    c.put("/l/k", b"v", lease=lease.id)
    assert c.get("/l/k").lease == lease.id
    assert c.lease_keepalive(lease.id) == lease.ttl_s
    assert c.txn([Compare.lease("/l/k", lease.id)], [Put("/l/other", b"x")]).succeeded
    c.lease_revoke(lease.id)
    assert c.get("/l/k") is None
    with pytest.raises(LeaseNotFound):
        c.lease_keepalive(lease.id)
    c.lease_revoke(lease.id)  # a lease already gone is not an error
    short = c.lease_grant(1)
    c.put("/l/short", b"v", lease=short.id)
    deadline = time.monotonic() + short.ttl_s + 5
    while c.get("/l/short") is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert c.get("/l/short") is None and c.lease_time_to_live(short.id) == -1


def test_unavailable_within_the_timeout_then_back_and_failover_between_endpoints(etcd, clients):
    c = clients(etcd.endpoint, timeout_s=0.5)
    c.put("/u", b"1")
    etcd.stop()
    started = time.monotonic()
    with pytest.raises(EtcdUnavailable):
        c.get("/u")
    assert time.monotonic() - started < 2
    etcd.restart()
    assert c.get("/u").value == b"1"
    with socket.socket() as s:  # a closed port on 127.0.0.1 comes first
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    both = clients(f"http://127.0.0.1:{closed};{etcd.endpoint}", timeout_s=0.5)
    assert both.get("/u").value == b"1"
    with pytest.raises(ValueError):
        EtcdClient("ftp://nowhere:1")


def test_password_authentication(etcd, clients):
    etcd.enable_auth("s3cret-password-for-tests")
    anonymous = clients(etcd.endpoint)
    with pytest.raises(EtcdError) as refused:
        anonymous.put("/a", b"1")
    assert "user name is empty" in str(refused.value) or "permission denied" in str(refused.value)
    with pytest.raises(EtcdError):
        clients(etcd.endpoint, user="root", password="wrong").put("/a", b"1")
    good = clients(etcd.endpoint, user="root", password="s3cret-password-for-tests")
    good.put("/a", b"1")
    assert good.get("/a").value == b"1"
    good._token = "expired-token"  # etcd answers "invalid auth token": the client logs in again
    assert good.get("/a").value == b"1"
    assert "s3cret" not in repr(good)


def test_tls_with_client_certificates(tmp_path, clients):
    from pki_support import make_ca, make_cert

    pki = tmp_path / "pki"
    make_ca(pki, "ca")
    make_ca(pki, "other-ca")
    for name, ca in (("server", "ca"), ("broker", "ca"), ("intruder", "other-ca")):
        make_cert(pki, ca, name)
    server = EtcdServer(tmp_path / "etcd", tls=(str(pki / "server.crt"), str(pki / "server.key"), str(pki / "ca.crt")))
    server.client_options = {
        "ca_file": str(pki / "ca.crt"),
        "cert_file": str(pki / "broker.crt"),
        "key_file": str(pki / "broker.key"),
    }
    server.start()
    try:
        assert server.endpoint.startswith("https://")
        good = clients(server.endpoint, **server.client_options)
        good.put("/t", b"x")
        assert good.get("/t").value == b"x"
        intruder = clients(
            server.endpoint,
            ca_file=str(pki / "ca.crt"),
            cert_file=str(pki / "intruder.crt"),
            key_file=str(pki / "intruder.key"),
            timeout_s=1,
        )
        with pytest.raises(EtcdUnavailable):
            intruder.get("/t")
        untrusting = clients(server.endpoint, timeout_s=1)  # the system CAs do not know our CA
        with pytest.raises(EtcdUnavailable):
            untrusting.get("/t")
    finally:
        server.stop()
