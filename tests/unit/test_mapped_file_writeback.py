"""How much a small append plus fdatasync writes to the disk through a segment's mapping
(store/mapped_file.py's page-cache advice), measured with /proc/self/io, deep into a segment where
the kernel's readahead would otherwise have built large page-cache folios. Real files: the effect
lives in the page cache and the filesystem."""

from __future__ import annotations

import os
from pathlib import Path

from store.log.mapped_file import MappedFile

SEGMENT = 64 << 20
DEEP = 40 << 20  # past the 32 MiB after which the folios had grown to 2 MiB
APPENDS = 64


def written_bytes() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    raise AssertionError("/proc/self/io has no write_bytes")


def fill(segment: MappedFile, end: int) -> None:
    chunk = bytes(range(256)) * 4096
    while segment.wrote_position < end:
        segment.write_at(segment.wrote_position, chunk)
        segment.wrote_position += len(chunk)
    os.fdatasync(segment.fd)


def per_append(segment: MappedFile) -> float:
    record = b"r" * 1024
    before = written_bytes()
    for _ in range(APPENDS):
        segment.write_at(segment.wrote_position, record)
        segment.wrote_position += len(record)
        os.fdatasync(segment.fd)
    return (written_bytes() - before) / APPENDS


def test_a_small_append_deep_into_a_segment_writes_pages_not_huge_folios(tmp_path):
    segment = MappedFile.create(tmp_path, 0, SEGMENT)
    try:
        before = written_bytes()
        fill(segment, DEEP)
        assert written_bytes() - before >= DEEP // 2, "this filesystem does not report writes: nothing to observe"
        # A page (4 KiB), give or take the filesystem's metadata; without the advice it was 2 MiB.
        assert per_append(segment) <= 64 * 1024
    finally:
        segment.close()


def test_appends_resumed_in_a_reopened_segment_write_pages_too(tmp_path):
    segment = MappedFile.create(tmp_path, 0, SEGMENT)
    fill(segment, DEEP)
    end = segment.wrote_position
    segment.close()
    reopened = MappedFile.open(tmp_path / f"{0:020d}", SEGMENT)
    try:
        reopened.set_positions(end)  # as recovery does for the last segment
        assert per_append(reopened) <= 64 * 1024
    finally:
        reopened.close()
