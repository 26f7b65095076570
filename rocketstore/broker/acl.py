"""Access control of the client API (`aclEnable`, `aclFile`): who may call, and on which topics and
groups, with RocketMQ's plain-ACL model.

The file is JSON, mode 600 (it holds secret keys):

    {"accounts": [
        {"accessKey": "app", "secretKey": "...", "admin": false,
         "defaultTopicPerm": "DENY", "defaultGroupPerm": "SUB",
         "topicPerms": ["Orders=PUB|SUB", "Audit=SUB"], "groupPerms": ["billing=SUB"]}
    ]}

Permissions are DENY, PUB, SUB or PUB|SUB; a topic or group without an entry has the account's
default (RocketMQ's defaults: topics DENY, groups SUB). An admin account may do everything.

Every call must be signed (`wire.client_signature`). A call without a valid signature is answered
UNAUTHORIZED; a signed call the account may not make is answered FORBIDDEN, naming the topic or
group and the permission it lacks. What each method needs:

| method | needs |
|---|---|
| SendMessage | PUB on every message's topic |
| EndTransaction | PUB on the topic |
| PullMessage, GetOffset, UpdateOffset | SUB on the topic and on the group |
| QueryAssignment, ReceiveMessage, AckMessage | SUB on the topic and on the group |
| ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue | SUB on the topic and on the group |
| QueryOffset | SUB on the topic |
| QueryRoute, Heartbeat, Telemetry, NotifyClientTermination | a valid signature |
| a Telemetry settings command (each) | PUB on every topic it publishes; SUB on its subscription's group and topics |
| any other method | an admin account |

A Telemetry stream is checked command by command (`AclGuard.telemetry_check`, which the servicer
calls, as RocketMQ's proxy checks each command): a producer announcing a topic it may not publish
to would otherwise receive that topic's transaction check-backs, message bodies included.

`AclGuard` is the grpc.aio server interceptor that applies it to `apache.rocketmq.v2.MessagingService`
(the admin API has its own signature, `wire.admin_auth`). The model and the decisions are plain values;
thread-safe.
"""

from __future__ import annotations

import enum
import inspect
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from wire import client_signature
from wire.rpc import messaging_pb2 as pb

from .call_metadata import call_headers, method_of


class Perm(enum.IntFlag):
    DENY = 0
    PUB = 1
    SUB = 2


def parse_perm(text: str, where: str) -> Perm:
    names = [t.strip().upper() for t in text.split("|")]
    if names == ["DENY"]:
        return Perm.DENY
    perm = Perm.DENY
    for name in names:
        if name not in ("PUB", "SUB"):
            raise ValueError(f"{where}: permission {text!r} is not DENY, PUB, SUB or PUB|SUB")
        perm |= Perm[name]
    return perm


def _perm_table(entries: object, where: str) -> dict[str, Perm]:
    if not isinstance(entries, list):
        raise ValueError(f'{where} must be a list of "name=PERM" strings')
    table: dict[str, Perm] = {}
    for entry in entries:
        name, sep, perm = str(entry).partition("=")
        if not sep or not name.strip():
            raise ValueError(f'{where}: {entry!r} is not "name=PERM"')
        table[name.strip()] = parse_perm(perm, f"{where} {name.strip()}")
    return table


@dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str = field(repr=False)
    admin: bool = False
    default_topic_perm: Perm = Perm.DENY
    default_group_perm: Perm = Perm.SUB
    topic_perms: Mapping[str, Perm] = field(default_factory=dict)
    group_perms: Mapping[str, Perm] = field(default_factory=dict)

    def may(self, kind: str, name: str, perm: Perm) -> bool:
        if self.admin:
            return True
        table, default = (
            (self.topic_perms, self.default_topic_perm)
            if kind == "topic"
            else (self.group_perms, self.default_group_perm)
        )
        return perm in table.get(name, default)


@dataclass(frozen=True)
class AclConfig:
    accounts: Mapping[str, Account]

    @classmethod
    def from_document(cls, doc: object, source: str) -> AclConfig:
        if not isinstance(doc, dict) or not isinstance(doc.get("accounts"), list):
            raise ValueError(f'{source}: expected an object with an "accounts" list')
        accounts: dict[str, Account] = {}
        for i, raw in enumerate(doc["accounts"]):
            where = f"{source}: accounts[{i}]"
            if not isinstance(raw, dict):
                raise ValueError(f"{where} is not an object")
            ak, sk = raw.get("accessKey"), raw.get("secretKey")
            if not isinstance(ak, str) or not ak or not isinstance(sk, str) or len(sk) < 8:
                raise ValueError(f"{where} needs an accessKey and a secretKey of at least 8 characters")
            if ak in accounts:
                raise ValueError(f"{where}: access key {ak!r} appears twice")
            accounts[ak] = Account(
                ak,
                sk,
                admin=raw.get("admin") is True,
                default_topic_perm=parse_perm(str(raw.get("defaultTopicPerm", "DENY")), f"{where} defaultTopicPerm"),
                default_group_perm=parse_perm(str(raw.get("defaultGroupPerm", "SUB")), f"{where} defaultGroupPerm"),
                topic_perms=_perm_table(raw.get("topicPerms", []), f"{where} topicPerms"),
                group_perms=_perm_table(raw.get("groupPerms", []), f"{where} groupPerms"),
            )
        if not accounts:
            raise ValueError(f"{source}: no accounts: nobody could use the client API")
        return cls(accounts)


def load_acl(path: str) -> AclConfig:
    """The ACL file; ValueError naming the problem (a mode other users may read included)."""
    mode = os.stat(path).st_mode
    if mode & 0o077:
        raise ValueError(f"the ACL file {path} is accessible by group or others (mode {mode & 0o777:o}): chmod 600 it")
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"the ACL file {path} is not JSON: {exc}") from None
    return AclConfig.from_document(doc, path)


# -- decisions ------------------------------------------------------------------------------------

Need = list[tuple[str, str, Perm]]  # (kind "topic"|"group", name, permission)

_AUTHENTICATED_ONLY = frozenset({"QueryRoute", "Heartbeat", "Telemetry", "NotifyClientTermination"})


def _telemetry_needs(command: pb.TelemetryCommand) -> Need:
    if command.WhichOneof("command") != "settings":
        return []
    settings = command.settings
    wanted: Need = [("topic", t.name, Perm.PUB) for t in settings.publishing.topics]
    if settings.HasField("subscription"):
        subscription = settings.subscription
        wanted.append(("group", subscription.group.name, Perm.SUB))
        wanted.extend(("topic", entry.topic.name, Perm.SUB) for entry in subscription.subscriptions)
    return wanted


def needs(method: str, request: object) -> Need | None:
    """What `method` needs on which resources; None: only an admin may call it. For Telemetry,
    `request` is one command of the stream (None: the stream itself)."""
    if method == "Telemetry" and isinstance(request, pb.TelemetryCommand):
        return _telemetry_needs(request)
    if method in _AUTHENTICATED_ONLY:
        return []
    if method == "SendMessage" and isinstance(request, pb.SendMessageRequest):
        return [("topic", m.topic.name, Perm.PUB) for m in request.messages]
    if method in ("QueryAssignment", "AckMessage", "ChangeInvisibleDuration", "ForwardMessageToDeadLetterQueue"):
        topic, group = getattr(request, "topic", None), getattr(request, "group", None)
        if topic is None or group is None:
            return None
        return [("topic", topic.name, Perm.SUB), ("group", group.name, Perm.SUB)]
    if method in ("PullMessage", "GetOffset", "UpdateOffset", "ReceiveMessage"):
        queue, group = getattr(request, "message_queue", None), getattr(request, "group", None)
        if queue is None or group is None:
            return None
        return [("topic", queue.topic.name, Perm.SUB), ("group", group.name, Perm.SUB)]
    if method == "EndTransaction" and isinstance(request, pb.EndTransactionRequest):
        return [("topic", request.topic.name, Perm.PUB)]
    if method == "QueryOffset" and isinstance(request, pb.QueryOffsetRequest):
        return [("topic", request.message_queue.topic.name, Perm.SUB)]
    return None


def decide(acl: AclConfig, method: str, metadata: Mapping[str, str], request: object) -> tuple[int, str] | None:
    """None when the call may go on; else (API code, message)."""
    account_key, why = client_signature.verify(
        metadata.get(client_signature.AUTHORIZATION_HEADER, ""),
        metadata.get(client_signature.DATE_HEADER, ""),
        lambda ak: acl.accounts[ak].secret_key if ak in acl.accounts else None,
    )
    if account_key is None:
        return pb.UNAUTHORIZED, f"UNAUTHORIZED: {why}"
    account = acl.accounts[account_key]
    wanted = needs(method, request)
    if wanted is None:
        return None if account.admin else (pb.FORBIDDEN, f"FORBIDDEN: {method} needs an admin account")
    for kind, name, perm in wanted:
        if not account.may(kind, name, perm):
            return pb.FORBIDDEN, f"FORBIDDEN: access key {account_key!r} lacks {perm.name} on {kind} {name!r}"
    return None


# -- the gRPC adapter -----------------------------------------------------------------------------

_RESPONSES: dict[str, Callable[..., object]] = {
    "QueryRoute": pb.QueryRouteResponse,
    "Heartbeat": pb.HeartbeatResponse,
    "SendMessage": pb.SendMessageResponse,
    "GetOffset": pb.GetOffsetResponse,
    "UpdateOffset": pb.UpdateOffsetResponse,
    "QueryOffset": pb.QueryOffsetResponse,
    "NotifyClientTermination": pb.NotifyClientTerminationResponse,
    "QueryAssignment": pb.QueryAssignmentResponse,
    "AckMessage": pb.AckMessageResponse,
    "ChangeInvisibleDuration": pb.ChangeInvisibleDurationResponse,
    "ForwardMessageToDeadLetterQueue": pb.ForwardMessageToDeadLetterQueueResponse,
    "PullMessage": pb.PullMessageResponse,
    "ReceiveMessage": pb.ReceiveMessageResponse,
    "EndTransaction": pb.EndTransactionResponse,
}


def _status(refusal: tuple[int, str]) -> pb.Status:
    return pb.Status(code=refusal[0], message=refusal[1])  # type: ignore[arg-type]


class AclGuard(grpc.aio.ServerInterceptor):
    """Checks every MessagingService call against `acl` before its handler runs; a refused call is
    answered with its response type carrying the refusal status (the API's way to say no)."""

    def __init__(self, acl: AclConfig) -> None:
        self._acl = acl

    def telemetry_check(self, metadata: Mapping[str, str], command: pb.TelemetryCommand) -> pb.Status | None:
        """One command of a Telemetry stream whose call carried `metadata`: None, or its refusal."""
        refused = decide(self._acl, "Telemetry", metadata, command)
        return None if refused is None else _status(refused)

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = method_of(handler_call_details.method)
        if handler is None or method is None:
            return handler
        acl = self._acl

        def refusal(context, request) -> tuple[int, str] | None:
            return decide(acl, method, call_headers(context), request)

        response_type = _RESPONSES.get(method)
        if handler.unary_unary is not None and inspect.iscoroutinefunction(handler.unary_unary):
            return _guarded_unary(handler, refusal, response_type)
        if handler.unary_stream is not None and inspect.isasyncgenfunction(handler.unary_stream):
            return _guarded_unary_stream(handler, refusal, response_type)
        if handler.stream_stream is not None and inspect.isasyncgenfunction(handler.stream_stream):
            return _guarded_stream_stream(handler, refusal)
        return handler


# Why a call (its context and request) is refused, or None: the ACL's decision for the method.
CallRefusal = Callable[[Any, Any], "tuple[int, str] | None"]


def _guarded_unary(handler, refusal: CallRefusal, response_type):
    inner = handler.unary_unary

    async def unary_unary(request, context):
        refused = refusal(context, request)
        if refused is None:
            return await inner(request, context)
        if response_type is None:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, refused[1])
        return response_type(status=_status(refused))

    return grpc.unary_unary_rpc_method_handler(unary_unary, handler.request_deserializer, handler.response_serializer)


def _guarded_unary_stream(handler, refusal: CallRefusal, response_type):
    inner = handler.unary_stream

    async def unary_stream(request, context):
        refused = refusal(context, request)
        if refused is not None:
            if response_type is None:
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, refused[1])
            yield response_type(status=_status(refused))
            return
        async for response in inner(request, context):
            yield response

    return grpc.unary_stream_rpc_method_handler(unary_stream, handler.request_deserializer, handler.response_serializer)


def _guarded_stream_stream(handler, refusal: CallRefusal):
    inner = handler.stream_stream

    async def stream_stream(requests, context):
        refused = refusal(context, None)
        if refused is not None:
            yield pb.TelemetryCommand(status=_status(refused))
            return
        async for response in inner(requests, context):
            yield response

    return grpc.stream_stream_rpc_method_handler(
        stream_stream, handler.request_deserializer, handler.response_serializer
    )
