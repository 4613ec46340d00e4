"""The staging CSV: records wait here, in a file a person can open, until the next flush.

Appends are whole records in one write followed by fsync, so a record is either staged or not.
A flush first renames the file to a numbered batch (atomic), so appends go to a fresh file while
the batch is loaded; the batch is deleted only after the database committed it. A crash at any
point leaves either the staging file or a batch file on disk, and loading a batch twice is
harmless because the database ignores hashes it already has.

A person may open the file in a spreadsheet, which runs a cell starting with `=`, `+`, `-` or `@` as
a formula: such cells are written with a leading apostrophe, which read_rows takes off again.
"""
from __future__ import annotations

import csv
import io
import json
import logging
import os
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO, TypeVar

from ..core import durable

Row = TypeVar("Row", bound=Mapping[str, object])  # a record with its hash, keyed by column

log = logging.getLogger("parser")
# A record's content can be as large as MAX_BYTES. The csv module's default cap of 128 KiB per field
# would stop every flush of such a record (and every start after it), and make repair_torn_tail
# cut the file at that record as if it were torn.
csv.field_size_limit(2**31 - 1)
TAIL_BYTES = 4 << 20  # the end of the file repair_torn_tail reads a line at a time (more when it holds too little)
_BLOCK_BYTES = 1 << 20


class StagingFile:
    def __init__(self, path: Path, columns: Sequence[str]):
        self.path = path
        self.columns = tuple(columns)
        self.strangers_said: set[Path] = set()  # look-alike batch files already warned of (batches)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.repaired = repair_torn_tail(path)
        durable.end_last_line(path)  # a last record an editor saved without its line end is kept
        existing = read_header(path)
        if existing is not None and existing != self.columns:
            # Written by a version (or a job's settings) with other columns: its rows go to the flush as a
            # batch of its own, read by their own header; a file with no rows gets this layout's header,
            # so that no row is ever appended under another layout's header.
            if self.rotate() is None:
                self._write_header()

    # -- appending ----------------------------------------------------------------------------
    def append(self, rows: Iterable[Row], refused: list[tuple[Row, str]] | None = None) -> int:
        """Append rows (dicts keyed by column) durably in one write; return how many. Raises StorageError.

        A row that cannot be written as UTF-8 is left out and, when `refused` is given, put there with
        the reason (the caller sets it aside), so one bad record never blocks the others."""
        chunks: list[bytes] = []
        for row in rows:
            try:
                chunks.append(csv_line([cell_text(row.get(c)) for c in self.columns]).encode("utf-8"))
            except UnicodeEncodeError as exc:
                if refused is None:
                    raise
                refused.append((row, f"the staging CSV cannot hold it: {exc.reason} at {exc.start}"))
        if not chunks:
            return 0
        durable.append(self.path, b"".join(chunks), header=_header_bytes(self.columns))
        return len(chunks)

    # -- flushing -----------------------------------------------------------------------------
    def rotate(self) -> Path | None:
        """Move the current records into a batch file for the flush; None when there is nothing."""
        if not self.path.exists() or _has_no_rows(self.path):
            return None
        batch = self.path.with_name(f"{self.path.stem}.flushing-{time.time_ns()}.csv")
        os.replace(self.path, batch)
        _fsync_dir(self.path.parent)
        self._write_header()  # an empty staging file a person can open
        return batch

    def _write_header(self) -> None:
        """The staging file replaced by one holding only this layout's header (a crash leaves one or the
        other, never a file with no header that an append would give the wrong one)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(_header_bytes(self.columns))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)

    def batches(self) -> list[Path]:
        """Batch files waiting for the database, oldest first (a crash can leave several). A file that
        only looks like one (`staging.flushing-123 (copy).csv`, a file manager's paste) was not named
        by the daemon: it is left alone, said once per file, instead of stopping every flush and start."""
        found, strangers = batch_files(self.path)
        for path in strangers:
            if path not in self.strangers_said:
                self.strangers_said.add(path)
                log.warning("staging: %s was not named by the daemon (a batch is %s.flushing-<digits>.csv): "
                            "left alone, not loaded; if its rows should be stored, rename it to that form",
                            path, self.path.stem)
        return found

    def pending_rows(self) -> int:
        return sum(count_rows(p) for p in [*self.batches(), self.path] if p.exists())


def batch_files(staging_csv: Path) -> tuple[list[Path], list[Path]]:
    """The batch files of a staging CSV, oldest first, and the files whose names only look like one."""
    named = re.compile(re.escape(staging_csv.stem) + r"\.flushing-([0-9]+)\.csv")
    found: list[tuple[int, Path]] = []
    strangers: list[Path] = []
    for path in sorted(staging_csv.parent.glob(f"{staging_csv.stem}.flushing-*.csv")):
        match = named.fullmatch(path.name)
        if match:
            found.append((int(match.group(1)), path))
        else:
            strangers.append(path)
    return [path for _, path in sorted(found)], strangers


def read_rows(path: Path) -> Iterator[dict]:
    """The records of a staging or batch file, as dicts keyed by its own header, with their true text
    (the spreadsheet escape taken off; bytes that are not UTF-8 come back as lone surrogates). A BOM
    (Notepad, Excel's "CSV UTF-8") is no part of the first column's name; empty lines are skipped."""
    with open(path, newline="", encoding="utf-8-sig", errors="surrogateescape") as f:
        for row in csv.DictReader(f):
            yield {k: _true_text(v) for k, v in row.items()}


def count_rows(path: Path) -> int:
    return sum(1 for _ in read_rows(path))


def read_header(path: Path) -> tuple[str, ...] | None:
    try:
        with open(path, newline="", encoding="utf-8-sig", errors="replace") as f:
            header = next(csv.reader(f), None)
    except FileNotFoundError:
        return None
    return tuple(header) if header else None


def repair_torn_tail(path: Path) -> int:
    """Cut a record left half-written by a crash (or a full disk); return the bytes dropped.

    A record counts as whole when it parses with the header's number of fields and its last line
    ends with a newline outside quotes (every field is quoted, so data newlines are always inside).
    A last record without its newline (an editor's save) is whole too when it cannot be a cut-short
    one (see _whole_without_line_end); StagingFile then gives it its newline. Empty lines (an
    editor's) are no records and are left alone. One pass over the file, whatever its size: its
    quotes counted a block at a time, only its last few MB read a line at a time."""
    return durable.repair_tail(path, _whole_records_length)


def _whole_records_length(f: BinaryIO) -> int:
    # A newline ends a record exactly when it lies outside quotes, i.e. when the quotes before it are
    # even in number (a quote inside a field is doubled): one count per line, no CSV parsing. The
    # last record is then parsed alone, to check it has the header's number of fields. Only the file's
    # end is read a line at a time: before it, the quotes are counted a block at a time (a restart over
    # a staging file of 900 MB spent 1.7 s on its lines).
    size = f.seek(0, os.SEEK_END)
    tail = TAIL_BYTES
    while True:
        start = _line_start_after(f, size - tail) if tail < size else 0
        good = _whole_from(f, start)
        if good is not None:
            return good
        tail *= 4


def _whole_from(f: BinaryIO, start: int) -> int | None:
    """_whole_records_length, the lines read from `start` (a line's start) on; None when they hold too little to
    tell (no record ending there after another line's end)."""
    header_end = _first_line_end(f, start) if start else 0
    if start and not header_end:
        return None
    quotes = _quotes_before(f, start)
    f.seek(start)
    offset, last_start, good = start, 0, 0
    ends = 0  # the line ends seen from `start` on
    told = False  # a record ended after another line end seen here: last_start is known
    for line in f:
        offset += len(line)
        quotes += line.count(b'"')
        if quotes % 2 == 0 and line.endswith(b"\n"):
            ends += 1
            if header_end and not line.strip():  # an empty line: no record, so nothing torn
                good = offset
                continue
            header_end = header_end or offset
            last_start, good, told = good, offset, ends > 1
    if start and not told:
        return None
    if not good:
        return 0
    f.seek(0)
    width = len(_parse_one(f.read(header_end)))
    f.seek(last_start)
    if len(_parse_one(f.read(good - last_start))) != width:
        return last_start
    if good < offset and quotes % 2 == 0 and _whole_without_line_end(f.read(), width):
        return offset
    return good


def _line_start_after(f: BinaryIO, at: int) -> int:
    """The offset just past the first newline at or after `at` (the file's size when there is none)."""
    f.seek(at)
    offset = at
    while block := f.read(_BLOCK_BYTES):
        newline = block.find(b"\n")
        if newline != -1:
            return offset + newline + 1
        offset += len(block)
    return offset


def _first_line_end(f: BinaryIO, before: int) -> int:
    """Where the header ends (its newline outside quotes), 0 when it does not end before `before`."""
    f.seek(0)
    offset = quotes = 0
    for line in f:
        offset += len(line)
        quotes += line.count(b'"')
        if offset >= before:
            return 0
        if quotes % 2 == 0 and line.endswith(b"\n"):
            return offset
    return 0


def _quotes_before(f: BinaryIO, end: int) -> int:
    f.seek(0)
    quotes = 0
    while end > 0 and (block := f.read(min(_BLOCK_BYTES, end))):
        quotes += block.count(b'"')
        end -= len(block)
    return quotes


def _whole_without_line_end(tail: bytes, width: int) -> bool:
    """Is `tail`, the file's last record without its newline, whole (an editor saved it so) or torn
    (a crash mid-append)? The daemon quotes every field and writes a record in one write, so a tear
    leaves an open quote, fewer fields, an unquoted empty last field (cut after its comma) or a last
    field cut between two quotes: inside a doubled one (`"say ""hi"` of `say "hi"`), or after the
    doubled quote that opens a value starting with one (`""` of `"hi"`, read as empty). So a record
    is whole when it has the header's number of fields and its last field is quoted, not empty and
    holds no quote, or is unquoted and not empty (only an editor writes that). A cut exactly before
    the newline leaves the record whole: kept. A job whose last field is empty or holds a quote has
    such a record cut, with a warning (the feeds' last column is `fetched`, never so)."""
    fields = _parse_one(tail)
    if len(fields) != width:
        return False
    if tail.endswith(b'"'):
        return bool(fields[-1]) and '"' not in fields[-1]
    return not tail.endswith(b",")


def _parse_one(data: bytes) -> list[str]:
    try:
        return next(csv.reader(io.StringIO(data.decode("utf-8", "replace"), newline=""), strict=True), [])
    except csv.Error:
        return []


def _has_no_rows(path: Path) -> bool:
    with open(path, "rb") as f:
        f.readline()
        return f.read(1) == b""


def csv_line(cells: Sequence[str]) -> str:
    """One record as the csv module writes it with QUOTE_ALL and "\n" line ends: every cell quoted, its
    quotes doubled, nothing else escaped (line ends and NUL stay as they are, inside the quotes). Built with
    str.replace, which finds the quotes at C speed, where the csv writer steps through every character:
    6x less CPU over a first poll's 4,564 rows of 6.7 KB (0.05 s against 0.29 s), on the main thread."""
    return '"' + '","'.join([cell.replace('"', '""') for cell in cells]) + '"\n'


def _header_bytes(columns: Sequence[str]) -> bytes:
    return csv_line(columns).encode("utf-8")


# Spreadsheets run a cell that starts with one of these as a formula (OWASP "CSV injection"). Such a
# cell is written with a leading apostrophe, which a spreadsheet shows as text; so that the flush can
# take exactly that apostrophe off again, a cell that really starts with one gets one more.
_FORMULA_START = frozenset("=+-@\t\r")
_ESCAPED_START = _FORMULA_START | {"'"}
ESCAPED_START = _ESCAPED_START  # for a loader that takes the apostrophe off itself (db/csv_load.py)


def cell_text(value: object) -> str:
    if isinstance(value, (list, dict)):  # categories, enclosures: JSON text; none at all is "" (NULL)
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":")) if value else ""
    else:
        text = "" if value is None else str(value)
    return "'" + text if text[:1] in _ESCAPED_START and text else text


def _true_text(cell: str | None) -> str | None:
    """The text cell_text was given: the apostrophe it added taken off (only before the characters that
    made it add one, so a file written before cells were escaped reads back nearly always as it was)."""
    if cell and cell[0] == "'" and cell[1:2] and cell[1] in _ESCAPED_START:
        return cell[1:]
    return cell


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
