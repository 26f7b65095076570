"""`EpochFile`: a broker's epoch history on disk, `<storePathRootDir>/epochFileCheckpoint`
(RocketMQ's file name; the format is ours).

    rocketstore-epochs 1
    <epoch> <start_offset>
    ...
    crc32 <8 hex digits: zlib.crc32 of every byte before this line>

Crash safety: `store` writes the new content to `<name>.bak` first and then to the file itself,
each through a temporary file that is fsynced, renamed over the target, and followed by an fsync
of the directory. A crash leaves at least one of the two complete (old or new). `load` takes the
file when its checksum matches, else the `.bak` (with a warning), else, when neither exists, an
empty history; files that exist but are all invalid raise `EpochFileCorrupt`: guessing an epoch
history could let a slave keep a divergent tail. The file holds one line per failover, so it is
rewritten whole.

Thread-safety: none; `ha.epoch_keeper.EpochKeeper` serialises its use.
"""

from __future__ import annotations

import logging
import zlib
from pathlib import Path

from store.log.mapped_file import replace_durably

from .epochs import EpochEntry, EpochHistory

log = logging.getLogger(__name__)

EPOCH_FILE_NAME = "epochFileCheckpoint"
HEADER = "rocketstore-epochs 1\n"


class EpochFileCorrupt(Exception):
    """Neither the epoch file nor its backup holds a valid history."""


def epoch_file_path(root: Path) -> Path:
    return Path(root) / EPOCH_FILE_NAME


def encode(history: EpochHistory) -> bytes:
    body = HEADER + "".join(f"{e.epoch} {e.start_offset}\n" for e in history.entries)
    data = body.encode("ascii")
    return data + f"crc32 {zlib.crc32(data):08x}\n".encode("ascii")


def decode(data: bytes) -> EpochHistory:
    """The history in `data`; ValueError saying why when it is not a whole, valid file."""
    if not data.endswith(b"\n"):
        raise ValueError("the file does not end with a complete line")
    body, _, trailer = data[:-1].rpartition(b"\n")
    body += b"\n"
    if not trailer.startswith(b"crc32 ") or len(trailer) != 14:
        raise ValueError("no checksum line at the end")
    try:
        expected = int(trailer[6:], 16)
    except ValueError:
        raise ValueError("the checksum is not hexadecimal") from None
    if zlib.crc32(body) != expected:
        raise ValueError("the checksum does not match")
    lines = body.decode("ascii").splitlines()
    if not lines or lines[0] + "\n" != HEADER:
        raise ValueError("not an epoch file (unknown header)")
    entries = []
    for line in lines[1:]:
        parts = line.split(" ")
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            raise ValueError(f"bad entry line {line!r}")
        entries.append(EpochEntry(int(parts[0]), int(parts[1])))
    return EpochHistory(entries)


class EpochFile:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.backup = self.path.with_name(self.path.name + ".bak")

    def load(self) -> EpochHistory:
        problems = []
        for path in (self.path, self.backup):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            try:
                history = decode(data)
            except ValueError as exc:
                problems.append(f"{path}: {exc}")
                continue
            if problems:
                log.warning("epoch file %s is damaged (%s); using its backup", self.path, "; ".join(problems))
            return history
        if problems:
            raise EpochFileCorrupt("no valid epoch history: " + "; ".join(problems))
        return EpochHistory()

    def store(self, history: EpochHistory) -> None:
        data = encode(history)
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        replace_durably(self.backup, data)
        replace_durably(self.path, data)
