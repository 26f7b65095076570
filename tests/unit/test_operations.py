"""What the operations features decide without a broker: live config changes of a store, a
deleted topic's offsets, put latency per status and fsync latency in the statistics, and how a
native library's stderr line becomes a log record."""

from __future__ import annotations

import logging

import pytest

from rocketstore.broker.logs import native_record
from store import ConfigError, Message, MessageStore, PutMessageStatus, StoreConfig
from store.metadata.consumer_offset import ConsumerOffsetManager
from store.stats import StoreStats
from store.status import FlushDiskType


def open_store(tmp_path, **kw) -> MessageStore:
    store = MessageStore(
        StoreConfig(
            store_path_root_dir=str(tmp_path / "store"),
            mapped_file_size_commit_log=64 * 1024,
            mapped_file_size_consume_queue=20480,
            max_hash_slot_num=512,
            max_index_num=2048,
            **kw,
        )
    )
    store.load()
    store.start()
    return store


def test_live_keys_change_a_running_store_and_others_are_refused_whole(tmp_path):
    store = open_store(tmp_path)
    try:
        assert store.auto_create_topic("Before").topic_name == "Before"
        changed = store.update_config({"autoCreateTopicEnable": "false", "fileReservedTime": "12"})
        assert changed.auto_create_topic_enable is False and store.config.file_reserved_time_h == 12
        assert "autoCreateTopicEnable is false" in store.auto_create_topic("After").reason
        with pytest.raises(ConfigError, match="brokerRole: not changeable on a running broker"):
            store.update_config({"brokerRole": "SLAVE", "fileReservedTime": "1"})
        with pytest.raises(ConfigError, match="fileReservedTime"):
            store.update_config({"fileReservedTime": "soon"})
        # Neither refused change left anything behind.
        assert store.config.file_reserved_time_h == 12
        store.update_config({"autoCreateTopicEnable": "true"})
        assert store.auto_create_topic("After").topic_name == "After"
    finally:
        store.shutdown()


def test_a_deleted_topics_offsets_go_with_it(tmp_path):
    offsets = ConsumerOffsetManager(tmp_path)
    offsets.commit_offset("g1", "T", 0, 5)
    offsets.commit_offset("g2", "T", 1, 7)
    offsets.commit_offset("g1", "Other", 0, 3)
    assert offsets.remove_topic("T") == ["g1", "g2"]
    assert offsets.groups_of("T") == set() and offsets.query_offset("g1", "Other", 0) == 3
    assert offsets.remove_topic("T") == []


def test_statistics_keep_put_latency_per_status_and_fsync_latency():
    stats = StoreStats(lambda: 1_000)
    stats.record_put(PutMessageStatus.PUT_OK, 1, 50)
    stats.record_put(PutMessageStatus.PUT_OK, 1, 2_000)
    stats.record_put(PutMessageStatus.FLUSH_DISK_TIMEOUT, 1, 6_000_000)
    stats.record_fsync(300)
    snap = stats.snapshot(
        2_000,
        dispatch_lag_bytes=0,
        dispatch_lag_ms=0,
        commit_log_min_offset=0,
        commit_log_max_offset=0,
        flushed_offset=0,
    )
    ok = snap.put_latency_by_status["PUT_OK"]
    assert (ok.count, ok.sum_us, ok.counts[0], ok.counts[3]) == (2, 2_050, 1, 1)
    timeout = snap.put_latency_by_status["FLUSH_DISK_TIMEOUT"]
    assert timeout.count == 1 and timeout.counts[13] == 1  # the 5-10 s bucket
    assert set(snap.put_latency_by_status) == {"PUT_OK", "FLUSH_DISK_TIMEOUT"}
    assert (snap.fsync_latency.count, snap.fsync_latency.counts[1]) == (1, 1)
    assert snap.as_dict()["fsync_latency"] == {"counts": list(snap.fsync_latency.counts), "sum_us": 300}


def test_a_sync_flush_store_times_its_fsyncs(tmp_path):
    store = open_store(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    try:
        assert store.put_message(Message(topic="T", queue_id=0, body=b"x")).status is PutMessageStatus.PUT_OK
        assert store.stats_snapshot().fsync_latency.count >= 1
    finally:
        store.shutdown()


def test_native_stderr_lines_become_records():
    line = "E1125 07:36:35.143211   12345 ev_epoll1_linux.cc:42] epoll failed"
    assert native_record(line) == (logging.ERROR, "epoll failed")
    assert native_record("I0000 00:00:1732518000.1 777 server.cc:9] started") == (logging.INFO, "started")
    assert native_record("WARNING: All log messages before absl::InitializeLog()") == (
        logging.WARNING,
        "WARNING: All log messages before absl::InitializeLog()",
    )
