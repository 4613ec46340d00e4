"""One daemon per staging folder: an flock on STAGING_DIR/daemon.lock, released by the kernel
even after kill -9, so a stale lock file never blocks a restart."""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .errors import LockHeldError


class FolderLock:
    def __init__(self, folder: Path):
        self.path = folder / "daemon.lock"
        self.fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise LockHeldError(f"staging folder {self.path.parent} is in use by process {holder} "
                                f"(lock file {self.path}); stop that daemon first") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
