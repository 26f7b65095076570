"""`AdminClient`: the broker's admin API (`rocketstore.admin.v1.Admin`), blocking.

Every call is signed with the shared admin secret (`wire.admin_auth.AdminCaller`: a fresh
time-stamped, nonce-carrying HMAC header per call, bound to the broker's identity, which the client
asks the broker for once, and to the request's bytes; the secret never crosses the wire).
Answers come back as plain dicts keyed by the proto field names (admin.proto); a broker
status's `stats_json` arrives parsed, under `stats`.

Errors: UNAUTHENTICATED -> `AuthenticationError`; unreachable -> `TransportError`; other
refusals (INVALID_ARGUMENT, FAILED_PRECONDITION on a slave ...) -> `BrokerError` named by the
gRPC code. Thread-safety: may be shared by threads. The secret stays out of reprs.
"""

from __future__ import annotations

from typing import Any

import grpc

from wire.admin_auth import AdminCaller
from wire.rpc import admin_pb2

from .convert import broker_status_dict, check_message_id, check_name, new_message_id, proto_to_dict
from .endpoint import Endpoint, open_channel, parse_endpoint
from .errors import RocketStoreError, from_rpc_error
from .producer import check_timeout


def _exactly_one(what: str, **options: Any) -> dict[str, Any]:
    """The one option given (not None) as {name: value}; ValueError naming them all otherwise."""
    chosen = {name: value for name, value in options.items() if value is not None}
    if len(chosen) != 1:
        raise ValueError(f"{what} exactly one of {', '.join(options)}")
    return chosen


class AdminClient:
    def __init__(
        self,
        endpoint: str | Endpoint,
        secret: bytes,
        *,
        timeout_s: float = 10.0,
        tls_ca_file: str | None = None,
    ) -> None:
        self._endpoint = parse_endpoint(endpoint)
        if isinstance(secret, str):
            secret = secret.encode("utf-8")
        if not isinstance(secret, (bytes, bytearray)) or not secret:
            raise ValueError("the admin API needs the broker's shared secret (non-empty bytes)")
        self._timeout_s = check_timeout(timeout_s)
        self._channel = open_channel(self._endpoint, tls_ca_file=tls_ca_file)
        self._caller = AdminCaller(self._channel, bytes(secret))
        self._closed = False

    @property
    def endpoint(self) -> str:
        return self._endpoint.target

    def _call(self, method: str, request: Any, timeout_s: float | None = None) -> Any:
        if self._closed:
            raise RocketStoreError(f"the admin client for {self._endpoint} is closed")
        try:
            return self._caller.call(method, request, timeout_s or self._timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, self.endpoint) from exc

    def status(self) -> dict[str, Any]:
        """This broker's BrokerStatus."""
        return broker_status_dict(self._call("GetStatus", admin_pb2.GetStatusRequest()))

    def cluster_view(self) -> dict[str, Any]:
        """{"master": status or None, "self": status or None} (a slave fills "self")."""
        view = self._call("GetClusterView", admin_pb2.ClusterViewRequest())
        return {
            "master": broker_status_dict(view.master) if view.HasField("master") else None,
            "self": broker_status_dict(view.self) if view.HasField("self") else None,
        }

    def create_topic(
        self,
        name: str,
        queues: int = 4,
        perm: int = 6,
        *,
        read_queues: int | None = None,
        write_queues: int | None = None,
        order: bool = False,
    ) -> dict[str, Any]:
        """Create (or update) a topic with `queues` read and write queues (or `read_queues` and
        `write_queues` apart); its spec as stored."""
        check_name("topic", name)
        read = queues if read_queues is None else read_queues
        write = queues if write_queues is None else write_queues
        for label, value in (("queues", read), ("queues", write), ("perm", perm)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{label} is an int, not {type(value).__name__}")
        if read < 1 or write < 1:
            raise ValueError(f"a topic needs at least one read and one write queue, got {read} and {write}")
        spec = admin_pb2.TopicSpec(
            name=name, read_queue_nums=read, write_queue_nums=write, perm=perm, order=bool(order)
        )
        return proto_to_dict(self._call("CreateTopic", admin_pb2.CreateTopicRequest(topic=spec)).topic)

    def describe_topic(self, name: str) -> dict[str, Any]:
        """The topic's spec, where it is served and its queues' offsets and last store times."""
        check_name("topic", name)
        return proto_to_dict(self._call("DescribeTopic", admin_pb2.DescribeTopicRequest(topic=name)))

    def delete_topic(self, name: str) -> list[str]:
        """Delete the topic (a master only); the consumer groups whose offsets went with it."""
        check_name("topic", name)
        return list(self._call("DeleteTopic", admin_pb2.DeleteTopicRequest(topic=name)).groups)

    def consumer_progress(self, group: str, topic: str = "") -> list[dict[str, Any]]:
        """Per queue: broker offset, the group's offset (-1: none), lag and last consume time."""
        check_name("group", group)
        answer = self._call("ConsumerProgress", admin_pb2.ConsumerProgressRequest(group=group, topic=topic))
        return [proto_to_dict(q) for q in answer.queues]

    def reset_offset(
        self,
        group: str,
        topic: str,
        *,
        timestamp_ms: int | None = None,
        queue_offset: int | None = None,
        earliest: bool = False,
        latest: bool = False,
        dry_run: bool = True,
        queue_id: int | None = None,
        force: bool = False,
    ) -> dict[str, Any]:
        """Move the group's offsets in the topic (exactly one target), in every queue or only in
        `queue_id`; a dry run unless `dry_run=False`.
        {"queues": [{queue_id, old_offset, new_offset}], "applied": bool}. The broker refuses
        (FAILED_PRECONDITION) while consumers of the group are online unless `force`."""
        check_name("group", group)
        check_name("topic", topic)
        chosen = _exactly_one(
            "reset to",
            timestamp_ms=timestamp_ms,
            queue_offset=queue_offset,
            earliest=earliest or None,
            latest=latest or None,
        )
        request = admin_pb2.ResetOffsetRequest(group=group, topic=topic, dry_run=dry_run, force=force, **chosen)
        if queue_id is not None:
            request.queue_id = queue_id
        answer = self._call("ResetOffset", request)
        return {"queues": [proto_to_dict(q) for q in answer.queues], "applied": answer.applied}

    def list_consumer_groups(self) -> list[dict[str, Any]]:
        """The consumer groups the broker knows (offsets there, or a member online), by name:
        {group, topics, online_clients, protocols, lag, pop, last_seen_ms}."""
        answer = self._call("ListConsumerGroups", admin_pb2.ListConsumerGroupsRequest())
        return [proto_to_dict(g) for g in answer.groups]

    def list_clients(self, group: str = "", kind: str | None = None) -> list[dict[str, Any]]:
        """The clients the broker heard from lately (of `group`; `kind` PRODUCER or CONSUMER):
        {client_id, protocol (GRPC, GRPC_POP, GRPC_PULL, REMOTING), kind, group, address, topics,
        first_seen_ms, last_seen_ms, language, version}."""
        if group:
            check_name("group", group)
        if kind not in (None, "PRODUCER", "CONSUMER"):
            raise ValueError(f"kind is PRODUCER, CONSUMER or None, not {kind!r}")
        request = admin_pb2.ListClientsRequest(group=group, kind=kind or "CLIENT_KIND_UNSPECIFIED")
        return [proto_to_dict(c) for c in self._call("ListClients", request).clients]

    def query_message(
        self,
        *,
        key: str | None = None,
        msg_id: str | None = None,
        commit_log_offset: int | None = None,
        topic: str = "",
        max_messages: int = 32,
    ) -> list[dict[str, Any]]:
        """Messages by key (with `topic`), by either form of message id, or by CommitLog offset."""
        chosen = _exactly_one("look up by", key=key, msg_id=msg_id, commit_log_offset=commit_log_offset)
        if msg_id is not None:
            chosen["msg_id"] = check_message_id(msg_id)
        request = admin_pb2.QueryMessageRequest(topic=topic, max_messages=max_messages, **chosen)
        return [proto_to_dict(m) for m in self._call("QueryMessage", request).messages]

    def list_messages(
        self,
        topic: str,
        begin_timestamp_ms: int,
        end_timestamp_ms: int = 0,
        *,
        max_messages: int = 32,
        cursor: dict[int, int] | None = None,
    ) -> dict[str, Any]:
        """One page of the topic's messages stored within [begin, end] (Unix ms; end 0: no bound),
        oldest first: {"messages": [...], "next_cursor": {queue_id: queue_offset}, "more": bool,
        "damaged_offsets": [...]}. Pass `next_cursor` back as `cursor` for the next page."""
        check_name("topic", topic)
        for label, value in (("begin_timestamp_ms", begin_timestamp_ms), ("end_timestamp_ms", end_timestamp_ms)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{label} must be a non-negative int (Unix ms), got {value!r}")
        request = admin_pb2.ListMessagesRequest(
            topic=topic,
            begin_timestamp_ms=begin_timestamp_ms,
            end_timestamp_ms=end_timestamp_ms,
            max_messages=max_messages,
            cursor=[admin_pb2.QueueCursor(queue_id=q, queue_offset=o) for q, o in sorted((cursor or {}).items())],
        )
        answer = self._call("ListMessages", request)
        return {
            "messages": [proto_to_dict(m) for m in answer.messages],
            "next_cursor": {c.queue_id: c.queue_offset for c in answer.next_cursor},
            "more": answer.more,
            "damaged_offsets": list(answer.damaged_offsets),
        }

    def resend_dead_letter(
        self,
        *,
        commit_log_offset: int | None = None,
        msg_id: str | None = None,
        dry_run: bool = True,
        new_client_msg_id: str | None = None,
    ) -> dict[str, Any]:
        """Put a dead letter (a message of a %DLQ%<group> topic) again into the topic it came from,
        as a new message with client id `new_client_msg_id` (a fresh one when None; a request
        repeated with the same id stores one copy); a dry run unless `dry_run=False`.
        {"dead_letter": {...}, "origin_topic", "queue_id", "resent", "put_status", "offset_msg_id",
        "client_msg_id", "queue_offset"}."""
        chosen = _exactly_one("resend by", commit_log_offset=commit_log_offset, msg_id=msg_id)
        request = admin_pb2.ResendDeadLetterRequest(
            dry_run=dry_run, new_client_msg_id=new_client_msg_id or new_message_id(), **chosen
        )
        return proto_to_dict(self._call("ResendDeadLetter", request))

    def broker_config(self) -> list[dict[str, Any]]:
        """Every key of the broker's effective config: {key, value, changeable}."""
        answer = self._call("GetBrokerConfig", admin_pb2.GetBrokerConfigRequest())
        return [proto_to_dict(e) for e in answer.entries]

    def set_broker_config(self, values: dict[str, str]) -> list[dict[str, Any]]:
        """Change keys on the running broker (until it restarts); the changed entries."""
        answer = self._call("SetBrokerConfig", admin_pb2.SetBrokerConfigRequest(values=values))
        return [proto_to_dict(e) for e in answer.entries]

    def describe_cluster(self) -> dict[str, Any]:
        """The cluster's brokers as this broker last read them from the registry: {cluster,
        broker_name, registry, read_age_ms, fresh, brokers: [...]}."""
        answer = self._call("DescribeCluster", admin_pb2.DescribeClusterRequest())
        described = proto_to_dict(answer)
        described.setdefault("brokers", [])
        return described

    def list_topics(self) -> list[dict[str, Any]]:
        response = self._call("ListTopics", admin_pb2.ListTopicsRequest())
        return [proto_to_dict(t) for t in response.topics]

    def elect_master(self, broker_id: int, timeout_s: float = 30.0) -> dict[str, Any]:
        """Planned switchover (controller mode), asked of the master: `broker_id` becomes master
        once it holds the whole log. The call waits up to `timeout_s` for that (and the RPC's
        deadline is stretched to cover it)."""
        if not isinstance(broker_id, int) or isinstance(broker_id, bool) or broker_id < 0:
            raise ValueError(f"broker_id must be a non-negative int, got {broker_id!r}")
        timeout_s = check_timeout(timeout_s)
        request = admin_pb2.ElectMasterRequest(broker_id=broker_id, timeout_ms=int(timeout_s * 1000))
        answer = self._call("ElectMaster", request, timeout_s + self._timeout_s)
        return proto_to_dict(answer)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._channel.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"AdminClient({self._endpoint.target!r}, secret=<secret>)"
