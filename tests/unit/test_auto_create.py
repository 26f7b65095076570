"""Auto-creation limits (store/auto_create.py) and where they are on by default."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketstore.broker.config import configs_from_properties, is_loopback
from store.auto_create import AutoCreateGate, AutoCreateLimit, AutoCreateLimits


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
