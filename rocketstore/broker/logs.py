"""The broker's logging: where its lines go and what they look like.

Lines go to stderr and, unless `logToFile=false`, to `<brokerLogDir>/broker.log`, rotated by size
(`logFileMaxBytes`, keeping `logFileBackups` older files as broker.log.1 .. .N, the standard
library's `RotatingFileHandler`). `logFormat=text` (the default) writes one line per record,

    2026-11-25T06:32:57.609+00:00 INFO MainThread rocketstore.broker: message

with the local time, its UTC offset and milliseconds; `logFormat=json` writes one JSON object per
line with the keys time, level, thread, logger, message (and exception when there is one), for
log collectors; the ready line the broker prints on stdout is then such an object too, with its
fields under `ready` (`ready_json`). Secrets never reach a log line: the code that holds them never
formats them.

Native libraries (gRPC's C core, absl) write to file descriptor 2 themselves, in their own format.
`capture_native_stderr` puts a pipe there: a thread reads it line by line and logs each line
through the `grpc.core` logger (its level from the line's first letter, the glog-style prefix
dropped), so those lines get the broker's format and reach its log file too; Python's own stderr
moves to a copy of the original descriptor.

Thread-safety: `capture_native_stderr` and then `setup_logging` run once, on the main thread,
before any other thread starts.
"""

from __future__ import annotations

import datetime
import json
import logging
import logging.handlers
import os
import re
import sys
import threading
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


def ready_json(line: str, logger: str) -> str:
    """The ready line ("rocketstore broker ready: name=... client=...") as `logFormat=json` writes
    a record, with its key=value fields under "ready"."""
    record = logging.LogRecord(logger, logging.INFO, __file__, 0, line, None, None)
    document = json.loads(JsonFormatter().format(record))
    document["ready"] = dict(part.split("=", 1) for part in line.partition(": ")[2].split() if "=" in part)
    return json.dumps(document, ensure_ascii=False)


# glog's prefix, as gRPC's core writes it: "E1125 07:36:35.143211   12345 file.cc:42] message".
_NATIVE_PREFIX = re.compile(r"^([EWIFD])\d{4} [\d:.]+\s+\d+ \S+\] ?")
_NATIVE_LEVELS = {
    "E": logging.ERROR,
    "W": logging.WARNING,
    "I": logging.INFO,
    "D": logging.DEBUG,
    "F": logging.CRITICAL,
}


def native_record(line: str) -> tuple[int, str]:
    """(level, message) of one line a native library wrote to stderr."""
    found = _NATIVE_PREFIX.match(line)
    if found is None:
        return logging.WARNING, line
    return _NATIVE_LEVELS[found.group(1)], line[found.end() :]


def capture_native_stderr() -> None:
    """Route what native code writes to descriptor 2 through logging (see the module docstring)."""
    sys.stderr.flush()
    saved = os.dup(2)
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    sys.stderr = open(saved, "w", buffering=1, encoding="utf-8", errors="backslashreplace")  # noqa: SIM115
    native = logging.getLogger("grpc.core")

    def pump() -> None:
        with open(read_fd, "r", encoding="utf-8", errors="backslashreplace") as lines:
            for line in lines:
                text = line.rstrip("\n")
                if text:
                    level, message = native_record(text)
                    native.log(level, "%s", message)

    threading.Thread(target=pump, name="native-stderr", daemon=True).start()


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
