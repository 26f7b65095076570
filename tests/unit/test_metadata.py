"""Store metadata under `config/`: topics (store/topic_config.py) and consumer offsets
(store/consumer_offset.py): JSON shapes, files the Java broker writes, crash safety, threads."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import store.metadata.consumer_offset as consumer_offset_module
from store.config import StoreConfig
from store.metadata.consumer_offset import ConsumerOffsetManager, OffsetCommit
from store.metadata.json_file import read_json, write_json_atomically
from store.metadata.topic_config import (
    SCHEDULE_TOPIC,
    SYSTEM_TOPICS,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    DataVersion,
    Permission,
    TopicConfig,
    TopicConfigManager,
)

NAME_CHARS = "%|abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
topic_names = st.text(alphabet=NAME_CHARS, min_size=1, max_size=127)
group_names = st.text(alphabet=NAME_CHARS, min_size=1, max_size=40)


class Clock:
    """A settable millisecond clock, so data-version timestamps are exact."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def topics_file(root: Path) -> Path:
    return root / "config" / "topics.json"


def offsets_file(root: Path) -> Path:
    return root / "config" / "consumerOffset.json"


def manager(root: Path, **kwargs) -> TopicConfigManager:
    m = TopicConfigManager(root, **kwargs)
    m.load()
    return m


# =============================================================================================
# Permission and TopicConfig


def test_permission_values_are_rocketmqs_permname():
    assert (Permission.INHERIT, Permission.WRITE, Permission.READ, Permission.PRIORITY) == (1, 2, 4, 8)
    assert Permission.READ_WRITE == 6 == Permission.READ | Permission.WRITE


def test_topic_config_defaults_are_rocketmqs():
    config = TopicConfig("T")

    assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (16, 16, 6)
    assert (config.topic_filter_type, config.topic_sys_flag, config.order) == ("SINGLE_TAG", 0, False)
    assert config.readable and config.writable


def test_permission_member_is_stored_as_plain_int():
    config = TopicConfig("T", perm=Permission.READ)

    assert type(config.perm) is int and config.perm == 4
    assert config.readable and not config.writable


@pytest.mark.parametrize(
    "name",
    ["TopicTest", "a", "x" * 127, "%RETRY%group_a", "%DLQ%group-b", "ns%topic", "a|b", "0-9_"],
)
def test_valid_topic_names(name):
    assert TopicConfig(name).topic_name == name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "empty"),
        ("x" * 128, "at most 127"),
        ("a.b", "characters outside"),
        ("topic@group", "characters outside"),
        ("with space", "characters outside"),
        ("tab\t", "characters outside"),
        ("newline\n", "characters outside"),
        ("ünïcode", "characters outside"),
        ("slash/", "characters outside"),
        (5, "must be a string"),
    ],
)
def test_invalid_topic_names(name, message):
    with pytest.raises(ValueError, match=message):
        TopicConfig(name)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"read_queue_nums": 0}, r"read_queue_nums must be an int in 1\.\.1024"),
        ({"write_queue_nums": 1025}, r"write_queue_nums must be an int in 1\.\.1024"),
        ({"read_queue_nums": True}, "read_queue_nums"),
        ({"write_queue_nums": 4.0}, "write_queue_nums"),
        ({"perm": 16}, r"perm must be an int in 0\.\.15"),
        ({"perm": -1}, "perm"),
        ({"topic_filter_type": "TAGS"}, "SINGLE_TAG, MULTI_TAG"),
        ({"topic_sys_flag": -1}, "topic_sys_flag"),
        ({"order": 1}, "order must be a bool"),
    ],
)
def test_invalid_topic_fields(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TopicConfig("T", **kwargs)


def test_queue_num_limits_are_inclusive():
    assert TopicConfig("T", 1, 1024).write_queue_nums == 1024
    assert TopicConfig("T", perm=0).perm == 0
    assert TopicConfig("T", perm=15).perm == 15


@given(
    name=topic_names,
    reads=st.integers(1, 1024),
    writes=st.integers(1, 1024),
    perm=st.integers(0, 15),
    filter_type=st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
    sys_flag=st.integers(0, 2**31 - 1),
    order=st.booleans(),
)
def test_topic_config_json_round_trip(name, reads, writes, perm, filter_type, sys_flag, order):
    config = TopicConfig(name, reads, writes, perm, filter_type, sys_flag, order)

    assert TopicConfig.from_json(name, json.loads(json.dumps(config.to_json()))) == config


@given(st.text(min_size=1, max_size=127).filter(lambda s: any(c not in NAME_CHARS for c in s)))
def test_any_character_outside_the_set_is_refused(name):
    with pytest.raises(ValueError, match="characters outside"):
        TopicConfig(name)


# =============================================================================================
# TopicConfigManager: file shape, Java files, round trips


def test_topics_json_shape(tmp_path):
    clock = Clock(1_700_000_000_123)
    m = manager(tmp_path, clock=clock)
    m.create_or_update(TopicConfig("TopicTest", 4, 8, 6, "MULTI_TAG", 1, True))

    content = json.loads(topics_file(tmp_path).read_text())

    assert list(content) == ["dataVersion", "topicConfigTable"]
    assert content["dataVersion"] == {"counter": 1, "timestamp": 1_700_000_000_123}
    assert content["topicConfigTable"]["TopicTest"] == {
        "topicName": "TopicTest",
        "readQueueNums": 4,
        "writeQueueNums": 8,
        "perm": 6,
        "topicFilterType": "MULTI_TAG",
        "topicSysFlag": 1,
        "order": True,
    }
    assert set(content["topicConfigTable"]) == {"TopicTest", *SYSTEM_TOPICS}


# What RocketMQ 4.x's broker writes (fastjson, pretty format: tabs, fields in alphabetical order).
JAVA_TOPICS_4 = """{
\t"dataVersion":{
\t\t"counter":7,
\t\t"timestamp":1699999999999
\t},
\t"topicConfigTable":{
\t\t"SCHEDULE_TOPIC_XXXX":{
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":18,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"SCHEDULE_TOPIC_XXXX",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":18
\t\t},
\t\t"%RETRY%please_rename_unique_group_name_4":{
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":1,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"%RETRY%please_rename_unique_group_name_4",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":1
\t\t},
\t\t"TopicTest":{
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":4,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"TopicTest",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":4
\t\t},
\t\t"ReadOnly":{
\t\t\t"order":true,
\t\t\t"perm":4,
\t\t\t"readQueueNums":8,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"ReadOnly",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":2
\t\t}
\t}
}"""

# RocketMQ 5.x adds attributes, stateVersion and the static-topic mapping tables.
JAVA_TOPICS_5 = """{
\t"dataVersion":{
\t\t"counter":3,
\t\t"stateVersion":0,
\t\t"timestamp":1700000000001
\t},
\t"mappingDataVersion":{
\t\t"counter":0,
\t\t"stateVersion":0,
\t\t"timestamp":1700000000000
\t},
\t"topicConfigTable":{
\t\t"TopicTest":{
\t\t\t"attributes":{},
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":8,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"TopicTest",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":8
\t\t},
\t\t"ip-10-0-0-1.ec2.internal":{
\t\t\t"attributes":{},
\t\t\t"order":false,
\t\t\t"perm":7,
\t\t\t"readQueueNums":1,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"ip-10-0-0-1.ec2.internal",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":1
\t\t}
\t},
\t"topicQueueMappingDetailMap":{},
\t"topicQueueMappingInfoMap":{}
}"""


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_loads_a_rocketmq_4_topics_file(tmp_path):
    write_text(topics_file(tmp_path), JAVA_TOPICS_4)

    m = manager(tmp_path)

    assert m.data_version == DataVersion(7, 1699999999999)
    assert m.get("TopicTest") == TopicConfig("TopicTest", 4, 4)
    assert m.get("%RETRY%please_rename_unique_group_name_4") == TopicConfig(
        "%RETRY%please_rename_unique_group_name_4", 1, 1
    )
    assert m.get("ReadOnly") == TopicConfig("ReadOnly", 8, 2, 4, order=True)
    assert m.get(SCHEDULE_TOPIC) == TopicConfig(SCHEDULE_TOPIC, 18, 18)


def test_loads_a_rocketmq_5_topics_file_and_keeps_what_it_cannot_serve(tmp_path):
    write_text(topics_file(tmp_path), JAVA_TOPICS_5)

    m = manager(tmp_path)

    assert m.data_version == DataVersion(3, 1700000000001)
    assert m.get("TopicTest") == TopicConfig("TopicTest", 8, 8)
    # The Java broker's host-name topic breaks the naming rules: not served ...
    assert m.get("ip-10-0-0-1.ec2.internal") is None
    assert "ip-10-0-0-1.ec2.internal" not in {c.topic_name for c in m.topics()}

    m.create_or_update(TopicConfig("Other", 2, 2))

    # ... but not dropped from disk either.
    table = json.loads(topics_file(tmp_path).read_text())["topicConfigTable"]
    assert table["ip-10-0-0-1.ec2.internal"]["perm"] == 7
    assert table["Other"]["readQueueNums"] == 2
    assert manager(tmp_path).get("Other") == TopicConfig("Other", 2, 2)


def test_missing_fields_take_rocketmqs_defaults_and_the_key_names_the_topic(tmp_path):
    write_text(topics_file(tmp_path), '{"topicConfigTable": {"T": {"readQueueNums": 2}}}')

    m = manager(tmp_path)

    assert m.get("T") == TopicConfig("T", read_queue_nums=2)
    assert m.data_version.counter == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "expected a JSON object"),
        ('{"topicConfigTable": []}', "topicConfigTable is not an object"),
        ('{"dataVersion": {"counter": "x"}, "topicConfigTable": {}}', "dataVersion"),
    ],
)
def test_a_file_that_is_not_a_topic_table_is_an_error(tmp_path, text, message):
    write_text(topics_file(tmp_path), text)

    with pytest.raises(ValueError, match=message):
        manager(tmp_path)


@settings(max_examples=25)
@given(
    st.dictionaries(
        topic_names,
        st.tuples(st.integers(1, 1024), st.integers(1, 1024), st.integers(0, 15), st.booleans()),
        max_size=8,
    )
)
def test_topics_round_trip(entries):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # Two fixed clocks a day apart: a version read back from the file keeps the writer's
        # time, and one made up at load (nothing was ever written) has the reader's.
        m = manager(root, clock=lambda: 1_700_000_000_000)
        created = 0
        for name, (reads, writes, perm, order) in entries.items():
            if name not in SYSTEM_TOPICS:
                m.create_or_update(TopicConfig(name, reads, writes, perm, order=order))
                created += 1

        again = manager(root, clock=lambda: 1_700_086_400_000)

        assert again.topics() == m.topics()
        if created:
            assert again.data_version == m.data_version
        else:
            assert again.data_version == DataVersion(0, 1_700_086_400_000)


def test_topics_are_listed_by_name(tmp_path):
    m = manager(tmp_path)
    for name in ("b", "a", "c"):
        m.create_or_update(TopicConfig(name))

    names = [c.topic_name for c in m.topics()]

    assert names == sorted(names)
    assert {"a", "b", "c"} <= set(names)


# =============================================================================================
# System topics


def test_system_topics_exist_after_load_of_an_empty_store(tmp_path):
    m = manager(tmp_path)

    assert m.get(SCHEDULE_TOPIC) == TopicConfig(SCHEDULE_TOPIC, 18, 18, 6)
    assert m.get(TRANS_HALF_TOPIC) == TopicConfig(TRANS_HALF_TOPIC, 1, 1, 6)
    assert m.get(TRANS_OP_HALF_TOPIC) == TopicConfig(TRANS_OP_HALF_TOPIC, 1, 1, 6)
    # Loading never writes: an inspection tool may load a store it must not change.
    assert not (tmp_path / "config").exists()


def test_system_topics_exist_without_load_too(tmp_path):
    assert TopicConfigManager(tmp_path).get(TRANS_HALF_TOPIC) is not None


def test_schedule_topic_has_a_queue_per_delay_level(tmp_path):
    assert manager(tmp_path, delay_levels=5).get(SCHEDULE_TOPIC).write_queue_nums == 5


def test_system_topics_are_added_to_a_file_lacking_them(tmp_path):
    write_text(topics_file(tmp_path), JAVA_TOPICS_5)

    m = manager(tmp_path)

    assert SYSTEM_TOPICS <= {c.topic_name for c in m.topics()}


def test_stored_system_topic_wins_but_schedule_topic_is_widened_to_the_delay_levels(tmp_path):
    m = manager(tmp_path)
    m.create_or_update(TopicConfig(TRANS_HALF_TOPIC, 2, 2))
    m.create_or_update(TopicConfig(SCHEDULE_TOPIC, 18, 18, perm=4))

    again = manager(tmp_path, delay_levels=20)

    assert again.get(TRANS_HALF_TOPIC) == TopicConfig(TRANS_HALF_TOPIC, 2, 2)
    assert again.get(SCHEDULE_TOPIC) == TopicConfig(SCHEDULE_TOPIC, 20, 20, perm=4)


def test_system_topics_cannot_be_deleted(tmp_path):
    m = manager(tmp_path)

    with pytest.raises(ValueError, match="system topic"):
        m.delete(SCHEDULE_TOPIC)


def test_persist_writes_the_system_topics_without_a_version_bump(tmp_path):
    m = manager(tmp_path)

    m.persist()

    table = json.loads(topics_file(tmp_path).read_text())
    assert set(table["topicConfigTable"]) == SYSTEM_TOPICS
    assert table["dataVersion"]["counter"] == 0


def test_from_store_config(tmp_path):
    config = StoreConfig(
        store_path_root_dir=str(tmp_path),
        auto_create_topic_enable=False,
        default_topic_queue_nums=2,
        message_delay_level="1s 5s 10s",
    )

    m = TopicConfigManager.from_store_config(config)
    m.load()

    assert m.path == tmp_path / "config" / "topics.json"
    assert not m.auto_create_topic_enable and m.default_topic_queue_nums == 2
    assert m.get(SCHEDULE_TOPIC).read_queue_nums == 3


@pytest.mark.parametrize(
    "kwargs", [{"default_topic_queue_nums": 0}, {"default_topic_queue_nums": 1025}, {"delay_levels": 0}]
)
def test_manager_settings_are_validated(tmp_path, kwargs):
    with pytest.raises(ValueError, match="1..1024"):
        TopicConfigManager(tmp_path, **kwargs)


# =============================================================================================
# Auto-creation, permissions, queue ids


def test_first_put_auto_creates_the_topic(tmp_path):
    m = manager(tmp_path, default_topic_queue_nums=4)

    assert m.check_writable("NewTopic", 3) is None

    assert m.get("NewTopic") == TopicConfig("NewTopic", 4, 4, int(Permission.READ_WRITE))
    assert manager(tmp_path).get("NewTopic") == TopicConfig("NewTopic", 4, 4)
    assert "writeQueueNums is 4" in m.check_writable("NewTopic", 4)


def test_auto_create_returns_an_existing_topic_unchanged(tmp_path):
    m = manager(tmp_path)
    m.create_or_update(TopicConfig("T", 2, 2, 4))
    version = m.data_version

    assert m.auto_create("T") == TopicConfig("T", 2, 2, 4)
    assert m.data_version == version


def test_auto_create_disabled(tmp_path):
    m = manager(tmp_path, auto_create_topic_enable=False)

    assert m.auto_create("NewTopic") is None
    reason = m.check_writable("NewTopic", 0)

    assert "does not exist" in reason and "autoCreateTopicEnable" in reason
    assert m.get("NewTopic") is None
    assert not topics_file(tmp_path).exists()


def test_auto_create_refuses_a_bad_name(tmp_path):
    m = manager(tmp_path)

    with pytest.raises(ValueError, match="characters outside"):
        m.auto_create("a.b")
    assert "characters outside" in m.check_writable("a.b", 0)
    assert m.get("a.b") is None


def test_reads_never_create_topics(tmp_path):
    m = manager(tmp_path)

    assert "does not exist" in m.check_readable("Missing", 0)
    assert m.get("Missing") is None


def test_read_only_topic_refuses_writes(tmp_path):
    m = manager(tmp_path)
    m.create_or_update(TopicConfig("RO", 4, 4, Permission.READ))

    assert "not writable" in m.check_writable("RO", 0)
    assert m.check_readable("RO", 0) is None


def test_write_only_topic_refuses_reads(tmp_path):
    m = manager(tmp_path)
    m.create_or_update(TopicConfig("WO", 4, 4, Permission.WRITE))

    assert "not readable" in m.check_readable("WO", 0)
    assert m.check_writable("WO", 0) is None


def test_no_permission_refuses_both(tmp_path):
    m = manager(tmp_path)
    m.create_or_update(TopicConfig("None", 4, 4, 0))

    assert m.check_writable("None", 0) and m.check_readable("None", 0)


def test_queue_id_ranges_follow_read_and_write_queue_nums(tmp_path):
    m = manager(tmp_path)
    m.create_or_update(TopicConfig("T", read_queue_nums=8, write_queue_nums=2))

    assert m.check_writable("T", 1) is None
    assert "writeQueueNums is 2" in m.check_writable("T", 2)
    assert m.check_readable("T", 7) is None
    assert "readQueueNums is 8" in m.check_readable("T", 8)
    assert "out of range" in m.check_writable("T", -1)
    assert "out of range" in m.check_readable("T", -1)


def test_concurrent_first_puts_create_the_topic_once(tmp_path):
    m = manager(tmp_path)
    barrier = threading.Barrier(8)
    reasons = []

    def put():
        barrier.wait(timeout=10)
        reasons.append(m.check_writable("Shared", 0))

    threads = [threading.Thread(target=put) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)

    assert reasons == [None] * 8
    assert m.data_version.counter == 1


# =============================================================================================
# Data version


def test_data_version_bumps_on_every_change(tmp_path):
    clock = Clock(1000)
    m = manager(tmp_path, clock=clock)
    assert m.data_version == DataVersion(0, 1000)

    clock.now = 2000
    m.create_or_update(TopicConfig("T", 4, 4))
    assert m.data_version == DataVersion(1, 2000)

    clock.now = 3000
    m.create_or_update(TopicConfig("T", 8, 8))
    assert m.data_version == DataVersion(2, 3000)

    clock.now = 4000
    m.auto_create("Auto")
    assert m.data_version == DataVersion(3, 4000)

    clock.now = 5000
    assert m.delete("T") is True
    assert m.data_version == DataVersion(4, 5000)
    assert manager(tmp_path).data_version == DataVersion(4, 5000)


def test_no_change_no_bump(tmp_path):
    m = manager(tmp_path)
    m.create_or_update(TopicConfig("T", 4, 4))
    version = m.data_version

    m.create_or_update(TopicConfig("T", 4, 4))
    assert m.delete("Missing") is False

    assert m.data_version == version


def test_delete_removes_the_topic_from_disk(tmp_path):
    m = manager(tmp_path)
    m.create_or_update(TopicConfig("T"))

    assert m.delete("T") is True

    assert m.get("T") is None
    assert manager(tmp_path).get("T") is None


def test_delete_removes_an_unserved_java_entry(tmp_path):
    write_text(topics_file(tmp_path), JAVA_TOPICS_5)
    m = manager(tmp_path)

    assert m.delete("ip-10-0-0-1.ec2.internal") is True

    assert "ip-10-0-0-1.ec2.internal" not in json.loads(topics_file(tmp_path).read_text())["topicConfigTable"]


def test_a_failed_write_changes_nothing(tmp_path, monkeypatch):
    m = manager(tmp_path)
    m.create_or_update(TopicConfig("T", 4, 4))
    version = m.data_version

    def fail(path, content):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("store.metadata.topic_config.write_json_atomically", fail)
    with pytest.raises(OSError):
        m.create_or_update(TopicConfig("T", 8, 8))

    assert m.get("T") == TopicConfig("T", 4, 4)
    assert m.data_version == version


# =============================================================================================
# Crash safety (store.json_file's protocol: NAME.tmp written, NAME -> NAME.bak, NAME.tmp -> NAME)


def two_versions(root: Path) -> tuple[dict, dict]:
    """Persist an old table, and return it and the content the next write would hold."""
    m = manager(root)
    m.create_or_update(TopicConfig("Old", 4, 4))
    old = json.loads(topics_file(root).read_text())
    new = json.loads(json.dumps(old))
    new["dataVersion"]["counter"] += 1
    new["topicConfigTable"]["New"] = TopicConfig("New", 2, 2).to_json()
    return old, new


def test_crash_after_tmp_written_before_rename_loads_the_old_table(tmp_path):
    two_versions(tmp_path)
    path = topics_file(tmp_path)
    # The tmp file may be torn too: a crash can stop the write anywhere.
    path.with_name("topics.json.tmp").write_text('{"dataVersion": {"counter": 2}, "topicConfigT')

    m = manager(tmp_path)

    assert m.get("Old") is not None and m.get("New") is None
    assert m.data_version.counter == 1


def test_crash_after_bak_rename_loads_the_old_table(tmp_path):
    _, new = two_versions(tmp_path)
    path = topics_file(tmp_path)
    path.with_name("topics.json.tmp").write_text(json.dumps(new))
    os.replace(path, path.with_name("topics.json.bak"))

    m = manager(tmp_path)

    assert m.get("Old") is not None and m.get("New") is None
    assert m.data_version.counter == 1
    # And the store carries on: the next change is written and read back.
    m.create_or_update(TopicConfig("Next", 1, 1))
    again = manager(tmp_path)
    assert again.get("Next") is not None and again.get("Old") is not None
    assert again.data_version.counter == 2


def test_corrupt_main_file_falls_back_to_bak(tmp_path, caplog):
    m = manager(tmp_path)
    m.create_or_update(TopicConfig("First"))
    m.create_or_update(TopicConfig("Second"))
    topics_file(tmp_path).write_bytes(b'{"dataVersion": {"coun\x00\x00\x00')

    again = manager(tmp_path)

    # .bak holds the table before the last change.
    assert again.get("First") is not None and again.get("Second") is None
    assert again.data_version.counter == 1
    assert "does not parse" in caplog.text


def test_a_write_keeps_the_last_good_content_as_the_backup(tmp_path):
    path = tmp_path / "config" / "table.json"
    write_json_atomically(path, {"version": 1})
    write_json_atomically(path, {"version": 2})
    assert json.loads(path.with_name("table.json.bak").read_text()) == {"version": 1}
    # A main file that does not parse is not rotated over the backup a reader falls back to.
    path.write_bytes(b'{"version": 3, "tor')
    write_json_atomically(path, {"version": 4})
    assert json.loads(path.with_name("table.json.bak").read_text()) == {"version": 1}
    assert read_json(path) == {"version": 4}
    assert not path.with_name("table.json.tmp").exists()


def test_corrupt_file_without_backup_is_an_error(tmp_path):
    write_text(topics_file(tmp_path), "{not json")

    with pytest.raises(ValueError, match="topics.json"):
        manager(tmp_path)


# =============================================================================================
# ConsumerOffsetManager


def offsets(root: Path) -> ConsumerOffsetManager:
    m = ConsumerOffsetManager(root)
    m.load()
    return m


def test_consumer_offset_json_shape(tmp_path):
    m = offsets(tmp_path)
    m.commit_offset("group_a", "TopicTest", 0, 12)
    m.commit_offset("group_a", "TopicTest", 1, 3)
    m.commit_offset("group_b", "%RETRY%group_b", 0, 0)
    m.persist()

    content = json.loads(offsets_file(tmp_path).read_text())

    assert content == {
        "offsetTable": {
            "TopicTest@group_a": {"0": 12, "1": 3},
            "%RETRY%group_b@group_b": {"0": 0},
        }
    }


# RocketMQ 4.x's consumerOffset.json: fastjson writes int keys unquoted, and breaks lines oddly.
JAVA_OFFSETS_4 = """{
\t"offsetTable":{
\t\t"%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4":{0:0
\t\t},
\t\t"TopicTest@please_rename_unique_group_name_4":{0:250,1:251,2:249,3:250
\t\t},
\t\t"TopicTest@other_group":{10:9007199254740993,3:0
\t\t}
\t}
}"""

# RocketMQ 5.x writes a dataVersion beside the table.
JAVA_OFFSETS_5 = """{
\t"dataVersion":{
\t\t"counter":12,
\t\t"stateVersion":0,
\t\t"timestamp":1700000000000
\t},
\t"offsetTable":{
\t\t"TopicTest@cg":{0:5,1:6
\t\t}
\t}
}"""


def test_loads_a_rocketmq_4_offsets_file(tmp_path):
    write_text(offsets_file(tmp_path), JAVA_OFFSETS_4)

    m = offsets(tmp_path)

    assert m.query_offsets("please_rename_unique_group_name_4", "TopicTest") == {0: 250, 1: 251, 2: 249, 3: 250}
    assert m.query_offset("please_rename_unique_group_name_4", "%RETRY%please_rename_unique_group_name_4", 0) == 0
    # Java longs beyond 2**53 survive (no float round trip).
    assert m.query_offset("other_group", "TopicTest", 10) == 9007199254740993
    assert m.groups_of("TopicTest") == {"please_rename_unique_group_name_4", "other_group"}
    assert not m.dirty


def test_loads_a_rocketmq_5_offsets_file(tmp_path):
    write_text(offsets_file(tmp_path), JAVA_OFFSETS_5)

    assert offsets(tmp_path).query_offsets("cg", "TopicTest") == {0: 5, 1: 6}


def test_a_java_file_rewritten_by_us_keeps_its_offsets(tmp_path):
    write_text(offsets_file(tmp_path), JAVA_OFFSETS_4)
    m = offsets(tmp_path)
    m.persist()

    content = json.loads(offsets_file(tmp_path).read_text())

    assert content["offsetTable"]["TopicTest@other_group"] == {"3": 0, "10": 9007199254740993}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1]", "expected a JSON object"),
        ('{"offsetTable": 3}', "offsetTable is not an object"),
        ('{"offsetTable": {"NoSeparator": {"0": 1}}}', "not topic@group"),
        ('{"offsetTable": {"a@b@c": {"0": 1}}}', "not topic@group"),
        ('{"offsetTable": {"@g": {"0": 1}}}', "not topic@group"),
        ('{"offsetTable": {"t@g": [1]}}', "queue id -> offset"),
        ('{"offsetTable": {"t@g": {"x": 1}}}', "queue id 'x'"),
        ('{"offsetTable": {"t@g": {"1_0": 1}}}', "queue id '1_0'"),
        ('{"offsetTable": {"t@g": {"0": -2}}}', "bad entry"),
        ('{"offsetTable": {"t@g": {"0": 1.5}}}', "bad entry"),
    ],
)
def test_a_file_that_is_not_an_offset_table_is_an_error(tmp_path, text, message):
    write_text(offsets_file(tmp_path), text)

    with pytest.raises(ValueError, match=message):
        offsets(tmp_path)


def test_missing_file_is_an_empty_table(tmp_path):
    m = offsets(tmp_path)

    assert m.query_offset("g", "t", 0) == -1
    assert m.query_offsets("g", "t") == {}
    assert m.groups_of("t") == set() and m.topics_of("g") == set()


def test_queries(tmp_path):
    m = offsets(tmp_path)
    m.commit_offset("g1", "t1", 0, 10)
    m.commit_offset("g1", "t2", 3, 7)
    m.commit_offset("g2", "t1", 1, 4)

    assert m.query_offset("g1", "t1", 0) == 10
    assert m.query_offset("g1", "t1", 1) == -1
    assert m.query_offset("g9", "t1", 0) == -1
    assert m.query_offsets("g1", "t2") == {3: 7}
    assert m.groups_of("t1") == {"g1", "g2"}
    assert m.topics_of("g1") == {"t1", "t2"}


def test_query_offsets_returns_a_copy(tmp_path):
    m = offsets(tmp_path)
    m.commit_offset("g", "t", 0, 1)

    m.query_offsets("g", "t")[0] = 99

    assert m.query_offset("g", "t", 0) == 1


def test_last_commit_wins_even_backwards(tmp_path):
    """A consumer resetting its offset commits a smaller one; RocketMQ takes it."""
    m = offsets(tmp_path)
    m.commit_offset("g", "t", 0, 100)
    m.commit_offset("g", "t", 0, 40)

    assert m.query_offset("g", "t", 0) == 40


def test_remove_group(tmp_path):
    m = offsets(tmp_path)
    m.commit_offset("g1", "t1", 0, 1)
    m.commit_offset("g1", "t2", 0, 1)
    m.commit_offset("g2", "t1", 0, 2)
    m.persist()

    m.remove_group("g1")

    assert m.topics_of("g1") == set() and m.query_offset("g1", "t1", 0) == -1
    assert m.groups_of("t1") == {"g2"}
    assert m.persist_if_dirty()
    assert offsets(tmp_path).topics_of("g1") == set()
    m.remove_group("absent")
    assert not m.dirty


def test_the_table_refuses_new_entries_past_its_limit_but_keeps_committing_held_ones(tmp_path):
    """Issue 30: clients naming new groups grew consumerOffset.json without end."""
    m = ConsumerOffsetManager(tmp_path, max_entries=3)
    assert [m.commit_offset("g", "t", q, 1) for q in range(3)] == [OffsetCommit.COMMITTED] * 3
    assert m.commit_offset("g", "t", 3, 1) is OffsetCommit.TABLE_FULL
    assert m.commit_offset("other", "t", 0, 1) is OffsetCommit.TABLE_FULL
    assert m.query_offset("g", "t", 3) == -1 and m.groups_of("t") == {"g"}
    assert "consumerOffsetMaxEntries" in m.table_full_reason()
    assert m.commit_offset("g", "t", 2, 9) is OffsetCommit.COMMITTED and m.query_offset("g", "t", 2) == 9
    # The operator's reset is not held to the limit; removing entries makes room again.
    assert m.commit_offset("ops", "t", 0, 5, bounded=False) is OffsetCommit.COMMITTED
    assert m.entries == 4
    m.remove_group("ops")
    m.remove_topic("t")
    assert m.entries == 0 and m.commit_offset("new", "t2", 0, 1) is OffsetCommit.COMMITTED
    # A master's table copied to its slave, and a loaded file, count but are taken whole.
    m.merge_from({"offsetTable": {f"t@g{i}": {"0": 1, "1": 2} for i in range(3)}})
    assert m.entries == 7
    m.persist()
    loaded = ConsumerOffsetManager(tmp_path, max_entries=3)
    loaded.load()
    assert loaded.entries == 7 and loaded.commit_offset("g9", "t", 0, 1) is OffsetCommit.TABLE_FULL


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("g@x", "t", 0, 0), "group name .* characters outside"),
        (("g", "t@x", 0, 0), "topic name .* characters outside"),
        (("", "t", 0, 0), "group name is empty"),
        (("g", "", 0, 0), "topic name is empty"),
        (("g" * 256, "t", 0, 0), "at most 255"),
        (("g", "t" * 128, 0, 0), "at most 127"),
        (("g", "t", -1, 0), "queue id"),
        (("g", "t", True, 0), "queue id"),
        (("g", "t", 2**31, 0), "queue id"),
        (("g", "t", 0, -1), "offset"),
        (("g", "t", 0, 2**63), "offset"),
        (("g", "t", 0, 1.0), "offset"),
    ],
)
def test_commit_validation(tmp_path, args, message):
    m = offsets(tmp_path)

    with pytest.raises(ValueError, match=message):
        m.commit_offset(*args)
    assert not m.dirty


def test_commits_stay_in_memory_until_persisted(tmp_path):
    m = offsets(tmp_path)
    assert not m.persist_if_dirty()

    m.commit_offset("g", "t", 0, 5)

    assert not offsets_file(tmp_path).exists()
    assert m.dirty
    assert m.persist_if_dirty() is True
    assert not m.dirty and m.persist_if_dirty() is False
    assert offsets(tmp_path).query_offset("g", "t", 0) == 5


def test_a_failed_persist_stays_dirty(tmp_path, monkeypatch):
    m = offsets(tmp_path)
    m.commit_offset("g", "t", 0, 5)

    def fail(path, content):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(consumer_offset_module, "write_json_atomically", fail)
    with pytest.raises(OSError):
        m.persist()
    assert m.dirty

    monkeypatch.undo()
    assert m.persist_if_dirty()
    assert offsets(tmp_path).query_offset("g", "t", 0) == 5


offset_tables = st.dictionaries(
    st.tuples(topic_names, group_names),
    st.dictionaries(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1), min_size=1, max_size=5),
    max_size=6,
)


# Each example fsyncs files: fewer of them keep the suite quick on a shared machine.
@settings(max_examples=40)
@given(offset_tables)
def test_offsets_round_trip(table):
    with tempfile.TemporaryDirectory() as tmp:
        m = offsets(Path(tmp))
        for (topic, group), queues in table.items():
            for queue_id, offset in queues.items():
                m.commit_offset(group, topic, queue_id, offset)
        m.persist()

        again = offsets(Path(tmp))

        for (topic, group), queues in table.items():
            assert again.query_offsets(group, topic) == queues
            assert again.groups_of(topic) == {g for t, g in table if t == topic}
            assert again.topics_of(group) == {t for t, g in table if g == group}


def test_concurrent_commits_end_with_each_queues_last_offset(tmp_path):
    """Eight threads, each owning two queues of a shared topic and group, commit increasing
    offsets while another thread persists; every queue ends at the max its writer wrote, in
    memory and on disk."""
    m = offsets(tmp_path)
    threads_n, commits = 8, 300
    barrier = threading.Barrier(threads_n + 1)
    stop = threading.Event()

    def consumer(index):
        barrier.wait(timeout=10)
        for offset in range(commits):
            m.commit_offset("group", "Topic", 2 * index, offset)
            m.commit_offset("group", "Topic", 2 * index + 1, offset * 2)
            m.commit_offset(f"own{index}", "Topic", 0, offset)

    def persister():
        barrier.wait(timeout=10)
        while not stop.is_set():
            m.persist_if_dirty()

    workers = [threading.Thread(target=consumer, args=(i,)) for i in range(threads_n)]
    flusher = threading.Thread(target=persister)
    for t in [*workers, flusher]:
        t.start()
    for t in workers:
        t.join(timeout=60)
    stop.set()
    flusher.join(timeout=60)
    m.persist_if_dirty()

    expected = {}
    for i in range(threads_n):
        expected[2 * i] = commits - 1
        expected[2 * i + 1] = (commits - 1) * 2
    assert m.query_offsets("group", "Topic") == expected
    assert offsets(tmp_path).query_offsets("group", "Topic") == expected
    assert m.groups_of("Topic") == {"group"} | {f"own{i}" for i in range(threads_n)}


def test_clamp_to_min(tmp_path):
    m = offsets(tmp_path)
    m.commit_offset("g1", "t", 0, 5)
    m.commit_offset("g1", "t", 1, 50)
    m.commit_offset("g2", "t", 0, 120)
    m.commit_offset("g2", "u", 0, 0)
    m.persist()
    calls = []
    mins = {("t", 0): 100, ("t", 1): 10, ("u", 0): -1}

    def min_offsets(topic, queue_id):
        calls.append((topic, queue_id))
        return mins[(topic, queue_id)]

    assert m.clamp_to_min(min_offsets) == 1

    assert m.query_offsets("g1", "t") == {0: 100, 1: 50}
    assert m.query_offset("g2", "t", 0) == 120
    assert m.query_offset("g2", "u", 0) == 0
    # One store lookup per queue, however many groups read it.
    assert sorted(calls) == [("t", 0), ("t", 1), ("u", 0)]
    assert m.persist_if_dirty()
    assert offsets(tmp_path).query_offset("g1", "t", 0) == 100


def test_clamp_to_min_without_corrections_is_not_a_change(tmp_path):
    m = offsets(tmp_path)
    m.commit_offset("g", "t", 0, 5)
    m.persist()

    assert m.clamp_to_min(lambda topic, queue_id: 0) == 0
    assert not m.dirty


def test_clamp_to_min_may_call_back_into_the_manager(tmp_path):
    """The callback runs without the lock held: a store callback may take locks of its own (or
    even query offsets) without deadlocking."""
    m = offsets(tmp_path)
    m.commit_offset("g", "t", 0, 1)

    def min_offsets(topic, queue_id):
        m.commit_offset("g", "t", 1, 0)
        return m.query_offset("g", "t", queue_id) + 1

    assert m.clamp_to_min(min_offsets) == 1
    assert m.query_offset("g", "t", 0) == 2


@given(
    st.dictionaries(st.integers(0, 7), st.integers(0, 1000), min_size=1),
    st.dictionaries(st.integers(0, 7), st.integers(-1, 1000)),
)
def test_clamp_to_min_property(committed, mins):
    with tempfile.TemporaryDirectory() as tmp:
        m = offsets(Path(tmp))
        for queue_id, offset in committed.items():
            m.commit_offset("g", "t", queue_id, offset)

        m.clamp_to_min(lambda topic, queue_id: mins.get(queue_id, 0))

        for queue_id, offset in committed.items():
            assert m.query_offset("g", "t", queue_id) == max(offset, mins.get(queue_id, 0))


def test_offsets_crash_before_rename_and_after_bak_rename(tmp_path):
    m = offsets(tmp_path)
    m.commit_offset("g", "t", 0, 10)
    m.persist()
    path = offsets_file(tmp_path)
    tmp = path.with_name("consumerOffset.json.tmp")

    # Crash while the tmp file is being written: a torn tmp file is ignored.
    tmp.write_text('{"offsetTable": {"t@g": {"0": 2')
    assert offsets(tmp_path).query_offset("g", "t", 0) == 10

    # Crash after NAME -> NAME.bak, before NAME.tmp -> NAME: the old table, from the backup.
    tmp.write_text(json.dumps({"offsetTable": {"t@g": {"0": 20}}}))
    os.replace(path, path.with_name("consumerOffset.json.bak"))
    recovered = offsets(tmp_path)
    assert recovered.query_offset("g", "t", 0) == 10

    recovered.commit_offset("g", "t", 0, 30)
    recovered.persist()
    assert offsets(tmp_path).query_offset("g", "t", 0) == 30


def test_offsets_corrupt_main_file_falls_back_to_bak(tmp_path):
    m = offsets(tmp_path)
    m.commit_offset("g", "t", 0, 10)
    m.persist()
    m.commit_offset("g", "t", 0, 20)
    m.persist()
    offsets_file(tmp_path).write_text("")

    assert offsets(tmp_path).query_offset("g", "t", 0) == 10
