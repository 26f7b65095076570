"""RocketStore's Python client: produce, pull and administer over gRPC.

    from client import Producer, PullConsumer, AdminClient

    with Producer("127.0.0.1:10911") as producer:
        result = producer.send("Orders", b"hello", tag="created", keys=["order-1"])
    with Producer("h1:10911;h2:10911;h3:10911") as producer:  # follows the group's master
        producer.send("Orders", b"hello")
    with PullConsumer("127.0.0.1:10911", group="billing") as consumer:
        pulled = consumer.pull("Orders", 0, 0, long_polling_ms=1000)
    with SimpleConsumer("127.0.0.1:10911", "billing", "Orders") as consumer:  # every broker group
        for popped in consumer.receive(16, wait_s=1):
            consumer.ack(popped)

Blocking (`Producer`, `PullConsumer`, `AdminClient`) and asyncio (`AsyncProducer`,
`AsyncPullConsumer`) flavours share one sans-IO core (`client.convert`). The messaging calls
speak `apache.rocketmq.v2.MessagingService`; the admin calls `rocketstore.admin.v1.Admin`, signed
with the broker's shared secret. `client.report` turns answers into text (tables, a broker group's
status). The `rocketstore` commands that use this library live in `rocketstore/commands/`.
"""

import wire.grpc_fork  # noqa: F401 - before anything imports gRPC

from .admin import AdminClient
from .consumer import AsyncPullConsumer, PullConsumer
from .convert import (
    DEFAULT_GROUP,
    MessageIdGenerator,
    ProducerMessage,
    PullResult,
    PullStatus,
    QueueInfo,
    ReceivedMessage,
    SendResult,
    SendStatus,
    new_message_id,
)
from .endpoint import DEFAULT_ENDPOINT, Endpoint, parse_endpoint
from .errors import (
    AuthenticationError,
    BrokerError,
    EndpointError,
    NotMasterError,
    PartialBatchError,
    ProtocolError,
    RocketStoreError,
    TransportError,
)
from .failover import RetryPolicy
from .producer import AsyncProducer, Producer
from .signing import Credentials
from .simple_consumer import PoppedMessage, SimpleConsumer

__all__ = [
    "AdminClient",
    "AsyncProducer",
    "AsyncPullConsumer",
    "Credentials",
    "AuthenticationError",
    "BrokerError",
    "DEFAULT_ENDPOINT",
    "DEFAULT_GROUP",
    "Endpoint",
    "EndpointError",
    "MessageIdGenerator",
    "NotMasterError",
    "PartialBatchError",
    "PoppedMessage",
    "Producer",
    "ProducerMessage",
    "ProtocolError",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "QueueInfo",
    "ReceivedMessage",
    "RetryPolicy",
    "RocketStoreError",
    "SendResult",
    "SendStatus",
    "SimpleConsumer",
    "TransportError",
    "new_message_id",
    "parse_endpoint",
]
