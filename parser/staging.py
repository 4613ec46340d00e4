"""The staging CSV: records wait here, in a file a person can open, until the next flush.

Appends are whole records in one write followed by fsync, so a record is either staged or not.
A flush first renames the file to a numbered batch (atomic), so appends go to a fresh file while
the batch is loaded; the batch is deleted only after the database committed it. A crash at any
point leaves either the staging file or a batch file on disk, and loading a batch twice is
harmless because the database ignores hashes it already has.
"""
from __future__ import annotations

import csv
import io
import logging
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from .errors import StorageError

log = logging.getLogger("parser")
# A record's content can be as large as MAX_BYTES. The csv module's default cap of 128 KiB per field
# would stop every flush of such a record (and every start after it), and make repair_torn_tail
# cut the file at that record as if it were torn.
csv.field_size_limit(2**31 - 1)


class StagingFile:
    def __init__(self, path: Path, columns: Sequence[str]):
        self.path = path
        self.columns = tuple(columns)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.repaired = repair_torn_tail(path)
        existing = read_header(path)
        if existing is not None and existing != self.columns:
            # Written by a version with other columns: hand it to the flush as a batch of its own.
            self.rotate()

    # -- appending ----------------------------------------------------------------------------
    def append(self, rows: Iterable[dict]) -> int:
        """Append rows (dicts keyed by column) durably; return how many. Raises StorageError."""
        buffer = io.StringIO()
        writer = csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n")
        count = 0
        for row in rows:
            writer.writerow([_cell(row.get(c)) for c in self.columns])
            count += 1
        if not count:
            return 0
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            data = buffer.getvalue().encode("utf-8", "surrogateescape")
            if size == 0:
                data = _header_bytes(self.columns) + data
            try:
                _write_all(fd, data)
                os.fsync(fd)
            except OSError as exc:
                # Disk full or similar: take back the part that was written, so the file stays whole.
                try:
                    os.ftruncate(fd, size)
                except OSError:
                    pass
                raise StorageError(f"cannot append to {self.path}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)
        return count

    # -- flushing -----------------------------------------------------------------------------
    def rotate(self) -> Path | None:
        """Move the current records into a batch file for the flush; None when there is nothing."""
        if not self.path.exists() or _has_no_rows(self.path):
            return None
        batch = self.path.with_name(f"{self.path.stem}.flushing-{time.time_ns()}.csv")
        os.replace(self.path, batch)
        _fsync_dir(self.path.parent)
        self.path.write_bytes(_header_bytes(self.columns))  # an empty staging file a person can open
        return batch

    def batches(self) -> list[Path]:
        """Batch files waiting for the database, oldest first (a crash can leave several)."""
        return sorted(self.path.parent.glob(f"{self.path.stem}.flushing-*.csv"),
                      key=lambda p: int(p.stem.rsplit("-", 1)[1]))

    def pending_rows(self) -> int:
        return sum(count_rows(p) for p in [*self.batches(), self.path] if p.exists())


def read_rows(path: Path) -> Iterator[dict]:
    """The records of a staging or batch file, as dicts keyed by its own header."""
    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as f:
        yield from csv.DictReader(f)


def count_rows(path: Path) -> int:
    return sum(1 for _ in read_rows(path))


def read_header(path: Path) -> tuple[str, ...] | None:
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            header = next(csv.reader(f), None)
    except FileNotFoundError:
        return None
    return tuple(header) if header else None


def repair_torn_tail(path: Path) -> int:
    """Cut a record left half-written by a crash (or a full disk); return the bytes dropped.

    A record counts as whole when it parses with the header's number of fields and its last line
    ends with a newline outside quotes (every field is quoted, so data newlines are always inside).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    good = _whole_records_length(data)
    if good == len(data):
        return 0
    with open(path, "r+b") as f:
        f.truncate(good)
        f.flush()
        os.fsync(f.fileno())
    dropped = len(data) - good
    log.warning("repaired %s: dropped a torn last record (%d bytes)", path.name, dropped)
    return dropped


def _whole_records_length(data: bytes) -> int:
    ends: list[int] = []
    lines: list[str] = []
    start = 0
    while start < len(data):
        nl = data.find(b"\n", start)
        end = len(data) if nl == -1 else nl + 1
        ends.append(end)
        lines.append(data[start:end].decode("utf-8", "replace"))
        start = end
    reader = csv.reader(iter(lines), strict=True)
    good = 0
    width = None
    try:
        for fields in reader:
            if width is None:
                width = len(fields)
            end = ends[reader.line_num - 1]
            if len(fields) != width or not data[:end].endswith(b"\n"):
                break
            good = end
    except csv.Error:
        pass
    return good


def _has_no_rows(path: Path) -> bool:
    with open(path, "rb") as f:
        f.readline()
        return f.read(1) == b""


def _header_bytes(columns: Sequence[str]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n").writerow(columns)
    return buffer.getvalue().encode("utf-8")


def _cell(value: object) -> str:
    return "" if value is None else str(value)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
