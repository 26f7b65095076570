"""`core.send_back`: where a consumer's send-back puts the message, and what the copy carries."""

from __future__ import annotations

from rocketstore.broker.core.send_back import SendBack, sent_back
from store import MessageExt

HOST = ("10.0.0.1", 10911)


def stored(topic: str = "Orders", reconsume_times: int = 0, **properties: str) -> MessageExt:
    props = {"KEYS": "k", "UNIQ_KEY": "U1", **properties}
    return MessageExt(topic, 2, b"b", props, 7, 0, HOST, HOST, 1000, 2000, reconsume_times, 0, 5, 640, 90, 0, "M1")


def test_a_send_back_goes_to_the_retry_topic_delayed_by_the_level_asked_or_the_attempts_made():
    copy = sent_back(stored(), SendBack("g", 640, delay_level=2))
    assert (copy.topic, copy.queue_id, copy.body, copy.flag, copy.reconsume_times) == ("%RETRY%g", 0, b"b", 7, 1)
    assert copy.properties == {
        "KEYS": "k",
        "UNIQ_KEY": "U1",
        "DELAY": "2",
        "RETRY_TOPIC": "Orders",
        "ORIGIN_MESSAGE_ID": "M1",
    }
    # delayLevel 0: 3 + the attempts so far; a copy keeps the first topic and the first id.
    again = stored("%RETRY%g", 4, RETRY_TOPIC="Orders", ORIGIN_MESSAGE_ID="M0", DELAY="6")
    copy = sent_back(again, SendBack("g", 640))
    assert (copy.properties["DELAY"], copy.properties["RETRY_TOPIC"], copy.properties["ORIGIN_MESSAGE_ID"]) == (
        "7",
        "Orders",
        "M0",
    )
    assert sent_back(stored(), SendBack("g", 640, origin_msg_id="C1")).properties["ORIGIN_MESSAGE_ID"] == "C1"


def test_past_the_last_attempt_or_with_a_negative_level_it_is_dead_lettered_undelayed():
    for message, back in (
        (stored(reconsume_times=16), SendBack("g", 640)),
        (stored(reconsume_times=2), SendBack("g", 640, delay_level=1, max_reconsume_times=2)),
        (stored(), SendBack("g", 640, delay_level=-1)),
    ):
        dead = sent_back(message, back)
        assert dead.topic == "%DLQ%g" and "DELAY" not in dead.properties
        assert dead.reconsume_times == message.reconsume_times + 1
