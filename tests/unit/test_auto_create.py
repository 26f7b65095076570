"""Auto-creation limits (store/auto_create.py) and where they are on by default."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.config import configs_from_properties, is_loopback
from store import MessageStore, StoreConfig
from store.metadata.auto_create import AutoCreateGate, AutoCreateLimit, AutoCreateLimits
from store.properties import ConfigError


def test_the_rate_is_a_bucket_of_a_minutes_worth_refilled_over_the_minute():
    gate = AutoCreateGate(AutoCreateLimits(per_minute=6))
    assert all(gate.refusal(f"t{i}", 0, 1000) is None for i in range(6))
    refused = gate.refusal("t6", 0, 1000)
    assert refused.limit is AutoCreateLimit.RATE and "autoCreateTopicPerMinute=6" in refused.reason
    assert gate.refusal("t6", 0, 1000 + 9_999) is not None  # a token takes 10 s
    assert gate.refusal("t6", 0, 1000 + 10_000) is None
    assert gate.refusal("t7", 0, 1000 + 10_000) is not None


@given(st.lists(st.integers(min_value=0, max_value=120_000), min_size=1, max_size=200))
def test_never_more_than_a_minutes_worth_plus_the_refill_in_any_window(gaps):
    gate = AutoCreateGate(AutoCreateLimits(per_minute=30))
    now, created = 0, 0
    for gap in gaps:
        now += gap
        created += gate.refusal("t", 0, now) is None
    assert created <= 30 + now * 30 // 60_000


def test_the_topic_cap_and_the_switch():
    assert AutoCreateGate(AutoCreateLimits(max_topics=5)).refusal("t", 5, 0).limit is AutoCreateLimit.MAX_TOPICS
    assert AutoCreateGate(AutoCreateLimits(max_topics=5)).refusal("t", 4, 0) is None
    assert AutoCreateGate(AutoCreateLimits(enabled=False)).refusal("t", 0, 0).limit is AutoCreateLimit.DISABLED


def test_auto_creation_is_off_by_default_beyond_loopback_and_an_explicit_setting_wins():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3") and not is_loopback("broker.example")
    assert configs_from_properties({}).store.auto_create_topic_enable
    assert not configs_from_properties({"brokerIP1": "10.1.2.3"}).store.auto_create_topic_enable
    assert not configs_from_properties({"bindAddress": "0.0.0.0"}).store.auto_create_topic_enable
    assert configs_from_properties(
        {"bindAddress": "0.0.0.0", "autoCreateTopicEnable": "true"}
    ).store.auto_create_topic_enable
    assert not configs_from_properties({"autoCreateTopicEnable": "false"}).store.auto_create_topic_enable


def test_retry_topics_have_a_gate_of_their_own_that_counts_its_refusals():
    gate = AutoCreateGate(AutoCreateLimits(max_topics=2, per_minute=1), retry=True)
    assert gate.refusal("%RETRY%g_T", 0, 0) is None
    rate = gate.refusal("%RETRY%g_U", 1, 0)
    assert rate.limit is AutoCreateLimit.RETRY_RATE and rate.limit.is_rate
    assert "autoCreateRetryTopicPerMinute=1" in rate.reason
    cap = gate.refusal("%DLQ%g", 2, 60_000)
    assert cap.limit is AutoCreateLimit.RETRY_MAX_TOPICS and not cap.limit.is_rate
    assert "2 retry and dead-letter topics" in cap.reason and "autoCreateRetryTopicMaxTopics=2" in cap.reason
    assert gate.refused == {AutoCreateLimit.RETRY_RATE: 1, AutoCreateLimit.RETRY_MAX_TOPICS: 1}


def store_with(tmp_path, **limits) -> MessageStore:
    store = MessageStore(
        StoreConfig(
            store_path_root_dir=str(tmp_path),
            mapped_file_size_commit_log=64 * 1024,
            mapped_file_size_consume_queue=20480,
            max_hash_slot_num=512,
            max_index_num=2048,
            **limits,
        )
    )
    store.load()
    return store


def test_retry_topics_and_other_topics_do_not_use_up_each_others_room(tmp_path):
    store = store_with(tmp_path, auto_create_topic_enable=False, auto_create_retry_topic_max_topics=2)
    try:
        # Room for one topic besides the system topics.
        store.update_config({"autoCreateTopicMaxTopics": str(len(store.topics.names()) + 1)})
        # The broker makes retry topics whether or not clients may auto-create topics.
        assert store.create_retry_topic("%RETRY%g_T").read_queue_nums == 1
        assert store.create_retry_topic("%DLQ%g").write_queue_nums == 1
        assert store.create_retry_topic("%RETRY%g_T").read_queue_nums == 1  # exists: not counted
        refused = store.create_retry_topic("%RETRY%g2_T")
        assert refused.limit is AutoCreateLimit.RETRY_MAX_TOPICS
        # A client's send to such a name needs the switch, then meets the same limits.
        assert store.auto_create_topic("%RETRY%x").limit is AutoCreateLimit.DISABLED
        store.update_config({"autoCreateTopicEnable": "true"})
        assert store.auto_create_topic("%RETRY%x").limit is AutoCreateLimit.RETRY_MAX_TOPICS
        # The two retry topics do not count against the other topics' cap (one more allowed).
        assert store.auto_create_topic("Orders").topic_name == "Orders"
        assert store.auto_create_topic("Audit").limit is AutoCreateLimit.MAX_TOPICS
        store.update_config({"autoCreateRetryTopicMaxTopics": "3"})
        assert store.create_retry_topic("%RETRY%g2_T").topic_name == "%RETRY%g2_T"
        assert store.auto_create_refusals() == {
            "autoCreateRetryTopicMaxTopics": 2,
            "autoCreateTopicEnable": 1,
            "autoCreateTopicMaxTopics": 1,
        }
        with pytest.raises(ValueError, match="not a retry or dead-letter topic"):
            store.create_retry_topic("Orders2")
    finally:
        store.shutdown()


def test_negative_limits_are_config_errors():
    for key in ("autoCreateRetryTopicMaxTopics", "autoCreateRetryTopicPerMinute", "autoCreateTopicPerMinute"):
        with pytest.raises(ConfigError, match=f"{key} .* must not be negative"):
            StoreConfig.from_properties({key: "-1"})
