"""Reads a staging or batch file for the flush: the cells of every record as a tuple in the header's
order (the header read once), handed to the database driver as they are, with no dict per record, and
safe_record only for the rows that need it. The csv module's parse itself is nearly all of what reading
costs: the records are taken from it and looked at a chunk at a time, so that no Python runs per record
unless a cell needs it (docs/benchmarks.md, bench_flush).
"""
from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from itertools import chain, islice
from pathlib import Path
from typing import NamedTuple

from .staging import _true_text

_ESCAPE = "'"  # the spreadsheet escape (staging.cell_text) starts a cell with it


class Cells(NamedTuple):
    header: tuple[str, ...]
    rows: list[tuple[str | None, ...]]  # each as wide as the header (None: a cell a short record lacks)
    unsafe: list[int]  # the rows holding what record.safe_record mends: a NUL, a lone surrogate


# Cells a part holds, counted in characters: a part is read, inserted and let go before the next, so
# a flush's memory follows this, not the staging file's size. Each part is one commit, and on SQLite a
# commit is a few fsyncs: large enough parts keep their count low (figures: docs/benchmarks.md).
PART_CHARS = 16 << 20
DECODE_CHARS = 128 << 10  # bytes decoded at a time (the text file's default: 8 KiB)
CHUNK_ROWS = 1000  # records taken from the csv module at a time, at most


def read_parts(path: Path, part_chars: int | None = None) -> Iterator[Cells]:
    """The header and the records of `path`, in parts of about `part_chars` characters (at least one
    part, the header alone for a file without records), with their true text (the spreadsheet escape
    taken off, bytes that are not UTF-8 as lone surrogates), as read_rows gives them: empty lines
    skipped, a short record padded with None, cells past the header's dropped."""
    part_chars = part_chars or PART_CHARS
    given = 0
    try:
        for part in _parts(path, "strict", 0, part_chars):
            given += len(part.rows)
            yield part
    except UnicodeDecodeError:  # bytes that are not UTF-8 (a file of an older version): rare
        # Read again from the start, the records already given skipped: the same records, since a
        # byte taken as a surrogate is never a quote, a comma or a line end.
        yield from _parts(path, "surrogateescape", given, part_chars)


def _parts(path: Path, errors: str, skip: int, part_chars: int) -> Iterator[Cells]:
    with open(path, newline="", encoding="utf-8-sig", errors=errors) as f:
        f._CHUNK_SIZE = DECODE_CHARS  # type: ignore[attr-defined]
        reader = csv.reader(f)
        header = tuple(next(reader, ()))
        records = islice(filter(None, reader), skip, None)  # an empty line (a person's edit) is no record
        rows: list[tuple[str | None, ...]] = []
        unsafe: list[int] = []
        size, yielded, step = 0, False, 1
        while chunk := list(map(tuple, islice(records, step))):
            chars = _add(chunk, header, rows, unsafe, errors != "strict")
            size += chars
            if size >= part_chars:
                yield Cells(header, rows, unsafe)
                rows, unsafe, size, yielded = [], [], 0, True
            # As many records as fit in a quarter of what the part has left, judged by the chunk just read:
            # the part ends soon after it holds part_chars, and most records are taken by the hundred.
            step = max(1, min(CHUNK_ROWS, (part_chars - size) * len(chunk) // (4 * chars or 1)))
        if rows or not yielded:
            yield Cells(header, rows, unsafe)


def _add(chunk: list[tuple[str, ...]], header: tuple[str, ...], rows: list[tuple[str | None, ...]],
         unsafe: list[int], surrogates: bool) -> int:
    """Put the records of `chunk` into `rows` (as read_parts gives them) and the places of those holding what
    record.safe_record mends into `unsafe`; return their characters. The cells are looked at whole, a
    chunk at a time: a record goes through Python only when a cell starts with the escape or holds a NUL."""
    width = len(header)
    joined = "\x1f".join(chain.from_iterable(chunk))  # one string to look in, at C speed
    if surrogates or "\x00" in joined or "\x1f" + _ESCAPE in joined or joined.startswith(_ESCAPE):
        for row in chunk:
            cells: Sequence[str | None] = row
            if any(cell.startswith(_ESCAPE) for cell in row):
                cells = [_true_text(cell) for cell in row]
            if surrogates or any("\x00" in cell for cell in row):
                unsafe.append(len(rows))
            rows.append(_as_wide(cells, width))
    elif all(len(row) == width for row in chunk):  # nearly always: the records as they are
        rows.extend(chunk)
    else:
        rows.extend(_as_wide(row, width) for row in chunk)
    return len(joined)


def _as_wide(cells: Sequence[str | None], width: int) -> tuple[str | None, ...]:
    """The cells as a tuple of `width`: a short record padded with None, cells past the header's dropped."""
    # A tuple: the garbage collector stops looking at one that holds only strings (a list it would walk
    # at every full collection while 200,000 of them are read: a quarter of the time).
    return tuple(cells) if len(cells) == width else tuple((list(cells) + [None] * width)[:width])
