"""harness.ports: ports reserved for servers started later come from below the ephemeral range,
are free when picked, and are never one that is taken or already picked."""

from __future__ import annotations

import socket

import pytest

from harness import ports


def test_a_port_for_later_is_below_the_ephemeral_range_and_free():
    low = ports.ephemeral_low()
    port = ports.port_for_later()
    assert 1024 <= port < low
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # free: a server can take it


def test_a_taken_port_or_one_to_avoid_is_never_returned(monkeypatch):
    port = ports.port_for_later()
    # Narrow the candidates to that one port.
    monkeypatch.setattr(ports, "ephemeral_low", lambda: port + 1)
    monkeypatch.setattr(ports, "_SPAN", 1)
    assert ports.port_for_later() == port
    with pytest.raises(RuntimeError, match="no free port"):
        ports.port_for_later(avoid=(port,))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        with pytest.raises(RuntimeError, match="no free port"):
            ports.port_for_later()
