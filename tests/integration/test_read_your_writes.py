"""Read your writes on real brokers: a pull or a pop receive issued right after SEND_OK, with no
long poll, sees the message, although the store's dispatcher trails the put (docs/store.md,
"Dispatch and reads"), on an ASYNC_MASTER and on a SYNC_MASTER with SYNC_FLUSH and its slave.

Each round sends one message and reads at once; a new queue now and then (one with no
ConsumeQueue yet) is part of the race, as in test_remoting_api's pull-after-send test.
"""

from __future__ import annotations

import pytest

from client import Producer, PullConsumer, PullStatus
from pop_support import Pop
from wire.rpc import messaging_pb2 as pb

ROUNDS = 200
GROUPS = {
    "async-master": {"master_role": "ASYNC_MASTER", "slaves": 0},
    "sync-master-sync-flush": {"master_role": "SYNC_MASTER", "flush_disk_type": "SYNC_FLUSH"},
}


@pytest.mark.parametrize("roles", GROUPS.values(), ids=GROUPS.keys())
def test_a_pull_without_long_poll_right_after_send_ok_sees_the_message(make_cluster, roles):
    cluster = make_cluster(**roles)
    endpoint = cluster.master.client_endpoint
    misses = []
    with Producer(endpoint, retry_timeout_s=0) as producer, PullConsumer(endpoint) as consumer:
        for i in range(ROUNDS):
            body = f"ryw-{i}".encode()
            sent = producer.send(f"Ryw{i % 3}", body, queue_id=0)
            assert sent.ok, sent
            got = consumer.pull(sent.topic, 0, sent.queue_offset, max_messages=1)
            if [m.body for m in got.messages] != [body]:
                misses.append((i, got.status, got.next_offset))
            # The next offset, never assigned, is the queue's end: answered at once as before.
            after = consumer.pull(sent.topic, 0, sent.queue_offset + 1)
            assert (after.status, after.messages) == (PullStatus.NO_NEW_MSG, []), after
    assert misses == [], f"{len(misses)} of {ROUNDS} pulls right after SEND_OK missed their message: {misses[:5]}"


@pytest.mark.parametrize("roles", GROUPS.values(), ids=GROUPS.keys())
def test_a_pop_receive_without_long_poll_right_after_send_ok_gets_the_message(make_cluster, roles):
    cluster = make_cluster(**roles)
    endpoint = cluster.master.client_endpoint
    misses = []
    with Producer(endpoint, retry_timeout_s=0) as producer:
        producer.send("RywPop", b"creates the topic", queue_id=0)
        pop = Pop(endpoint, "RywPop", "ryw-pop-group")
        try:
            code, first = pop.receive(wait_s=0)
            assert (code, [m.body for m in first]) == (pb.OK, [b"creates the topic"])
            for i in range(ROUNDS):
                body = f"ryw-pop-{i}".encode()
                assert producer.send("RywPop", body, queue_id=0).ok
                code, messages = pop.receive(wait_s=0)
                if [m.body for m in messages] != [body]:
                    misses.append((i, code, [m.body for m in messages]))
                pop.ack(*(m.system_properties.receipt_handle for m in messages))
        finally:
            pop.close()
    assert misses == [], f"{len(misses)} of {ROUNDS} receives right after SEND_OK missed their message: {misses[:5]}"
