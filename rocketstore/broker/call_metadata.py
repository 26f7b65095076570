"""What one client API call names: its MessagingService method (`method_of`, from the gRPC path)
and its headers, parsed once per call (`call_headers(context)`).

A gRPC call's metadata (`context.invocation_metadata()`) is a tuple of (key, value) pairs, text
values except for keys ending in `-bin`. Several readers want a few headers of the same call: the
ACL guard (`acl.py`: the signature and its date), the client sightings (`client_sightings.py`: the
client's id, language and version), the namespace check (`namespaces.py`), Telemetry and pop
receives (the client's id). The first of them to ask turns the pairs into a dict of the text
values; the others of the same call get that dict.

Where the dict is kept: grpc.aio's ServicerContext takes no attributes and no weak references, so
the dict goes into a context variable of the task running the call (grpc.aio runs each call's
interceptors and handler in one task), paired with the context it was read from. A reader is
handed the dict only for that same context object, so code that handles several calls in one
task (tests driving a servicer directly) never reads another call's headers.

Thread-safety: each task has its own context variables; the dict is not modified once made.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar

SERVICE = "/apache.rocketmq.v2.MessagingService/"

_CALL: ContextVar[tuple[object, Mapping[str, str]] | None] = ContextVar("rocketstore_call_headers", default=None)


def method_of(path: str) -> str | None:
    """The MessagingService method a gRPC path names ("/apache.rocketmq.v2.MessagingService/X"),
    None for any other service."""
    if not path.startswith(SERVICE):
        return None
    return path[len(SERVICE) :]


def parse_headers(pairs) -> dict[str, str]:
    """The text-valued headers of a call's metadata pairs (binary `-bin` values left out)."""
    return {key: value for key, value in pairs or () if isinstance(value, str)}


def call_headers(context) -> Mapping[str, str]:
    """The text-valued headers of the call `context` serves, parsed at the call's first ask."""
    cached = _CALL.get()
    if cached is not None and cached[0] is context:
        return cached[1]
    headers = parse_headers(context.invocation_metadata())
    _CALL.set((context, headers))
    return headers
