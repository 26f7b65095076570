"""`ConsumerConnections`: which connection a consumer client belongs to, and what a closed one
takes with it."""

from __future__ import annotations

from rocketstore.broker.remoting_members import ConsumerConnections


def test_a_closed_connection_takes_its_clients_but_not_one_that_moved_to_another():
    members: ConsumerConnections[str] = ConsumerConnections()
    members.heard("conn-1", "a", ["g1", "g2"])
    members.heard("conn-1", "b", ["g1"])
    members.heard("conn-2", "c", ["g1"])
    assert members.connection_of("a") == "conn-1" and members.groups_of("a") == {"g1", "g2"}
    # b reconnected: its old connection closing must not remove it.
    members.heard("conn-3", "b", ["g1"])
    assert members.lost("conn-1") == {"a": frozenset({"g1", "g2"})}
    assert members.connection_of("a") is None and members.connection_of("b") == "conn-3"
    assert members.lost("conn-1") == {}
    members.forget("c")
    assert members.lost("conn-2") == {} and members.groups_of("c") == frozenset()
    assert members.lost("conn-3") == {"b": frozenset({"g1"})}
