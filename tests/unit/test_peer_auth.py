"""Mutual authentication of master and slave (ha/peer_auth.py): proofs, single-use nonces,
session keys bound to both identities, and message MACs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ha.peer_auth import (
    CHUNK,
    METADATA,
    REPORT,
    AuthenticationError,
    HelloAnswer,
    Identity,
    MasterAuth,
    NonceTable,
    PeerSession,
    SlaveAuth,
    chunk_parts,
    metadata_parts,
    report_parts,
    session_key,
)
from wire.rpc import ha_pb2

SECRET = b"0123456789abcdef-replication-secret"
OTHER = b"another-secret-of-enough-length"
MASTER = Identity("broker-a", 0)
SLAVE = Identity("broker-a", 1)
METHOD = "/rocketstore.ha.v1.Replication/Replicate"
NOW = 1_700_000_000_000


def hello(master: MasterAuth, slave: SlaveAuth, now_ms: int = NOW) -> tuple[bytes, HelloAnswer]:
    nonce = slave.client_nonce()
    return nonce, master.hello(nonce, slave.slave, now_ms)


def test_both_sides_derive_one_session_and_the_header_authenticates_once():
    master, slave = MasterAuth(SECRET, MASTER), SlaveAuth(SECRET, SLAVE)
    nonce, answer = hello(master, slave)
    slave_session, header = slave.verify(nonce, answer, METHOD)
    master_session = master.authenticate(header, METHOD, NOW + 5)
    assert master_session.peer == SLAVE and slave_session.peer == MASTER
    mac = slave_session.seal(REPORT, (7, 1), (b"x",))
    master_session.open(REPORT, mac, (7, 1), (b"x",))
    with pytest.raises(AuthenticationError, match="already used"):
        master.authenticate(header, METHOD, NOW + 6)


def test_a_master_without_the_secret_cannot_prove_itself():
    fake, slave = MasterAuth(OTHER, MASTER), SlaveAuth(SECRET, SLAVE)
    nonce, answer = hello(fake, slave)
    with pytest.raises(AuthenticationError, match="failed to prove"):
        slave.verify(nonce, answer, METHOD)
    # Nor by replaying a genuine answer given to another nonce.
    real = MasterAuth(SECRET, MASTER)
    _, genuine = hello(real, slave)
    with pytest.raises(AuthenticationError, match="failed to prove"):
        slave.verify(slave.client_nonce(), genuine, METHOD)


def test_a_master_of_another_group_is_refused_even_with_the_secret():
    other_group, slave = MasterAuth(SECRET, Identity("broker-b", 0)), SlaveAuth(SECRET, SLAVE)
    nonce, answer = hello(other_group, slave)
    with pytest.raises(AuthenticationError, match="not a master of 'broker-a'"):
        slave.verify(nonce, answer, METHOD)


def test_a_header_is_bound_to_its_method_and_to_the_master_that_issued_its_nonce():
    master, slave = MasterAuth(SECRET, MASTER), SlaveAuth(SECRET, SLAVE)
    nonce, answer = hello(master, slave)
    _, header = slave.verify(nonce, answer, METHOD)
    with pytest.raises(AuthenticationError, match="unknown"):
        MasterAuth(SECRET, MASTER).authenticate(header, METHOD, NOW)  # another process: never issued
    with pytest.raises(AuthenticationError, match="bad signature"):
        master.authenticate(header, "/rocketstore.ha.v1.Replication/GetMetadata", NOW)
    # The refused attempt consumed the nonce: the captured header is worth nothing afterwards.
    with pytest.raises(AuthenticationError, match="already used"):
        master.authenticate(header, METHOD, NOW)


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (None, "no credentials"),
        ("", "no credentials"),
        ("v1 1700000000000 abcdefgh 00", "needs v2 credentials"),
        ("v2 zz 00", "malformed"),
        ("v2 00", "malformed"),
    ],
)
def test_malformed_and_old_style_headers_are_refused(header, reason):
    with pytest.raises(AuthenticationError, match=reason):
        MasterAuth(SECRET, MASTER).authenticate(header, METHOD, NOW)


def test_nonces_expire_and_the_table_is_bounded():
    table = NonceTable(ttl_ms=1000, capacity=3)
    for i in range(5):
        table.issue(bytes([i]) * 32, b"c" * 32, SLAVE, NOW + i)
    assert len(table) == 3
    assert table.take(bytes([0]) * 32, NOW + 5) is None  # pushed out by newer ones
    assert table.take(bytes([4]) * 32, NOW + 5) is not None
    assert table.take(bytes([4]) * 32, NOW + 5) is None  # single use
    assert table.take(bytes([3]) * 32, NOW + 1004) is None  # expired


def test_a_hello_with_a_malformed_nonce_is_refused():
    with pytest.raises(ValueError, match="32 bytes"):
        MasterAuth(SECRET, MASTER).hello(b"short", SLAVE, NOW)


def test_the_session_key_binds_both_identities():
    cn, sn = b"c" * 32, b"s" * 32
    keys = {
        session_key(SECRET, cn, sn, MASTER, SLAVE),
        session_key(SECRET, cn, sn, MASTER, Identity("broker-a", 2)),
        session_key(SECRET, cn, sn, Identity("broker-a", 3), SLAVE),
        session_key(SECRET, cn, sn, Identity("broker-a1", 0), Identity("", 1)),
    }
    assert len(keys) == 4


def _pair() -> tuple[PeerSession, PeerSession]:
    key = b"k" * 32
    return PeerSession(key, MASTER), PeerSession(key, SLAVE)


def _chunk(**fields) -> ha_pb2.Chunk:
    values = dict(
        start_offset=4096,
        data=b"record-bytes" * 20,
        master_max_offset=9000,
        epoch=2,
        checksum=12345,
        confirmed_offset=4000,
        segment_size=1 << 20,
        master_client_endpoint="127.0.0.1:8081",
        epoch_start_offset=1024,
    )
    values.update(fields)
    return ha_pb2.Chunk(**values)


@given(
    field=st.sampled_from(
        [
            "start_offset",
            "master_max_offset",
            "epoch",
            "checksum",
            "confirmed_offset",
            "segment_size",
            "epoch_start_offset",
            "data",
            "master_client_endpoint",
        ]
    ),
    flip=st.integers(min_value=0, max_value=239),
)
def test_any_altered_chunk_field_fails_its_mac(field, flip):
    sender, receiver = _pair()
    chunk = _chunk()
    chunk.mac = sender.seal(CHUNK, *chunk_parts(chunk))
    original = getattr(chunk, field)
    if isinstance(original, bytes):
        altered = bytearray(original)
        altered[flip % len(altered)] ^= 0x01
        setattr(chunk, field, bytes(altered))
    elif isinstance(original, str):
        setattr(chunk, field, original + "x")
    else:
        setattr(chunk, field, original + 1 + flip)
    with pytest.raises(AuthenticationError, match="failed its MAC"):
        receiver.open(CHUNK, chunk.mac, *chunk_parts(chunk))


def test_messages_cannot_be_replayed_or_reordered_or_moved_between_kinds():
    sender, receiver = _pair()
    first, second = _chunk(start_offset=0), _chunk(start_offset=240)
    first.mac = sender.seal(CHUNK, *chunk_parts(first))
    second.mac = sender.seal(CHUNK, *chunk_parts(second))
    with pytest.raises(AuthenticationError):
        receiver.open(CHUNK, second.mac, *chunk_parts(second))  # out of order
    receiver.open(CHUNK, first.mac, *chunk_parts(first))
    with pytest.raises(AuthenticationError):
        receiver.open(CHUNK, first.mac, *chunk_parts(first))  # replayed
    receiver.open(CHUNK, second.mac, *chunk_parts(second))
    report = ha_pb2.SlaveReport(durable_offset=5, broker_name="broker-a", broker_id=1)
    report.mac = sender.seal(REPORT, *report_parts(report))
    with pytest.raises(AuthenticationError):
        receiver.open(METADATA, report.mac, *metadata_parts(ha_pb2.MetadataResponse()))
    receiver.open(REPORT, report.mac, *report_parts(report))


def test_reprs_hold_no_secret():
    for thing in (MasterAuth(SECRET, MASTER), SlaveAuth(SECRET, SLAVE)):
        assert SECRET.decode() not in repr(thing)
