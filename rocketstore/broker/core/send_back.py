"""A consumer's send-back (RocketMQ 4.x CONSUMER_SEND_MSG_BACK, request code 36) as the message
to put, protocol-neutral: a message the consumer failed goes to its group's retry topic
(`%RETRY%<group>`, one queue) delayed by a delay level, or, past the group's last attempt, to its
dead-letter topic (`%DLQ%<group>`, one queue), as RocketMQ's broker does:

- `delay_level` < 0: straight to the dead-letter topic; 0: the level follows the attempts made
  (3 + reconsume times: 10 s, 30 s, 1 min, ... with the default 18 levels); > 0: that level
  (the store's schedule caps it at its highest);
- a message already consumed `max_reconsume_times` times (16 when the client names none) goes to
  the dead-letter topic instead;
- the copy keeps the body, flag, born host and time and the properties (its UNIQ_KEY too: a
  `%RETRY%` topic's copies are not taken for a producer's retries), with reconsume times one
  more, RETRY_TOPIC the topic first consumed and ORIGIN_MESSAGE_ID the first message's id.

The store's put path does the rest (the delay through SCHEDULE_TOPIC_XXXX; the retry and
dead-letter topics are auto-created within their own limits). Pure functions; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from store import Message, MessageExt
from store.message import PROPERTY_DELAY_TIME_LEVEL, PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_RETRY_TOPIC
from store.metadata.topic_config import DLQ_TOPIC_PREFIX, RETRY_TOPIC_PREFIX

# RocketMQ's default for a group's attempts (its subscription group's retryMaxTimes).
MAX_RECONSUME_TIMES = 16
# delayLevel 0: the level is this plus the attempts so far (RocketMQ's rule).
FIRST_RETRY_LEVEL = 3


@dataclass(frozen=True, slots=True)
class SendBack:
    group: str
    commit_log_offset: int  # where the failed message lies
    delay_level: int = 0
    max_reconsume_times: int = MAX_RECONSUME_TIMES
    origin_msg_id: str = ""  # the first message's id when the client knows it


def retry_topic_of(group: str) -> str:
    return RETRY_TOPIC_PREFIX + group


def dlq_topic_of(group: str) -> str:
    return DLQ_TOPIC_PREFIX + group


def sent_back(original: MessageExt, back: SendBack) -> Message:
    """The message to put for `back` of `original`: its retry copy, or its dead letter."""
    properties = dict(original.properties)
    properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)
    properties.setdefault(PROPERTY_RETRY_TOPIC, original.topic)
    properties[PROPERTY_ORIGIN_MESSAGE_ID] = back.origin_msg_id or properties.get(
        PROPERTY_ORIGIN_MESSAGE_ID, original.msg_id
    )
    if back.delay_level < 0 or original.reconsume_times >= back.max_reconsume_times:
        topic = dlq_topic_of(back.group)
    else:
        topic = retry_topic_of(back.group)
        level = back.delay_level or FIRST_RETRY_LEVEL + original.reconsume_times
        properties[PROPERTY_DELAY_TIME_LEVEL] = str(level)
    return original.to_message(
        topic=topic,
        queue_id=0,
        properties=properties,
        reconsume_times=original.reconsume_times + 1,
        prepared_transaction_offset=0,
    )
