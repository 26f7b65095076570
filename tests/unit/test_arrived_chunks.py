"""slave/arrived_chunks.py against grpc's own sync call object, its transport replaced by a
recorder of the operations it is asked to start (no sockets: the test completes them)."""

from __future__ import annotations

import threading

import grpc
import pytest
from grpc import _channel as grpc_channel
from grpc._cython import cygrpc

from slave.arrived_chunks import ArrivedChunks
from wire.rpc import ha_pb2

RECEIVE = cygrpc.OperationType.receive_message
STATUS = cygrpc.OperationType.receive_status_on_client


class ReceivedMessage:
    """A completed receive operation as grpc's event handling reads it."""

    def __init__(self, message: bytes | None) -> None:
        self._message = message

    def type(self):
        return RECEIVE

    def message(self) -> bytes | None:
        return self._message


class Completion:
    def __init__(self, message: bytes | None) -> None:
        self.batch_operations = (ReceivedMessage(message),)


class Transport:
    """Stands for gRPC core under one call: records each operation started and its tag."""

    def __init__(self) -> None:
        self.started: list[object] = []
        self.cancelled = False

    def operate(self, operations, tag) -> bool:
        assert len(operations) == 1
        self.started.append(tag)
        return True

    def cancel(self, code, details) -> None:
        self.cancelled = True

    def complete(self, message: bytes | None) -> bool:
        """Complete the oldest outstanding receive (as gRPC's channel-spin thread does)."""
        return self.started.pop(0)(Completion(message))


def make_call() -> tuple[grpc_channel._MultiThreadedRendezvous, Transport]:
    state = grpc_channel._RPCState((STATUS,), None, None, None, None)
    transport = Transport()
    return grpc_channel._MultiThreadedRendezvous(state, transport, ha_pb2.Chunk.FromString, None), transport


def chunk(offset: int, size: int = 100) -> bytes:
    return ha_pb2.Chunk(start_offset=offset, data=bytes(size)).SerializeToString()


def end_call(call, code: grpc.StatusCode) -> None:
    """The call's status arrives (what grpc's own handler of it does to the state)."""
    with call._state.condition:
        call._state.due.discard(STATUS)
        call._state.code = code
        call._state.condition.notify_all()


def test_everything_received_is_taken_at_once_in_order():
    call, transport = make_call()
    arrived = ArrivedChunks.attach(call, limit_bytes=1 << 20)
    assert arrived is not None
    for offset in (0, 100, 200):
        assert len(transport.started) == 1  # one receive outstanding at a time
        assert transport.complete(chunk(offset)) is False  # the call goes on
    assert arrived.pending == 3
    assert [c.start_offset for c in arrived.take()] == [0, 100, 200]
    assert arrived.pending == 0
    assert len(transport.started) == 1
    transport.complete(chunk(300))
    assert [c.start_offset for c in arrived.take()] == [300]


def test_a_full_queue_starts_no_receive_until_it_is_taken():
    call, transport = make_call()
    arrived = ArrivedChunks(call, limit_bytes=250)
    transport.complete(chunk(0))
    transport.complete(chunk(100))
    transport.complete(chunk(200))  # 300 bytes held: past the limit
    assert transport.started == []
    assert len(arrived.take()) == 3
    assert len(transport.started) == 1


def test_take_waits_for_the_first_chunk():
    call, transport = make_call()
    arrived = ArrivedChunks(call, limit_bytes=1 << 20)
    taken: list = []
    taker = threading.Thread(target=lambda: taken.extend(arrived.take()))
    taker.start()
    transport.complete(chunk(0))
    taker.join(30)
    assert not taker.is_alive()
    assert [c.start_offset for c in taken] == [0]


def test_a_stream_ended_ok_gives_what_was_queued_then_nothing():
    call, transport = make_call()
    arrived = ArrivedChunks(call, limit_bytes=1 << 20)
    transport.complete(chunk(0))
    assert transport.complete(None) is False  # no more messages; the status is still due
    assert transport.started == []  # nothing more is asked for
    end_call(call, grpc.StatusCode.OK)
    assert [c.start_offset for c in arrived.take()] == [0]
    assert arrived.take() == []


def test_a_failed_stream_raises_the_call_as_next_does():
    call, transport = make_call()
    arrived = ArrivedChunks(call, limit_bytes=1 << 20)
    transport.complete(chunk(0))
    end_call(call, grpc.StatusCode.UNAVAILABLE)
    with pytest.raises(grpc.RpcError) as failure:
        arrived.take()
    assert failure.value is call and call.code() is grpc.StatusCode.UNAVAILABLE
    # The outstanding receive still completes (no message) and reports the call done.
    assert transport.complete(None) is True


def test_a_cancelled_call_stops_a_waiting_take():
    call, transport = make_call()
    arrived = ArrivedChunks(call, limit_bytes=1 << 20)
    failures: list = []

    def take() -> None:
        try:
            arrived.take()
        except grpc.RpcError as exc:
            failures.append(exc)

    taker = threading.Thread(target=take)
    taker.start()
    assert call.cancel() and transport.cancelled
    taker.join(30)
    assert not taker.is_alive()
    assert failures == [call] and call.code() is grpc.StatusCode.CANCELLED


def test_a_call_object_of_another_shape_is_not_attached():
    assert ArrivedChunks.attach(iter([]), limit_bytes=1) is None
    call, _ = make_call()
    with pytest.raises(ValueError, match="limit_bytes"):
        ArrivedChunks(call, limit_bytes=0)
