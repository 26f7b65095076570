"""Java-properties parsing and binding (store/properties.py) and StoreConfig (store/config.py)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import pytest

from store.config import DEFAULT_MESSAGE_DELAY_LEVEL, StoreConfig
from store.properties import (
    ConfigError,
    bind,
    load_properties,
    parse_overrides,
    parse_properties,
    snake_to_camel,
    to_properties,
)
from store.status import BrokerRole, FlushDiskType

# ---------------------------------------------------------------------------------------------
# parse_properties


def test_comments_and_blank_lines_are_skipped():
    text = "# a comment\n! another\n   # indented comment\n\n   \nkey=value\n"

    assert parse_properties(text) == {"key": "value"}


@pytest.mark.parametrize(
    "line",
    [
        "key=value",
        "key:value",
        "key value",
        "key\tvalue",
        "key = value",
        "key  :  value",
        "   key=value",
        "key \t value",
    ],
)
def test_separators(line):
    assert parse_properties(line) == {"key": "value"}


def test_only_the_first_separator_splits():
    assert parse_properties("url = http://host:80/a=b") == {"url": "http://host:80/a=b"}
    assert parse_properties("key = = value") == {"key": "= value"}


@pytest.mark.parametrize("line", ["key=", "key", "key =   ", "key:"])
def test_empty_values(line):
    assert parse_properties(line) == {"key": ""}


def test_line_continuation():
    text = "messageDelayLevel=1s 5s \\\n     10s \\\n  30s\nnext=1\n"

    assert parse_properties(text) == {"messageDelayLevel": "1s 5s 10s 30s", "next": "1"}


def test_continued_line_starting_with_hash_is_not_a_comment():
    assert parse_properties("key=a\\\n#b") == {"key": "a#b"}


def test_escaped_backslash_does_not_continue():
    assert parse_properties("path=C:\\\\dir\\\\\nnext=1") == {"path": "C:\\dir\\", "next": "1"}


def test_escapes_in_values_and_keys():
    text = "tab=a\\tb\nnl=a\\nb\nuni=\\u0041\\u00e9\nother=\\q\nmy\\ key\\=x\\:y=v\n"

    assert parse_properties(text) == {
        "tab": "a\tb",
        "nl": "a\nb",
        "uni": "A\u00e9",
        "other": "q",
        "my key=x:y": "v",
    }


def test_escaped_trailing_space_is_kept():
    # Java keeps "value " here; the backslash escapes the space and does not continue the line.
    assert parse_properties("key=value\\ \nnext=1") == {"key": "value ", "next": "1"}


def test_escaped_backslash_before_separator():
    # "\\\\" is one literal backslash, so the "=" after it is a real separator (Java: key "k\\").
    assert parse_properties("k\\\\=v") == {"k\\": "v"}


def test_malformed_unicode_escape_is_a_config_error():
    with pytest.raises(ConfigError, match="bad"):
        parse_properties("ok=1\nbad=\\uZZZZ", "broker.conf")


def test_only_java_line_terminators_end_lines():
    # Java ends lines at \n, \r and \r\n only; \f is whitespace and NEL/U+2028 are value text.
    text = "a=1\r\nb=2\rc=3\nkey\f=x\x85y\u2028z\x1cw"

    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "key": "x\x85y\u2028z\x1cw"}


def test_later_keys_win():
    assert parse_properties("a=1\na=2") == {"a": "2"}


def test_line_without_key_is_an_error():
    with pytest.raises(ConfigError, match=r"broker\.conf:2"):
        parse_properties("a=1\n=value\n", "broker.conf")


def test_load_properties(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text("brokerName=broker-a\n# x\nlistenPort=10911\n", encoding="utf-8")

    assert load_properties(path) == {"brokerName": "broker-a", "listenPort": "10911"}
    with pytest.raises(ConfigError, match="missing.conf"):
        load_properties(tmp_path / "missing.conf")


# ---------------------------------------------------------------------------------------------
# parse_overrides


def test_overrides():
    args = ["--brokerRole=SLAVE", "--messageDelayLevel=1s 5s", "--haMasterAddress=a=b", "--deleteWhen="]

    assert parse_overrides(args) == {
        "brokerRole": "SLAVE",
        "messageDelayLevel": "1s 5s",
        "haMasterAddress": "a=b",
        "deleteWhen": "",
    }


@pytest.mark.parametrize("arg", ["brokerRole=SLAVE", "-brokerRole=SLAVE", "--brokerRole", "--", ""])
def test_malformed_overrides(arg):
    with pytest.raises(ConfigError, match="--key=value"):
        parse_overrides([arg])


def test_override_with_empty_key_is_malformed():
    with pytest.raises(ConfigError):
        parse_overrides(["--=SLAVE"])


# ---------------------------------------------------------------------------------------------
# bind / to_properties on a dataclass of every supported type


class Colour(enum.Enum):
    RED = "RED"
    BLUE = "BLUE"


@dataclass(frozen=True)
class Sample:
    count: int = 1
    ratio: float = 0.5
    enabled: bool = False
    colour: Colour = Colour.RED
    label: str = "x"
    timeout_ms: int = field(default=10, metadata={"key": "timeout"})


def test_snake_to_camel():
    assert snake_to_camel("mapped_file_size_commit_log") == "mappedFileSizeCommitLog"
    assert snake_to_camel("listen") == "listen"


def test_bind_converts_every_type():
    props = {"count": " 7 ", "ratio": "2.5", "enabled": "TRUE", "colour": "blue", "label": " a b ", "timeout": "99"}

    sample, unused = bind(Sample, props)

    assert sample == Sample(count=7, ratio=2.5, enabled=True, colour=Colour.BLUE, label="a b", timeout_ms=99)
    assert unused == {}


def test_bind_returns_unused_keys():
    sample, unused = bind(Sample, {"count": "3", "timeoutMs": "5", "brokerName": "b"})

    assert sample == Sample(count=3)
    assert unused == {"timeoutMs": "5", "brokerName": "b"}


def test_bind_fixed_values_win():
    sample, unused = bind(Sample, {"count": "3"}, count=4)

    assert sample.count == 4
    assert unused == {"count": "3"}


@pytest.mark.parametrize(
    "key, text",
    [("count", "many"), ("count", "1.5"), ("ratio", "half"), ("enabled", "yes"), ("colour", "GREEN"), ("timeout", "")],
)
def test_bind_bad_values_name_the_key(key, text):
    with pytest.raises(ConfigError, match=key):
        bind(Sample, {key: text})


def test_to_properties_round_trip():
    sample = Sample(count=9, ratio=0.25, enabled=True, colour=Colour.BLUE, label="lbl", timeout_ms=3)

    props = to_properties(sample)

    assert props == {"count": "9", "ratio": "0.25", "enabled": "true", "colour": "BLUE", "label": "lbl", "timeout": "3"}
    assert bind(Sample, props) == (sample, {})


# ---------------------------------------------------------------------------------------------
# StoreConfig


def test_rocketmq_defaults():
    config = StoreConfig()

    assert config.mapped_file_size_commit_log == 1024 * 1024 * 1024
    assert config.mapped_file_size_consume_queue == 300_000 * 20
    assert config.max_message_size == 4 * 1024 * 1024
    assert config.sync_flush_timeout_ms == 5000
    assert config.slave_timeout_ms == 3000
    assert config.flush_interval_commit_log_ms == 500
    assert config.flush_commit_log_least_pages == 4
    assert config.broker_role is BrokerRole.ASYNC_MASTER
    assert config.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert config.file_reserved_time_h == 72
    assert config.delete_when == "04"
    assert config.message_delay_level == DEFAULT_MESSAGE_DELAY_LEVEL
    assert DEFAULT_MESSAGE_DELAY_LEVEL == "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
    assert config.listen_port == 10911
    assert config.transient_store_pool_enable is False
    assert config.store_path_root_dir.endswith("store")


def test_rocketmq_keys_bind_to_fields():
    props = {
        "syncFlushTimeout": "1234",
        "slaveTimeout": "777",
        "brokerIP1": "10.0.6.82",
        "listenPort": "8123",
        "fileReservedTime": "48",
        "flushDiskType": "SYNC_FLUSH",
        "brokerRole": "SYNC_MASTER",
        "mappedFileSizeCommitLog": "65536",
        "transientStorePoolEnable": "true",
        "flushIntervalCommitLog": "100",
        "flushCommitLogLeastPages": "0",
        "osPageCacheBusyTimeOutMills": "50",
        "checkCRCOnRecover": "false",
        "deleteWhen": "01;13",
        "storePathRootDir": "/data/store",
    }

    config, unknown = StoreConfig.from_properties(props)

    assert unknown == {}
    assert config.sync_flush_timeout_ms == 1234
    assert config.slave_timeout_ms == 777
    assert config.broker_ip1 == "10.0.6.82"
    assert config.store_host == ("10.0.6.82", 8123)
    assert config.file_reserved_time_h == 48
    assert config.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert config.broker_role is BrokerRole.SYNC_MASTER
    assert config.mapped_file_size_commit_log == 65536
    assert config.transient_store_pool_enable is True
    assert config.flush_interval_commit_log_ms == 100
    assert config.flush_commit_log_least_pages == 0
    assert config.os_page_cache_busy_timeout_ms == 50
    assert config.check_crc_on_recover is False
    assert config.delete_when == "01;13"
    assert str(config.commit_log_dir) == "/data/store/commitlog"


def test_unknown_keys_are_returned():
    config, unknown = StoreConfig.from_properties(
        {"brokerName": "broker-a", "slaveTimeout": "10", "sync_flush_timeout_ms": "1"}
    )

    assert config.slave_timeout_ms == 10
    assert unknown == {"brokerName": "broker-a", "sync_flush_timeout_ms": "1"}


def test_from_file(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text("brokerRole=SLAVE\nsyncFlushTimeout=100\n", encoding="utf-8")

    config = StoreConfig.from_file(path, overrides={"syncFlushTimeout": "200"})

    assert config.broker_role is BrokerRole.SLAVE
    assert config.sync_flush_timeout_ms == 200


def test_from_file_rejects_unknown_keys(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text("brokerName=broker-a\nsyncFlushTimeout=100\nnamesrvAddr=x:9876\n", encoding="utf-8")

    with pytest.raises(ConfigError, match="brokerName, namesrvAddr"):
        StoreConfig.from_file(path)


@pytest.mark.parametrize(
    "key, text",
    [
        ("syncFlushTimeout", "soon"),
        ("flushDiskType", "SOMETIMES"),
        ("brokerRole", "LEADER"),
        ("transientStorePoolEnable", "yes"),
        ("listenPort", "10911.0"),
    ],
)
def test_bad_values_name_the_key(key, text):
    with pytest.raises(ConfigError, match=key):
        StoreConfig.from_properties({key: text})


@pytest.mark.parametrize(
    "key, text",
    [("maxMessageSize", "0"), ("listenPort", "70000")],
)
def test_out_of_range_values_name_the_key(key, text):
    # The operator wrote the camelCase key; the error must point at what they wrote.
    with pytest.raises(ConfigError, match=key):
        StoreConfig.from_properties({key: text})


@pytest.mark.parametrize(
    "changes",
    [
        {"mapped_file_size_commit_log": 0},
        {"mapped_file_size_commit_log": 4095},
        {"mapped_file_size_consume_queue": 0},
        {"mapped_file_size_consume_queue": 30},
        {"max_message_size": -1},
        {"sync_flush_timeout_ms": 0},
        {"slave_timeout_ms": 0},
        {"flush_interval_commit_log_ms": 0},
        {"transient_store_pool_size": 0},
        {"listen_port": 65536},
        {"listen_port": -1},
        {"broker_role": "LEADER"},
    ],
)
def test_validation(changes):
    with pytest.raises(ConfigError):
        StoreConfig(**changes)


def test_role_and_flush_type_accept_names():
    config = StoreConfig(broker_role="slave", flush_disk_type="SYNC_FLUSH", store_path_root_dir=123)

    assert config.broker_role is BrokerRole.SLAVE
    assert config.flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert config.store_path_root_dir == "123"


def test_store_config_to_properties_round_trip():
    config = StoreConfig(
        store_path_root_dir="/data/s",
        broker_role=BrokerRole.SLAVE,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        broker_ip1="192.168.0.7",
        mapped_file_size_commit_log=8192,
        transient_store_pool_enable=True,
        file_reserved_time_h=1,
        message_delay_level="1s 2s",
    )

    props = to_properties(config)

    assert props["brokerRole"] == "SLAVE"
    assert props["flushDiskType"] == "SYNC_FLUSH"
    assert props["brokerIP1"] == "192.168.0.7"
    assert props["transientStorePoolEnable"] == "true"
    assert props["fileReservedTime"] == "1"
    assert StoreConfig.from_properties(props) == (config, {})
    assert to_properties(StoreConfig())["syncFlushTimeout"] == "5000"


@pytest.mark.parametrize(
    "role, flush, active",
    [
        (BrokerRole.ASYNC_MASTER, FlushDiskType.ASYNC_FLUSH, True),
        (BrokerRole.SYNC_MASTER, FlushDiskType.ASYNC_FLUSH, True),
        (BrokerRole.SLAVE, FlushDiskType.ASYNC_FLUSH, False),
        (BrokerRole.ASYNC_MASTER, FlushDiskType.SYNC_FLUSH, False),
        (BrokerRole.SYNC_MASTER, FlushDiskType.SYNC_FLUSH, False),
    ],
)
def test_transient_store_pool_active(role, flush, active):
    assert (
        StoreConfig(
            broker_role=role, flush_disk_type=flush, transient_store_pool_enable=True
        ).transient_store_pool_active
        is active
    )
    assert StoreConfig(broker_role=role, flush_disk_type=flush).transient_store_pool_active is False


def test_max_append_size_fits_a_segment():
    # maxMessageSize limits the body: the record gets its header, topic and properties on top.
    assert StoreConfig().max_append_size == 4 * 1024 * 1024 + 64 * 1024
    assert StoreConfig(mapped_file_size_commit_log=65536).max_append_size == 65536 - 8
