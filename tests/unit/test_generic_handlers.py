"""`wire.generic_handlers.generic_only`: a generated `add_*_to_server` through it registers the
generic handler and no registered methods (a grpc.aio server awaits one pending request per
registered method for every call it accepts), and that generic handler serves every method."""

from __future__ import annotations

import grpc

from wire.generic_handlers import generic_only
from wire.rpc import admin_pb2_grpc, messaging_pb2, messaging_pb2_grpc


class RecordingServer:
    def __init__(self) -> None:
        self.generic: list[grpc.GenericRpcHandler] = []
        self.registered: list[str] = []

    def add_generic_rpc_handlers(self, handlers) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(self, service: str, handlers) -> None:
        self.registered.append(service)


class Details(grpc.HandlerCallDetails):
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


def test_generated_registration_through_it_adds_the_generic_handler_only():
    server = RecordingServer()
    messaging_pb2_grpc.add_MessagingServiceServicer_to_server(
        messaging_pb2_grpc.MessagingServiceServicer(), generic_only(server)
    )
    admin_pb2_grpc.add_AdminServicer_to_server(admin_pb2_grpc.AdminServicer(), generic_only(server))
    assert server.registered == [] and len(server.generic) == 2
    # Without it the generated code registers both ways (what this module takes away).
    direct = RecordingServer()
    messaging_pb2_grpc.add_MessagingServiceServicer_to_server(messaging_pb2_grpc.MessagingServiceServicer(), direct)
    assert direct.registered == ["apache.rocketmq.v2.MessagingService"]


def test_the_generic_handler_serves_every_method_of_the_service():
    server = RecordingServer()
    messaging_pb2_grpc.add_MessagingServiceServicer_to_server(
        messaging_pb2_grpc.MessagingServiceServicer(), generic_only(server)
    )
    (handler,) = server.generic
    methods = [m.name for m in messaging_pb2.DESCRIPTOR.services_by_name["MessagingService"].methods]
    assert "SendMessage" in methods and len(methods) > 10
    for method in methods:
        assert handler.service(Details(f"/apache.rocketmq.v2.MessagingService/{method}")) is not None, method
    assert handler.service(Details("/apache.rocketmq.v2.MessagingService/NoSuchMethod")) is None
