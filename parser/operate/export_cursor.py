"""`export --cursor FILE`: the rows a chain of exports has not written yet, decided by what the table holds,
not by a time. `--since` compares a row's `fetched` and `changed`, which are the poll's time, and a row is
stored at the next flush that succeeds: a run between the poll and the flush does not see it, and the next
run `--since` that run's start leaves it out. The cursor instead keeps, per row, its key and its `changed`
as the last run read them; the next run writes the rows that are new since (a key not in the file) or
changed since (another `changed`), whenever they were polled. Deleted rows are dropped from it.

The file says how it was written (HEADER) and which table it follows; its lines are `key<TAB>changed`
in ascending key order, so a run reads it alongside the table's keys, one pass each, in flat memory. It
is replaced whole (a temporary file renamed over it), and only after the rows went out whole: a run
that fails leaves the previous file, and the next run writes those rows again (at least once, never none).
"""
from __future__ import annotations

import os
from array import array
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from ..core.errors import StorageError

HEADER = "parser-daemon export cursor 1"


class Walk:
    """The previous file's rows beside the table's: `keys` answers which to write and writes the new file."""

    def __init__(self, previous: Iterator[tuple[int, str]], new: IO[str]) -> None:
        self._previous, self._new = previous, new

    def keys(self, current: Iterable[tuple[int, str]]) -> array:
        """The keys of the rows in `current` ((key, changed) in ascending key order) that the previous file
        does not hold as they are now; every row of `current` goes into the new file."""
        wanted = array("q")
        before = next(self._previous, None)
        try:
            for key, changed in current:
                while before is not None and before[0] < key:  # a row deleted since: dropped
                    before = next(self._previous, None)
                if before != (key, changed):
                    wanted.append(key)
                self._new.write(f"{key}\t{changed}\n")
        except OSError as exc:
            raise StorageError(f"cannot read or write the cursor: {exc.strerror or exc}") from None
        return wanted


@contextmanager
def advancing(path: Path, table: str) -> Iterator[Walk]:
    """The walk from the file at `path` (none yet: every row is new) to a new one, put in its place when
    the block ends without an exception; ValueError when the file is no cursor of `table`."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with _previous(path, table) as previous:
            try:
                new = open(tmp, "w", encoding="utf-8", newline="\n")
            except OSError as exc:
                raise StorageError(f"cannot write the cursor {path}: {exc.strerror or exc}") from None
            with new:
                new.write(f"{HEADER}\ntable {table}\n")
                yield Walk(previous, new)  # what the block raises (a closed pipe too) goes out as it is
                try:
                    new.flush()
                    os.fsync(new.fileno())
                    new.close()
                    os.replace(tmp, path)
                except OSError as exc:
                    raise StorageError(f"cannot write the cursor {path}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def _previous(path: Path, table: str) -> Iterator[Iterator[tuple[int, str]]]:
    try:
        f = open(path, encoding="utf-8", newline="\n")
    except FileNotFoundError:
        yield iter(())
        return
    except OSError as exc:
        raise StorageError(f"cannot read the cursor {path}: {exc.strerror or exc}") from None
    with f:
        head = [f.readline().rstrip("\n"), f.readline().rstrip("\n")]
        if head[0] != HEADER:
            raise ValueError(f"--cursor {path} is no export cursor (its first line is not {HEADER!r}); "
                             "name another file, or delete it to export every row again")
        if head[1] != f"table {table}":
            raise ValueError(f"--cursor {path} follows {head[1].removeprefix('table ')!r}, not table "
                             f"{table!r}: one cursor file for each table")
        yield _lines(f, path)


def _lines(f: IO[str], path: Path) -> Iterator[tuple[int, str]]:
    last = None
    for number, line in enumerate(f, 3):
        key, tab, changed = line.rstrip("\n").partition("\t")
        if not tab or not key.lstrip("-").isdigit() or (last is not None and int(key) <= last):
            raise ValueError(f"--cursor {path} is damaged at line {number}: delete it to export every row again")
        last = int(key)
        yield last, changed
