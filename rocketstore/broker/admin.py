"""The admin API: `rocketstore.admin.v1.Admin` (grpc.aio servicer): broker status, topics, and
the cluster as this broker sees it.

- GetStatus: a `BrokerStatus` of the store's offsets and statistics and the view's role, epoch,
  endpoints, slaves (on a master) or replication stream (on a slave).
- CreateTopic: creates or updates a topic (a master only: a slave answers FAILED_PRECONDITION
  naming its master). Zero queue counts mean defaultTopicQueueNums and a zero perm means
  READ|WRITE (proto3 cannot tell an unset field from 0, and a topic nobody may use is never what
  a caller means). System topics cannot be changed.
- ListTopics: every topic the store serves, by name (system topics included, marked `system`).
- GetClusterView: a master fills `master` with its own status, a slave fills `self`.
- ElectMaster: a planned switchover to the given slave, asked of the master (asked for itself, it
  answers at once that it is master already): it stops taking
  writes, waits until that slave holds its whole log, and hands over: the master key in
  controller mode (`controller_agent.ControllerAgent.hand_over`), `TakeOver` on the slave and role
  overrides in static mode (`switchover`). FAILED_PRECONDITION when this broker is not the master
  or the slave is not eligible; DEADLINE_EXCEEDED when it did not catch up (nothing changed).
- TakeOver (static mode, called by a master handing over): become master at the given offset.
- DescribeTopic: the topic's spec, where it is served, and per queue its min/max queue offsets
  and last store time. NOT_FOUND for an unknown topic.
- DeleteTopic (a master only): removes the topic from the topic table and every group's offsets
  in it; its messages stay in the CommitLog until retention deletes them. System topics refuse.
- ConsumerProgress: per queue the broker offset, the group's offset, the lag and the last
  consume time (`admin_queries`); NOT_FOUND when the group has no offsets there.
- ResetOffset (a master only): moves the group's offsets in a topic to a time, an offset, the
  earliest or the latest; `dry_run` only answers the plan. FAILED_PRECONDITION for a group that
  consumes the topic by pop (its progress is the pop state's), and for a group with consumers
  online (`client_registry`) unless `force`: a running consumer writes its own offsets over the
  reset (Kafka refuses an active group the same way).
- QueryMessage: by key (the index), by either form of message id, or by CommitLog offset; each
  message with the consumer groups that committed past it (`admin_messages`).
- ListMessages: a topic's messages stored within a time range, oldest first, a page at a time
  (`admin_messages`).
- ResendDeadLetter (a master only, unless a dry run): a message of a `%DLQ%<group>` topic put again
  into the topic it came from, under the caller's new client id (`admin_messages`); a master fenced
  (`write_refusal`) before or during the put refuses, as a client's put does.
- DescribeCluster: the cluster's brokers as this broker last read them from the registry in
  etcd (`coordination.cluster_registrar`), and whether that read is fresh enough for routes.
- GetBrokerConfig / SetBrokerConfig: the effective config (secrets hidden; brokerRole as the broker
  serves now, with the configured one beside it when they differ) and the keys a running broker
  may change (`store.message_store.LIVE_CONFIG_KEYS`); changes last until a restart. A key the
  broker does not know is refused with the nearest known one.
- ListConsumerGroups / ListClients: the consumer groups this broker knows (offsets, pop state,
  members online) and the clients it heard from lately (`client_registry`), for `rocketstore
  consumer list|progress` and consoles.

Bad input is INVALID_ARGUMENT with a message saying what is wrong; an unexpected exception is
logged and answered INTERNAL. Authentication is not this module's: the broker installs
`wire.admin_auth.AsyncAuthInterceptor` in front of every method but Identify, which answers who
this broker is (what a client binds its signatures to). Thread-safety: runs on the broker's
event loop; the topic table is written from a worker thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
from collections.abc import Callable, Sequence
from typing import NoReturn

import grpc

from store import BrokerRole, MessageStore, TopicConfig
from store.clock import wall_clock_ms
from store.log.codec import CorruptMessage, DamagedMessage
from store.log.damage import describe
from store.message import MessageExt
from store.metadata.topic_config import (
    MAX_QUEUE_NUMS,
    SYSTEM_TOPICS,
    Permission,
    validate_group_name,
    validate_topic_name,
)
from store.properties import ConfigError, unknown_keys_text
from wire.admin_auth import identity_answer
from wire.rpc import admin_pb2, admin_pb2_grpc

from . import admin_messages, admin_queries
from .client_registry import ClientKind, ClientRegistry
from .config import BrokerConfigs, known_keys
from .view import BrokerView


async def _abort(context: grpc.aio.ServicerContext, code: grpc.StatusCode, text: str) -> NoReturn:
    """`context.abort`, which ends the call by raising, typed as never returning."""
    await context.abort(code, text)
    raise AssertionError("context.abort returned")


log = logging.getLogger("rocketstore.broker.admin")


def _guarded(method):
    """An unexpected exception is logged and answered INTERNAL (never a bare UNKNOWN)."""

    @functools.wraps(method)
    async def guarded(self, request, context):
        try:
            return await method(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            log.exception("%s failed", method.__name__)
            await _abort(
                context, grpc.StatusCode.INTERNAL, f"internal error ({type(exc).__name__}); see the broker log"
            )

    return guarded


def topic_spec(config: TopicConfig) -> admin_pb2.TopicSpec:
    return admin_pb2.TopicSpec(
        name=config.topic_name,
        read_queue_nums=config.read_queue_nums,
        write_queue_nums=config.write_queue_nums,
        perm=config.perm,
        order=config.order,
        system=config.topic_name in SYSTEM_TOPICS,
    )


class AdminServicer(admin_pb2_grpc.AdminServicer):
    def __init__(
        self,
        store: MessageStore,
        configs: BrokerConfigs,
        view: BrokerView,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        consumes_by_pop: Callable[[str, str], bool] = lambda group, topic: False,
        clients: ClientRegistry | None = None,
    ) -> None:
        self._consumes_by_pop = consumes_by_pop
        self._clients = clients if clients is not None else ClientRegistry(configs.broker.client_limits)
        self._store = store
        self._configs = configs
        self._view = view
        self._clock = clock_ms

    def broker_status(self) -> admin_pb2.BrokerStatus:
        """This broker's status now."""
        store, view = self._store, self._view
        broker = self._configs.broker
        now = self._clock()
        role = view.role
        max_offset = store.max_offset
        dispatched = store.dispatched_offset
        started = view.started_at_ms()
        status = admin_pb2.BrokerStatus(
            cluster_name=broker.broker_cluster_name,
            broker_name=broker.broker_name,
            broker_id=broker.broker_id,
            role=role.name,
            epoch=view.epoch(),
            client_endpoint=view.client_endpoint(),
            ha_endpoint=view.ha_endpoint(),
            flush_disk_type=self._configs.store.flush_disk_type.name,
            min_offset=store.min_offset,
            max_offset=max_offset,
            flushed_offset=store.flushed_offset,
            confirmed_offset=view.confirmed_offset(),
            dispatched_offset=dispatched,
            dispatch_lag_bytes=max(0, max_offset - dispatched),
            uptime_ms=max(0, now - started) if started else 0,
            in_sync_replicas=self._configs.ha.in_sync_replicas,
            master_client_endpoint=view.master_client_endpoint(),
            stats_json=json.dumps(store.stats_snapshot().as_dict(), sort_keys=True),
            write_refusal=view.write_refusal() or "",
        )
        status.disk_total_bytes, status.disk_free_bytes, status.commit_log_file_bytes = admin_queries.storage_use(store)
        if role is not BrokerRole.SLAVE:
            for snap in view.slave_snapshots(now):
                status.slaves.append(
                    admin_pb2.SlaveStatus(
                        ha_peer=snap.ha_peer,
                        broker_id=snap.broker_id,
                        client_endpoint=snap.client_endpoint,
                        ack_offset=snap.ack_offset,
                        lag_bytes=snap.lag_bytes,
                        lag_seconds=snap.lag_seconds,
                        fit=snap.fit,
                        connected_at_ms=snap.connected_at_ms,
                        silent_ms=snap.silent_ms,
                    )
                )
        controller = view.controller_status()
        if controller is not None:
            status.controller_mode = True
            status.master_broker_id = controller.master.broker_id if controller.master is not None else -1
            if controller.state is not None:
                status.in_sync_replica_ids.extend(sorted(controller.state.isr))
                status.unclean_lost_bytes = controller.state.unclean_lost_bytes
                status.group_max_offset = controller.state.master_max_offset
            status.lease_valid_ms = controller.lease_valid_ms
            status.controller_error = controller.last_error
        state = view.replication_state()
        if state is not None:
            status.master_ha_address = state.master_address or ""
            status.master_connected = bool(state.connected)
            status.master_max_offset = state.master_max_offset
            status.replication_error = state.last_error or ""
            status.metadata_synced_ms = state.metadata_synced_ms
            status.metadata_error = state.metadata_error
            status.master_last_contact_ms = state.last_chunk_ms
            status.acting_master = view.acting_master()
        return status

    @_guarded
    async def Identify(self, request: admin_pb2.IdentifyRequest, context) -> admin_pb2.BrokerIdentity:
        return identity_answer(self._configs.broker.identity)

    @_guarded
    async def GetStatus(self, request: admin_pb2.GetStatusRequest, context) -> admin_pb2.BrokerStatus:
        return self.broker_status()

    @_guarded
    async def GetClusterView(self, request: admin_pb2.ClusterViewRequest, context) -> admin_pb2.ClusterView:
        own = self.broker_status()
        if self._view.role is BrokerRole.SLAVE:
            return admin_pb2.ClusterView(self=own)
        return admin_pb2.ClusterView(master=own)

    @_guarded
    async def DescribeCluster(
        self, request: admin_pb2.DescribeClusterRequest, context
    ) -> admin_pb2.DescribeClusterResponse:
        broker = self._configs.broker
        answer = admin_pb2.DescribeClusterResponse(cluster=broker.broker_cluster_name, broker_name=broker.broker_name)
        registry = self._view.cluster_registry()
        if registry is None:
            return answer
        view, max_age_ms = registry
        answer.registry = True
        now = self._clock()
        answer.read_age_ms = now - view.read_at_ms if view.read_at_ms else -1
        answer.fresh = view.fresh(now, max_age_ms)
        for record in sorted(view.registrations, key=lambda r: (r.broker_name, r.broker_id)):
            answer.brokers.add(
                broker_name=record.broker_name,
                broker_id=record.broker_id,
                role=record.role,
                epoch=record.epoch,
                client_endpoint=record.client_endpoint,
                remoting_endpoint=record.remoting_endpoint,
                acting=record.acting,
                broker_permission=record.broker_permission,
                topics=len(record.topics),
                superseded=view.superseded(record),
            )
        return answer

    @_guarded
    async def ElectMaster(self, request: admin_pb2.ElectMasterRequest, context) -> admin_pb2.ElectMasterResponse:
        hand_over = getattr(self._view, "hand_over", None)
        if hand_over is None:
            await _abort(context, grpc.StatusCode.UNIMPLEMENTED, "this broker cannot hand over")
        me = self._configs.broker.broker_id
        if request.broker_id == me and self._view.role is not BrokerRole.SLAVE:
            endpoint = self._view.client_endpoint()
            return admin_pb2.ElectMasterResponse(
                epoch=self._view.epoch(),
                master_broker_id=me,
                master_client_endpoint=endpoint,
                handover_offset=self._store.max_offset,
                message=f"broker {me} at {endpoint} is master already (epoch {self._view.epoch()}): nothing to do",
            )
        timeout_s = (request.timeout_ms or 30_000) / 1000
        try:
            broker_id, epoch, endpoint, offset = await asyncio.to_thread(hand_over, request.broker_id, timeout_s)
        except TimeoutError as exc:
            await _abort(context, grpc.StatusCode.DEADLINE_EXCEEDED, str(exc))
        except ValueError as exc:
            await _abort(context, grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        return admin_pb2.ElectMasterResponse(
            epoch=epoch,
            master_broker_id=broker_id,
            master_client_endpoint=endpoint,
            handover_offset=offset,
            message=f"broker {broker_id} at {endpoint} is master (epoch {epoch}) from offset {offset}",
        )

    @_guarded
    async def TakeOver(self, request: admin_pb2.TakeOverRequest, context) -> admin_pb2.TakeOverResponse:
        take_over = getattr(self._view, "take_over", None)
        if take_over is None:
            await _abort(context, grpc.StatusCode.UNIMPLEMENTED, "this broker cannot take over")
        try:
            ha, client, max_offset = await asyncio.to_thread(take_over, request.expected_offset, request.role)
        except ValueError as exc:
            await _abort(context, grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        return admin_pb2.TakeOverResponse(ha_endpoint=ha, client_endpoint=client, max_offset=max_offset)

    @_guarded
    async def ListTopics(self, request: admin_pb2.ListTopicsRequest, context) -> admin_pb2.ListTopicsResponse:
        return admin_pb2.ListTopicsResponse(topics=[topic_spec(c) for c in self._store.topics.topics()])

    async def _master_only(self, context, what: str) -> None:
        if self._view.role is BrokerRole.SLAVE:
            broker = self._configs.broker
            master = self._view.master_client_endpoint() or "an unknown endpoint"
            await _abort(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{broker.broker_name} (id {broker.broker_id}) is not master (role SLAVE): "
                f"{what} on the MASTER at {master}",
            )

    async def _topic(self, context, name: str) -> TopicConfig:
        try:
            validate_topic_name(name)
        except ValueError as exc:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        config = self._store.topics.get(name)
        if config is None:
            broker = self._configs.broker
            await _abort(context, grpc.StatusCode.NOT_FOUND, f"topic {name} does not exist on {broker.broker_name}")
        return config

    @_guarded
    async def CreateTopic(self, request: admin_pb2.CreateTopicRequest, context) -> admin_pb2.CreateTopicResponse:
        await self._master_only(context, "create topics")
        config = self._requested_topic(request)
        if isinstance(config, str):
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, config)
        stored = await asyncio.to_thread(self._store.create_or_update_topic, config)
        log.info("admin: topic %s is now %s", stored.topic_name, stored)
        return admin_pb2.CreateTopicResponse(topic=topic_spec(stored))

    def _requested_topic(self, request: admin_pb2.CreateTopicRequest) -> TopicConfig | str:
        """The TopicConfig a request asks for, or what is wrong with it."""
        if not request.HasField("topic"):
            return "CreateTopicRequest.topic is required"
        spec = request.topic
        try:
            validate_topic_name(spec.name)
        except ValueError as exc:
            return str(exc)
        if spec.name in SYSTEM_TOPICS:
            return f"{spec.name} is a system topic; the broker manages it"
        default = self._store.config.default_topic_queue_nums
        read = spec.read_queue_nums or default
        write = spec.write_queue_nums or default
        for label, value in (("read_queue_nums", read), ("write_queue_nums", write)):
            if not 1 <= value <= MAX_QUEUE_NUMS:
                return f"{label} must be in 1..{MAX_QUEUE_NUMS}, got {value}"
        perm = spec.perm or int(Permission.READ_WRITE)
        if not 0 <= perm <= 15:
            return f"perm must be RocketMQ PermName bits in 0..15 (2 write, 4 read, 6 both), got {perm}"
        existing = self._store.topics.get(spec.name)
        try:
            if existing is not None:
                return dataclasses.replace(
                    existing, read_queue_nums=read, write_queue_nums=write, perm=perm, order=spec.order
                )
            return TopicConfig(spec.name, read, write, perm, order=spec.order)
        except ValueError as exc:
            return str(exc)

    @_guarded
    async def DescribeTopic(self, request: admin_pb2.DescribeTopicRequest, context) -> admin_pb2.TopicDescription:
        config = await self._topic(context, request.topic)
        broker, view = self._configs.broker, self._view
        queues = await asyncio.to_thread(admin_queries.queue_statuses, self._store, config)
        return admin_pb2.TopicDescription(
            topic=topic_spec(config),
            cluster_name=broker.broker_cluster_name,
            broker_name=broker.broker_name,
            role=view.role.name,
            client_endpoint=view.client_endpoint(),
            master_client_endpoint=view.master_client_endpoint(),
            queues=queues,
        )

    @_guarded
    async def DeleteTopic(self, request: admin_pb2.DeleteTopicRequest, context) -> admin_pb2.DeleteTopicResponse:
        await self._master_only(context, "delete topics")
        config = await self._topic(context, request.topic)
        if config.topic_name in SYSTEM_TOPICS:
            await _abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{config.topic_name} is a system topic; the broker manages it",
            )

        def delete() -> list[str]:
            self._store.delete_topic(config.topic_name)
            groups = self._store.consumer_offsets.remove_topic(config.topic_name)
            self._store.consumer_offsets.persist()
            return groups

        groups = await asyncio.to_thread(delete)
        log.info("admin: topic %s deleted (offsets of %d groups removed)", config.topic_name, len(groups))
        return admin_pb2.DeleteTopicResponse(groups=groups)

    @_guarded
    async def ConsumerProgress(
        self, request: admin_pb2.ConsumerProgressRequest, context
    ) -> admin_pb2.ConsumerProgressResponse:
        group = request.group
        try:
            validate_group_name(group)
        except ValueError as exc:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        if request.topic:
            topics = {(await self._topic(context, request.topic)).topic_name}
        else:
            topics = self._store.consumer_offsets.topics_of(group)
            if not topics:
                await _abort(
                    context, grpc.StatusCode.NOT_FOUND, f"consumer group {group} has no offsets on this broker"
                )
        rows = await asyncio.to_thread(admin_queries.consumer_progress, self._store, group, topics)
        return admin_pb2.ConsumerProgressResponse(queues=rows)

    @_guarded
    async def ResetOffset(self, request: admin_pb2.ResetOffsetRequest, context) -> admin_pb2.ResetOffsetResponse:
        if not request.dry_run:
            await self._master_only(context, "reset offsets")
        try:
            validate_group_name(request.group)
        except ValueError as exc:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        if request.WhichOneof("to") is None:
            await _abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                "say where to: timestamp_ms, queue_offset, earliest or latest",
            )
        config = await self._topic(context, request.topic)
        if request.HasField("queue_id") and not 0 <= request.queue_id < config.read_queue_nums:
            await _abort(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"topic {config.topic_name} has queues 0..{config.read_queue_nums - 1}, not {request.queue_id}",
            )
        if not request.dry_run and not request.force:
            online = self._clients.clients(self._clock(), group=request.group, kind=ClientKind.CONSUMER)
            if online:
                named = ", ".join(f"{c.client_id} ({c.protocol.name} from {c.address})" for c in online[:5])
                await _abort(
                    context,
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"group {request.group} has {len(online)} consumer(s) online ({named}): they would write their "
                    "own offsets over the reset. Stop them first, or force the reset",
                )
        if self._consumes_by_pop(request.group, config.topic_name):
            await _abort(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                f"group {request.group} consumes {config.topic_name} by pop (RocketMQ 5 SimpleConsumer or "
                "PushConsumer): its progress is in the pop state, which an offset reset does not move",
            )
        changes = await asyncio.to_thread(admin_queries.reset_plan, self._store, request.group, config, request)
        if not request.dry_run:
            await asyncio.to_thread(admin_queries.apply_reset, self._store, request.group, config.topic_name, changes)
            log.info(
                "admin: offsets of group %s in %s reset to %s",
                request.group,
                config.topic_name,
                {c.queue_id: c.new_offset for c in changes},
            )
        return admin_pb2.ResetOffsetResponse(queues=changes, applied=not request.dry_run)

    @_guarded
    async def QueryMessage(self, request: admin_pb2.QueryMessageRequest, context) -> admin_pb2.QueryMessageResponse:
        limit = request.max_messages or 32
        by = request.WhichOneof("by")
        found: Sequence[MessageExt] = ()
        store = self._store
        if request.topic:
            await self._topic(context, request.topic)
        if by == "key":
            if not request.topic:
                await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "a query by key needs its topic")
            if store.index is None:
                await _abort(
                    context,
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "this broker keeps no index (messageIndexEnable=false)",
                )
            queried = await asyncio.to_thread(store.query_message, request.topic, request.key, limit)
            found = queried.messages
            if not found and queried.damaged_offsets:
                listed = ", ".join(map(str, queried.damaged_offsets))
                await _abort(
                    context,
                    grpc.StatusCode.DATA_LOSS,
                    f"the messages the index names for key {request.key!r} are damaged (body CRC mismatch) at "
                    f"CommitLog offsets {listed}: not served",
                )
        elif by == "msg_id":
            try:
                found = await asyncio.to_thread(admin_queries.find_by_id, store, request.msg_id, request.topic, limit)
            except DamagedMessage as exc:
                await _abort(context, grpc.StatusCode.DATA_LOSS, f"{describe(exc)}: not served")
        elif by == "commit_log_offset":
            try:
                found = (await asyncio.to_thread(store.read_message, request.commit_log_offset),)
            except DamagedMessage as exc:
                await _abort(context, grpc.StatusCode.DATA_LOSS, f"{describe(exc)}: not served")
            except CorruptMessage as exc:
                await _abort(
                    context, grpc.StatusCode.NOT_FOUND, f"no message at offset {request.commit_log_offset}: {exc}"
                )
        else:
            await _abort(
                context, grpc.StatusCode.INVALID_ARGUMENT, "say what to look for: key, msg_id or commit_log_offset"
            )
        shown = list(found)[:limit]
        return admin_pb2.QueryMessageResponse(messages=await asyncio.to_thread(admin_messages.views, store, shown))

    @_guarded
    async def ListMessages(self, request: admin_pb2.ListMessagesRequest, context) -> admin_pb2.ListMessagesResponse:
        config = await self._topic(context, request.topic)
        cursor = {c.queue_id: c.queue_offset for c in request.cursor}
        try:
            limit = admin_messages.page_size(request.max_messages)
            page = await asyncio.to_thread(
                admin_messages.list_messages,
                self._store,
                config,
                request.begin_timestamp_ms,
                request.end_timestamp_ms,
                limit,
                cursor,
            )
        except ValueError as exc:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return admin_pb2.ListMessagesResponse(
            messages=await asyncio.to_thread(admin_messages.views, self._store, page.messages),
            next_cursor=[
                admin_pb2.QueueCursor(queue_id=q, queue_offset=o) for q, o in sorted(page.next_cursor.items())
            ],
            more=page.more,
            damaged_offsets=page.damaged_offsets,
        )

    @_guarded
    async def ResendDeadLetter(
        self, request: admin_pb2.ResendDeadLetterRequest, context
    ) -> admin_pb2.ResendDeadLetterResponse:
        if not request.dry_run:
            await self._master_only(context, "resend dead letters")
        which = request.WhichOneof("dead_letter")
        if which is None:
            await _abort(
                context, grpc.StatusCode.INVALID_ARGUMENT, "say which dead letter: commit_log_offset or msg_id"
            )
        offset = request.commit_log_offset if which == "commit_log_offset" else None
        try:
            if not request.dry_run:
                admin_messages.check_client_id(request.new_client_msg_id)
            dead = await asyncio.to_thread(admin_messages.find_dead_letter, self._store, offset, request.msg_id)
            origin = admin_messages.origin_topic(dead)
        except DamagedMessage as exc:
            await _abort(context, grpc.StatusCode.DATA_LOSS, f"{describe(exc)}: not served")
        except ValueError as exc:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        config = self._store.topics.get(origin)
        if config is None:
            await _abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"the dead letter came from topic {origin}, which does not exist on {self._configs.broker.broker_name}",
            )
        answer = admin_pb2.ResendDeadLetterResponse(
            dead_letter=admin_queries.message_view(dead),
            origin_topic=origin,
            queue_id=admin_messages.resend_queue(config, request.new_client_msg_id or dead.msg_id),
        )
        if request.dry_run:
            return answer
        fenced = self._view.write_refusal()
        if fenced:
            await _abort(context, grpc.StatusCode.FAILED_PRECONDITION, f"this broker takes no writes now: {fenced}")
        copy = admin_messages.resent_copy(dead, config, request.new_client_msg_id)
        result = await self._store.async_put_message(copy)
        fenced = self._view.write_refusal()
        if fenced:
            # As a client put fenced while it waited: the copy may be stored but is not confirmed.
            await _abort(
                context,
                grpc.StatusCode.UNAVAILABLE,
                f"this broker was fenced during the resend ({fenced}): the copy is not confirmed; "
                "send the same request again to the new master",
            )
        if not result.status.is_stored:
            await _abort(
                context,
                grpc.StatusCode.UNAVAILABLE,
                f"the copy was not stored ({result.status.name}{': ' + result.reason if result.reason else ''})",
            )
        log.info(
            "admin: dead letter at CommitLog offset %d resent to %s queue %d as %s (%s)",
            dead.physical_offset,
            origin,
            copy.queue_id,
            request.new_client_msg_id,
            result.status.name,
        )
        answer.resent = True
        answer.put_status = result.status.name
        answer.offset_msg_id = result.msg_id or ""
        answer.client_msg_id = request.new_client_msg_id
        answer.queue_offset = result.queue_offset
        return answer

    @_guarded
    async def GetBrokerConfig(
        self, request: admin_pb2.GetBrokerConfigRequest, context
    ) -> admin_pb2.BrokerConfigResponse:
        return admin_pb2.BrokerConfigResponse(
            entries=admin_queries.config_entries(self._configs, self._store, self._view.role)
        )

    @_guarded
    async def SetBrokerConfig(
        self, request: admin_pb2.SetBrokerConfigRequest, context
    ) -> admin_pb2.BrokerConfigResponse:
        changes = dict(request.values)
        if not changes:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "no key to change")
        known = known_keys()
        unknown = sorted(set(changes) - known)
        if unknown:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, unknown_keys_text(unknown, known))
        try:
            await asyncio.to_thread(self._store.update_config, changes)
        except ConfigError as exc:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        entries = admin_queries.config_entries(self._configs, self._store, self._view.role)
        return admin_pb2.BrokerConfigResponse(entries=[e for e in entries if e.key in changes])

    @_guarded
    async def ListClients(self, request: admin_pb2.ListClientsRequest, context) -> admin_pb2.ListClientsResponse:
        kind = ClientKind(request.kind) if request.kind else None
        seen = self._clients.clients(self._clock(), group=request.group or None, kind=kind)
        return admin_pb2.ListClientsResponse(clients=[admin_queries.client_connection(c) for c in seen])

    @_guarded
    async def ListConsumerGroups(
        self, request: admin_pb2.ListConsumerGroupsRequest, context
    ) -> admin_pb2.ListConsumerGroupsResponse:
        members = self._clients.groups(self._clock())
        groups = await asyncio.to_thread(admin_queries.consumer_groups, self._store, members, self._consumes_by_pop)
        return admin_pb2.ListConsumerGroupsResponse(groups=groups)
