"""Append-only files that survive a crash: one write and an fsync per append, a partial write taken
back, and a torn tail (a kill -9 mid-write) cut at start, in one pass over the file.

The staging CSV, the webhook inbox, deliveries.txt and quarantine.jsonl use it; each says what a
whole record is (`whole_lines` for one record a line, or its own reader for CSV).
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


def append(path: Path, data: bytes, *, header: bytes = b"", mode: int = 0o644) -> None:
    """Append `data` (after `header` when the file is empty) in one write, then fsync.

    On a failed write (disk full) the file is cut back to its size before, so it never holds half a
    record; raises StorageError saying why."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
    try:
        size = os.fstat(fd).st_size
        if size == 0 and header:
            data = header + data
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, size)
            except OSError:
                pass
            raise StorageError(f"cannot append to {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def repair_tail(path: Path, whole_length: Callable[[BinaryIO], int]) -> int:
    """Cut `path` after its last whole record, as `whole_length(file)` measures it; return the bytes
    dropped (0 when the file is whole or absent). A repair is logged as a warning."""
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
    log.warning("repaired %s: dropped a torn last record (%d bytes)", path.name, dropped)
    return dropped


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
