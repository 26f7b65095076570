"""The broker's logging: where its lines go and what they look like.

Lines go to stderr and, unless `logToFile=false`, to `<brokerLogDir>/broker.log`, rotated by size
(`logFileMaxBytes`, keeping `logFileBackups` older files as broker.log.1 .. .N, the standard
library's `RotatingFileHandler`). `logFormat=text` (the default) writes one line per record,

    2026-11-25T06:32:57.609+00:00 INFO MainThread rocketstore.broker: message

with the local time, its UTC offset and milliseconds; `logFormat=json` writes one JSON object per
line with the keys time, level, thread, logger, message (and exception when there is one), for
log collectors. Secrets never reach a log line: the code that holds them never formats them.

Thread-safety: `setup_logging` runs once, on the main thread, before any other thread starts.
"""

from __future__ import annotations

import datetime
import json
import logging
import logging.handlers
import os
import sys
from pathlib import Path

from .config import BrokerConfigs

FILE_NAME = "broker.log"
LOG_FORMATS = ("text", "json")


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.datetime.fromtimestamp(record.created).astimezone()
    return moment.isoformat(timespec="milliseconds")


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        return _timestamp(record)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": _timestamp(record),
            "level": record.levelname,
            "thread": record.threadName,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def setup_logging(configs: BrokerConfigs, verbose: int) -> Path | None:
    """Install the handlers; returns the log file's path (None when logging to stderr only)."""
    broker = configs.broker
    formatter: logging.Formatter = JsonFormatter() if broker.log_format == "json" else TextFormatter()
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    path = None
    if broker.log_to_file:
        log_dir = Path(broker.broker_log_dir or os.path.join(configs.store.store_path_root_dir, "logs"))
        log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = log_dir / FILE_NAME
        handlers.append(
            logging.handlers.RotatingFileHandler(
                path, maxBytes=broker.log_file_max_bytes, backupCount=broker.log_file_backups, encoding="utf-8"
            )
        )
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    return path
