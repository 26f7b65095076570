"""The broker's log files: rotated at their size, text lines with the UTC offset, JSON lines,
stderr only on request."""

from __future__ import annotations

import json
import logging
import re

import pytest

from rocketstore.broker.config import load_broker_config
from rocketstore.broker.logs import setup_logging
from store.properties import ConfigError


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in saved:
        root.addHandler(handler)
    root.setLevel(level)


def configs(tmp_path, **keys: str):
    return load_broker_config(None, {"storePathRootDir": str(tmp_path / "store"), **keys})


def test_the_log_file_rotates_at_its_size_and_keeps_its_backups(tmp_path, restore_logging):
    path = setup_logging(configs(tmp_path, logFileMaxBytes="2048", logFileBackups="2"), 0)
    assert path == tmp_path / "store" / "logs" / "broker.log"
    for i in range(200):
        logging.getLogger("rocketstore.test").info("line %d %s", i, "x" * 40)
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == ["broker.log", "broker.log.1", "broker.log.2"]
    assert all(p.stat().st_size <= 2048 for p in path.parent.iterdir())
    assert "line 199" in path.read_text()


def test_text_lines_carry_milliseconds_and_the_utc_offset(tmp_path, restore_logging):
    path = setup_logging(configs(tmp_path), 0)
    logging.getLogger("rocketstore.test").warning("hello")
    line = path.read_text().splitlines()[-1]
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d WARNING \S+ rocketstore\.test: hello", line
    )


def test_json_lines_parse(tmp_path, restore_logging):
    path = setup_logging(configs(tmp_path, logFormat="json"), 0)
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("rocketstore.test").exception("it failed")
    record = json.loads(path.read_text().splitlines()[-1])
    assert (record["level"], record["logger"], record["message"]) == ("ERROR", "rocketstore.test", "it failed")
    assert "ValueError: boom" in record["exception"] and record["time"][10] == "T"


def test_stderr_only_writes_no_file(tmp_path, restore_logging, capsys):
    assert setup_logging(configs(tmp_path, logToFile="false"), 0) is None
    logging.getLogger("rocketstore.test").info("to stderr")
    assert "to stderr" in capsys.readouterr().err
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("keys", [{"logFormat": "xml"}, {"logFileMaxBytes": "10"}, {"logFileBackups": "0"}])
def test_bad_log_settings_are_refused(tmp_path, keys):
    with pytest.raises(ConfigError):
        configs(tmp_path, **keys)
