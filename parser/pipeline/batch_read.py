"""Reads a staging or batch file for the flush: the cells of every record as a tuple in the header's
order (the header read once), handed to the database driver as they are, with no dict per record, and
safe_record only for the rows that need it. The csv module's parse itself is most of what reading costs
(bench/bench_flush.py: about 7 s of 870 MB, over half of a flush into SQLite).
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import NamedTuple

from .staging import _true_text

_ESCAPE = "'"  # the spreadsheet escape (staging._cell) starts a cell with it


class Cells(NamedTuple):
    header: tuple[str, ...]
    rows: list[tuple[str | None, ...]]  # each as wide as the header (None: a cell a short record lacks)
    unsafe: list[int]  # the rows holding what record.safe_record mends: a NUL, a lone surrogate


def read_cells(path: Path) -> Cells:
    """The header and the records of `path` with their true text (the spreadsheet escape taken off,
    bytes that are not UTF-8 as lone surrogates), as read_rows gives them: empty lines skipped, a
    short record padded with None, cells past the header's dropped."""
    try:
        return _read(path, "strict")
    except UnicodeDecodeError:  # bytes that are not UTF-8 (a file of an older version): rare
        return _read(path, "surrogateescape")


def _read(path: Path, errors: str) -> Cells:
    with open(path, newline="", encoding="utf-8-sig", errors=errors) as f:
        reader = csv.reader(f)
        header = tuple(next(reader, ()))
        width = len(header)
        rows: list[tuple[str | None, ...]] = []
        unsafe: list[int] = []
        for row in reader:
            if not row:
                continue  # an empty line (a person's edit)
            joined = "\x1f".join(row)  # one string to look in, at C speed, instead of each cell
            if joined.startswith(_ESCAPE) or "\x1f" + _ESCAPE in joined:
                row = [_true_text(cell) for cell in row]
            if errors != "strict" or "\x00" in joined:
                unsafe.append(len(rows))
            # A tuple: the garbage collector stops looking at one that holds only strings (a list it
            # would walk at every full collection while 200,000 of them are read: a quarter of the time).
            rows.append(tuple(row) if len(row) == width else tuple((row + [None] * width)[:width]))
    return Cells(header, rows, unsafe)
