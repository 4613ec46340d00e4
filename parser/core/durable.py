"""Append-only files that survive a crash: one write and an fsync per append, a partial write taken
back, and a torn tail (a kill -9 mid-write) cut at start, in one pass over the file. A file an editor
saved without its final line end gets one in the next append's write, so no record is glued to another.

The one helper for every append-only file: the staging CSV, the webhook inbox, deliveries.txt,
quarantine.jsonl (`append`, a file opened per append), the link files, harvest.log and the hash file
(`AppendFile`, held open by a writer that appends often). Each says what a whole record is
(`whole_lines` for one record a line, or its own reader, as the staging CSV and the hash file do).
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from .errors import StorageError

log = logging.getLogger("parser")
_TAIL_BLOCK = 64 * 1024
_APPEND = os.O_RDWR | os.O_APPEND | os.O_CREAT  # read too: the last byte is checked before an append


def append(path: Path, data: bytes, *, header: bytes = b"", mode: int = 0o644) -> None:
    """Append `data` (after `header` when the file is empty) in one write, then fsync.

    On a failed write (disk full) the file is cut back to its size before, so it never holds half a
    record; raises StorageError saying why."""
    fd = os.open(path, _APPEND, mode)
    try:
        if header and os.fstat(fd).st_size == 0:
            data = header + data
        _append_whole(fd, path, data, sync=True)
    finally:
        os.close(fd)


class AppendFile:
    """An append-only file held open: each append is whole or not there at all, as with `append`.

    `sync=False` leaves the fsync to the system, for a file allowed to lag another one that is synced
    (the hash file lags the staging CSV: a hash lost to a power cut only lets a record be staged again,
    and the database refuses the copy)."""

    def __init__(self, path: Path, *, header: bytes = b"", mode: int = 0o644, sync: bool = True):
        self.path = path
        self.sync = sync
        self._fd: int | None = os.open(path, _APPEND, mode)
        if header and self.size() == 0:
            self.append(header)

    def size(self) -> int:
        return os.fstat(self._open_fd()).st_size

    def append(self, data: bytes) -> None:
        """One write (then an fsync); a failed one is cut back and raises StorageError."""
        _append_whole(self._open_fd(), self.path, data, sync=self.sync)

    def _open_fd(self) -> int:
        assert self._fd is not None, f"{self.path} used after close()"
        return self._fd

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None


def end_last_line(path: Path) -> None:
    """Give the last line of `path` its line end when an editor saved the file without one (logged);
    nothing when it has one or the file is absent."""
    if path.exists():
        append(path, b"")


def _append_whole(fd: int, path: Path, data: bytes, *, sync: bool) -> None:
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        # Saved by an editor without a final line end: the next record must not be glued onto the last
        # one (one lost, the other holding its neighbour's first field); it goes in the same write.
        log.info("%s ended without a line end (saved so by an editor?): added one, its last line is kept",
                 path.name)
        data = b"\n" + data
    if not data:
        return
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    except OSError as exc:
        try:
            os.ftruncate(fd, size)  # the part that fit is no record: take it back
        except OSError:
            pass
        raise StorageError(f"cannot append to {path}: {exc.strerror or exc}") from None


def repair_tail(path: Path, whole_length: Callable[[BinaryIO], int], *, what: str = "record",
                shown: str | None = None) -> int:
    """Cut `path` after its last whole record, as `whole_length(file)` measures it; return the bytes
    dropped (0 when the file is whole or absent). A repair is logged as a warning naming the file
    (`shown`, else its name) and `what` was torn ("record", "line")."""
    try:
        f = open(path, "r+b")
    except FileNotFoundError:
        return 0
    with f:
        size = os.fstat(f.fileno()).st_size
        good = whole_length(f)
        if good >= size:
            return 0
        f.truncate(good)
        f.flush()
        os.fsync(f.fileno())
    dropped = size - good
    log.warning("repaired %s: dropped a torn last %s (%d bytes)", shown or path.name, what, dropped)
    return dropped


def whole_length_of(path: Path, whole_length: Callable[[BinaryIO], int]) -> int:
    """The bytes of `path` that hold whole records, without changing it (0 when absent)."""
    try:
        with open(path, "rb") as f:
            return whole_length(f)
    except FileNotFoundError:
        return 0


def whole_lines(f: BinaryIO) -> int:
    """Length of the file up to its last newline: for files of one record a line. Reads only the tail."""
    end = f.seek(0, os.SEEK_END)
    position = end
    while position > 0:
        start = max(0, position - _TAIL_BLOCK)
        f.seek(start)
        block = f.read(position - start)
        newline = block.rfind(b"\n")
        if newline != -1:
            return start + newline + 1
        position = start
    return 0
