"""Reads a staging or batch file for the flush: the cells of every record as a tuple in the header's
order (the header read once), handed to the database driver as they are, with no dict per record, and
safe_record only for the rows that need it. The csv module's parse itself is most of what reading costs
(docs/benchmarks.md).
"""
from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
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
        reader = csv.reader(f)
        header = tuple(next(reader, ()))
        width = len(header)
        rows: list[tuple[str | None, ...]] = []
        unsafe: list[int] = []
        size = 0
        yielded = False
        for row in reader:
            if not row:
                continue  # an empty line (a person's edit)
            if skip:
                skip -= 1
                continue
            joined = "\x1f".join(row)  # one string to look in, at C speed, instead of each cell
            cells: Sequence[str | None] = row
            if joined.startswith(_ESCAPE) or "\x1f" + _ESCAPE in joined:
                cells = [_true_text(cell) for cell in row]
            if errors != "strict" or "\x00" in joined:
                unsafe.append(len(rows))
            # A tuple: the garbage collector stops looking at one that holds only strings (a list it
            # would walk at every full collection while 200,000 of them are read: a quarter of the time).
            rows.append(tuple(cells) if len(cells) == width else tuple((list(cells) + [None] * width)[:width]))
            size += len(joined)
            if size >= part_chars:
                yield Cells(header, rows, unsafe)
                rows, unsafe, size, yielded = [], [], 0, True
        if rows or not yielded:
            yield Cells(header, rows, unsafe)
