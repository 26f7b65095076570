"""Files that guard a store directory: `lock` (one process at a time) and `abort` (present while
the store runs, so its presence at start-up means the last run crashed).

`lock` holds an flock for the life of the process and the owner's pid as text, for the error a
second process gets. `abort` is created and fsynced at start and removed at clean shutdown.
Thread-safety: owned by one MessageStore.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..log.mapped_file import fsync_dir, write_synced


class StoreLockedError(RuntimeError):
    """Another process has the store directory open."""


class StoreLock:
    def __init__(self, root: Path) -> None:
        self.path = root / "lock"
        self._fd = -1

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise StoreLockedError(
                f"store directory {self.path.parent} is in use by another process (pid {owner}); "
                "stop it first, or point storePathRootDir elsewhere"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


class AbortFile:
    def __init__(self, root: Path) -> None:
        self.path = root / "abort"

    def exists(self) -> bool:
        return self.path.exists()

    def create(self) -> None:
        write_synced(self.path, b"", 0)  # an empty marker; opened without O_TRUNC, as always
        fsync_dir(self.path.parent)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        fsync_dir(self.path.parent)
