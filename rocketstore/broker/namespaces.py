"""Namespaces on the client API: refused, clearly, on every call.

RocketMQ 5 isolates namespaces by qualifying every resource with its namespace (topics, groups,
their offsets, retry and dead-letter topics, routes, admin views). This broker does not: a topic
or group is known by its name alone. Rather than echo a namespace back while two namespaces share
everything (issue 32 item 4), a call that names one is refused UNSUPPORTED with the namespace in
the message, before it reads or writes anything.

A call names a namespace through the `x-mq-namespace` header (the official clients send it on
every call, empty without one) or a `resource_namespace` of the resources it carries (its topic,
group, message queue's topic, or a sent message's topic). An empty namespace is no namespace.

Thread-safety: pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping

from wire.rpc import messaging_pb2 as pb

NAMESPACE_HEADER = "x-mq-namespace"


def _resources(request) -> list[pb.Resource]:
    found = []
    for name in ("topic", "group"):
        if request.DESCRIPTOR.fields_by_name.get(name) is not None and request.HasField(name):
            found.append(getattr(request, name))
    if request.DESCRIPTOR.fields_by_name.get("message_queue") is not None and request.HasField("message_queue"):
        found.append(request.message_queue.topic)
    if request.DESCRIPTOR.fields_by_name.get("messages") is not None:
        found.extend(m.topic for m in request.messages)
    return found


def requested_namespace(headers: Mapping[str, str], request=None) -> str:
    """The namespace a call names (its header's, else its resources'); "" for none. `headers`:
    the call's text headers (`call_metadata.call_headers`)."""
    namespace = headers.get(NAMESPACE_HEADER, "")
    if namespace:
        return namespace
    if request is not None:
        for resource in _resources(request):
            if resource.resource_namespace:
                return resource.resource_namespace
    return ""


def namespace_refusal(headers: Mapping[str, str], request=None) -> pb.Status | None:
    """UNSUPPORTED naming the namespace a call names; None for a call without one."""
    namespace = requested_namespace(headers, request)
    if not namespace:
        return None
    return pb.Status(
        code=pb.UNSUPPORTED,
        message=(
            f"namespace {namespace!r} is not supported: this broker does not isolate namespaces; "
            "connect without a namespace (topics and groups are shared by every client)"
        ),
    )
