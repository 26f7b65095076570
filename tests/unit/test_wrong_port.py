"""A call that reached the wrong port of a broker is named for what it reached (wire.ports), in the
client's errors and in a slave's replication errors; gRPC's words as the real servers say them
(measured against a broker's metrics, remoting and replication ports)."""

from __future__ import annotations

import grpc
import pytest

from client.errors import BrokerError, TransportError, from_rpc_error
from slave.rpc_failure import describe
from support import FakeRpcError
from wire.ports import wrong_port

E = "127.0.0.1:10914"
HTTP1 = (
    "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:10914: Failed parsing HTTP/2 "
    "(Expected SETTINGS frame as the first frame, got frame type 79)"
)
CLOSED = "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:10913: Socket closed"
NO_METHOD = "Method not found!"
REFUSED = (
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:10999: Failed to connect to remote "
    "host: Connection refused"
)


@pytest.mark.parametrize(
    "code, details, names",
    [
        ("UNAVAILABLE", HTTP1, ("metrics port (metricsPort)", "on the broker's listenPort")),
        ("UNAVAILABLE", CLOSED, ("remoting port (remotingListenPort)", "listenPort", "--tls-ca-file")),
        ("UNIMPLEMENTED", NO_METHOD, ("replication port (haListenPort)", "on its listenPort")),
    ],
)
def test_each_wrong_port_is_named_with_the_key_to_use(code, details, names):
    hint = wrong_port(code, details, E)
    assert hint is not None and hint.startswith(E)
    assert all(name in hint for name in names), hint


@pytest.mark.parametrize(
    "code, details", [("UNAVAILABLE", REFUSED), ("DEADLINE_EXCEEDED", "Deadline Exceeded"), ("UNIMPLEMENTED", "no")]
)
def test_failures_that_say_nothing_of_a_port_get_no_hint(code, details):
    assert wrong_port(code, details, E) is None


def test_the_clients_errors_carry_the_hint():
    error = from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, HTTP1), E)
    assert isinstance(error, TransportError) and error.code == "UNAVAILABLE"
    assert str(error).startswith(f"{E} answers HTTP/1, not gRPC") and "metricsPort" in error.hint
    assert "Failed parsing HTTP/2" in str(error)  # gRPC's own words stay, after the explanation
    unimplemented = from_rpc_error(FakeRpcError(grpc.StatusCode.UNIMPLEMENTED, NO_METHOD), E)
    assert isinstance(unimplemented, BrokerError) and "haListenPort" in unimplemented.message
    refused = from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, REFUSED), E)
    assert refused.hint == "" and str(refused) == f"cannot reach the broker at {E} (UNAVAILABLE): {REFUSED}"


def test_a_slave_given_its_masters_client_port_is_told_so():
    code, text = describe(FakeRpcError(grpc.StatusCode.UNIMPLEMENTED, NO_METHOD), address="127.0.0.1:10911")
    assert code is grpc.StatusCode.UNIMPLEMENTED
    assert text.startswith("haMasterAddress 127.0.0.1:10911 speaks gRPC but not replication")
    assert "client port (listenPort)" in text and "haListenPort" in text
    # Without the address (callers that do not name it), the words stay gRPC's.
    assert describe(FakeRpcError(grpc.StatusCode.UNIMPLEMENTED, NO_METHOD))[1] == "UNIMPLEMENTED: Method not found!"
