"""PostgreSQL reads a staging file itself: the file's bytes, as they lie on disk, go to COPY ... (FORMAT
csv) into a temporary table of text columns in the header's order, and an INSERT ... SELECT ... ON
CONFLICT (hash) (db/upsert.py) moves them on, taking the spreadsheet escape off and casting each cell to
the table's own column type, an empty cell NULL (db/bulk.py typed_values). The server's CSV parser runs
in its own process, beside the driver's, where Python's csv module was most of a flush (docs/benchmarks.md).

The file goes in parts that end at a record's end (a newline after an even number of quotes: every
quote inside a field is doubled), each one COPY and one INSERT, so every statement ends well within
store.STATEMENT_LIMIT whatever the batch's size. Anything the server refuses (bytes not UTF-8, a NUL, a
short record, a value) raises, and the caller reads the file in Python instead (parser/pipeline/sink.py).
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import BinaryIO

from db.bulk import Loaded, move_staged, typed_values
from db.upsert import Target

PART_BYTES = 32 * 2**20  # file bytes per COPY and INSERT: about 8,000 rows of 4 KB, a second or two each
BLOCK_BYTES = 2**20  # bytes per copy.write
_STAGED = "parser_flush_csv"  # the temporary table, dropped at the end of the transaction
# A line starting with \. ends COPY's data early in PostgreSQL before 18, even inside a quoted field.
_END_MARK = b"\n\\."


class UnsafeForCopyError(ValueError):
    """The file holds what COPY would read otherwise than the csv module: read it in Python."""


def postgresql_copy_csv(connection, target: Target, fields: Sequence[str], path: Path, quote: Callable,
                        escaped_start: Collection[str]) -> tuple[Loaded, int]:
    """Load the staging file `path` (its header: `fields`, every one a column of the target table);
    return (what was loaded, rows in the file). `escaped_start`: the characters an apostrophe was put before."""
    names = ", ".join(map(quote, fields))
    loaded, copied = Loaded(0, 0), 0
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMPORARY TABLE {_STAGED} ({', '.join(f'{quote(f)} text' for f in fields)}) "
                       "ON COMMIT DROP")
        values = typed_values(cursor, quote(target.table), fields, quote,
                              cell=lambda column: _true_text(column, escaped_start))
        with open(path, "rb") as f:
            block, header = f.read(BLOCK_BYTES), "true"
            while block:
                # FORCE_NOT_NULL: an unquoted empty cell (a person's edit) is "", as the csv module reads it.
                with cursor.copy(f"COPY {_STAGED} ({names}) FROM STDIN (FORMAT csv, HEADER {header}, "
                                 f"FORCE_NOT_NULL ({names}))") as copy:
                    block = _send_part(copy, f, block)
                copied += cursor.rowcount
                loaded += move_staged(cursor, _STAGED, target, fields, values, quote)
                header = "false"
    return loaded, copied


def _send_part(copy, f: BinaryIO, block: bytes) -> bytes:
    """Write the file from `block` on to `copy` up to the first record's end past PART_BYTES; return
    the bytes read past that end (b"" at the file's end)."""
    sent = quotes = 0
    tail = b""  # the last bytes of the block before: an end mark across two blocks
    while block:
        if _END_MARK in tail + block[:3] or _END_MARK in block:
            raise UnsafeForCopyError("a line starts with \\. (COPY's end of data)")
        if sent + len(block) >= PART_BYTES and (end := _record_end(block, quotes)) is not None:
            copy.write(block[:end])
            return block[end:] or f.read(BLOCK_BYTES)
        copy.write(block)
        sent, quotes, tail = sent + len(block), quotes + block.count(b'"'), block[-2:]
        block = f.read(BLOCK_BYTES)
    return b""


def _record_end(block: bytes, quotes: int) -> int | None:
    """Where the first record ending in `block` ends (after its newline), `quotes` quotes before it."""
    start, newline = 0, block.find(b"\n")
    while newline != -1:
        quotes += block.count(b'"', start, newline)
        if quotes % 2 == 0:
            return newline + 1
        start, newline = newline, block.find(b"\n", newline + 1)
    return None


def _true_text(column: str, escaped_start: Collection[str]) -> str:
    """The cell with the apostrophe staging.cell_text put before a formula's first character taken off (only
    there, as staging._true_text does)."""
    marks = ", ".join(f"chr({ord(c)})" if not c.isprintable() else "'" + c.replace("'", "''") + "'"
                      for c in sorted(escaped_start))
    return (f"CASE WHEN left({column}, 1) = '''' AND substr({column}, 2, 1) IN ({marks}) "
            f"THEN substr({column}, 2) ELSE {column} END")
