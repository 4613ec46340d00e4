"""The hash file's window (UNIQUE_WINDOW): when its lines were written, and the dropping of those older
than the window, crash-safely.

hashes.txt stays what older versions and tools read, one digest a line. Beside it, hashes.marks says
when its lines were written: a line "COUNT TIME", appended at a save (at most one an hour), says that
the file's first COUNT lines were all written by TIME (seconds since 1970). A hash's age is taken from
the first mark at or after its line, and lines after the last mark count as written now: every reading
errs towards younger, so no hash leaves the file before its time.

A compaction drops the lines before the newest mark older than the window, in steps a kill -9 may
interrupt anywhere: (1) hashes.txt.new and hashes.marks.new written and fsynced; (2) hashes.compacting
written, the decision that both are whole; (3) the Bloom filter's meta removed (its byte count is of
the old file), each .new renamed over its file, the folder fsynced; (4) hashes.compacting removed.
`finish_compaction` at the next start completes step 3 when hashes.compacting is there, else removes
the .new files: either way the hash file is the old one or the new one, whole.
"""
from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ..core import durable
from ..core.errors import StorageError, cannot_write
from ..core.setting_values import duration_text

log = logging.getLogger("parser")
MARK_EVERY = 3600   # seconds between marks: a year of hourly marks is ~200 KB, ages are right to the hour
SLACK = 86400       # the oldest mark must be this far past the window: a compaction at most once a day
COPY_BLOCK = 1 << 20


class Mark(NamedTuple):
    lines: int   # the hash file's first `lines` lines ...
    at: float    # ... were written by this time (seconds since 1970)


@dataclass(frozen=True)
class Compacted:
    window: float      # seconds: the hashes dropped were older
    dropped: int       # hashes taken out of the file
    kept: int          # hashes left in it
    bytes_before: int
    bytes_after: int

    def said(self) -> str:
        """What parser.log says of it, after "hashes: "."""
        return (f"dropped {self.dropped:,} older than {duration_text(self.window)} (kept {self.kept:,}, "
                f"file {size_text(self.bytes_before)} -> {size_text(self.bytes_after)})")


def size_text(size: int) -> str:
    """A file's size in MB as parser.log and `status` say it, to 0.1 MB (0.01 MB for a small file)."""
    return f"{size / 1e6:.{1 if size >= 1e6 else 2}f} MB"


def marks_path(hashes: Path) -> Path:
    return hashes.with_suffix(".marks")


def read_marks(path: Path) -> list[Mark]:
    """The marks of `path` (a hashes.marks) as written, oldest first; [] when absent. A torn last line
    (a kill mid-append) is left out; a line that is no mark, or out of order, ends the reading there:
    the marks after it cannot be trusted to say when lines were written."""
    return _read(path)[0]


def _read(path: Path) -> tuple[list[Mark], bool]:
    """read_marks, and whether every whole line of the file was a mark."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return [], True
    marks: list[Mark] = []
    rows = text.split(b"\n")[:-1]
    for line in rows:
        try:
            lines, at = (int(field) for field in line.split())
        except ValueError:
            log.warning("%s: %r is no mark (line count and time); the marks after it are ignored",
                        path.name, line[:40])
            break
        if marks and (lines < marks[-1].lines or at < marks[-1].at):
            log.warning("%s: a mark out of order (%d %d after %d %d); the marks from it on are ignored",
                        path.name, lines, at, *marks[-1])
            break
        marks.append(Mark(lines, at))
    return marks, len(marks) == len(rows)


class Marks:
    """The marks of one hash file, held in memory and appended to hashes.marks."""

    def __init__(self, hashes: Path, lines: int, read_only: bool = False):
        """`lines`: the hash file's whole lines now. Marks beyond them (lines lost to a power cut, a file
        cut by hand) are dropped: those lines, written again, would otherwise take an older mark's time."""
        self.path = marks_path(hashes)
        self.read_only = read_only
        if not read_only:
            durable.repair_tail(self.path, durable.whole_lines, what="mark")
        marks, clean = _read(self.path)
        self.marks = [mark for mark in marks if mark.lines <= lines]
        if (self.marks != marks or not clean) and not read_only:
            write_marks(self.path, self.marks)  # appended marks must follow good ones to be read

    def due(self, lines: int, now: float) -> bool:
        """Whether a save with `lines` in the file marks them: they grew since the last mark, and it is an
        hour old (or there is none)."""
        last = self.marks[-1] if self.marks else None
        return not self.read_only and lines > 0 and not (last and (lines <= last.lines or now - last.at < MARK_EVERY))

    def note(self, lines: int, now: float) -> None:
        """Mark `lines` as written by `now`; the caller has made them durable."""
        last_at = int(self.marks[-1].at) if self.marks else 0
        mark = Mark(lines, max(math.ceil(now), last_at))  # never before the last one: a clock set back
        durable.append(self.path, f"{mark.lines} {int(mark.at)}\n".encode("ascii"))
        self.marks.append(mark)


def lines_to_drop(marks: list[Mark], now: float, window: float) -> int:
    """How many of the file's first lines are older than the window: 0 until the oldest mark is a day past
    it (so a file is rewritten at most once a day), then the line count of the newest mark older than it."""
    cutoff = now - window
    if not marks or marks[0].at >= cutoff - SLACK:
        return 0
    return max(mark.lines for mark in marks if mark.at < cutoff)


def write_marks(path: Path, marks: list[Mark], *, suffix: str = ".tmp") -> Path:
    """`marks` into a new file beside `path`, fsynced; renamed over `path` unless `suffix` is ".new"
    (a compaction renames it at its commit). Returns the file written."""
    new = path.with_name(path.name + suffix)
    _write_synced(new, [f"{m.lines} {int(m.at)}\n".encode("ascii") for m in marks])
    if suffix != ".new":
        os.replace(new, path)
    return new


def compact(hashes: Path, line_length: int, marks: list[Mark], drop: int, window: float,
            between_steps: Callable[[str], None] = lambda step: None) -> tuple[Compacted, list[Mark]]:
    """Rewrite `hashes` without its first `drop` lines, those older than `window` (steps in the module's
    docstring); return what was done and the marks that remain, counted from the new first line.
    `between_steps(name)` is called after each step: a test stops there as a kill would. A full disk
    before the commit leaves the old files as they were and raises StorageError."""
    new_hashes, new_marks = _new(hashes), _new(marks_path(hashes))
    journal = hashes.with_suffix(".compacting")
    before = durable.whole_length_of(hashes, durable.whole_lines)
    before -= before % line_length
    kept_marks = [Mark(m.lines - drop, m.at) for m in marks if m.lines > drop]
    try:
        _copy_synced(hashes, new_hashes, drop * line_length, before)
        write_marks(marks_path(hashes), kept_marks, suffix=".new")
        between_steps("new files written")
        _write_synced(journal, [f"drop {drop}\n".encode("ascii")])
        fsync_path(hashes.parent)
    except OSError as exc:
        for path in (journal, new_hashes, new_marks):
            path.unlink(missing_ok=True)
        raise StorageError(f"{cannot_write(hashes, exc)}: its old hashes stay until the next compaction") from None
    between_steps("decided")
    _commit(hashes, between_steps)
    journal.unlink()
    fsync_path(hashes.parent)
    between_steps("done")
    after = before - drop * line_length
    done = Compacted(window=window, dropped=drop, kept=after // line_length, bytes_before=before, bytes_after=after)
    return done, kept_marks


def finish_compaction(hashes: Path) -> bool:
    """At start, before the hash file is read: a compaction a kill cut short is completed when it was
    decided (hashes.compacting there), else its .new files are removed. True when one was completed."""
    journal = hashes.with_suffix(".compacting")
    if not journal.exists():
        for path in (_new(hashes), _new(marks_path(hashes))):
            path.unlink(missing_ok=True)
        return False
    _commit(hashes, lambda step: None)
    journal.unlink()
    log.warning("%s: completed the compaction a stop interrupted (UNIQUE_WINDOW)", hashes.name)
    return True


def _commit(hashes: Path, between_steps: Callable[[str], None]) -> None:
    """Step 3, repeatable: what is already renamed is not there to rename again."""
    hashes.with_suffix(".bloom.json").unlink(missing_ok=True)  # the filter is rebuilt from the new file
    for new, final in ((_new(marks_path(hashes)), marks_path(hashes)), (_new(hashes), hashes)):
        if new.exists():
            os.replace(new, final)
            between_steps(f"renamed {final.name}")
    fsync_path(hashes.parent)


def _new(path: Path) -> Path:
    return path.with_name(path.name + ".new")


def _copy_synced(source: Path, target: Path, start: int, end: int) -> None:
    with open(source, "rb") as f, open(target, "wb") as out:
        f.seek(start)
        left = end - start
        while left > 0:
            block = f.read(min(COPY_BLOCK, left))
            if not block:
                break
            out.write(block)
            left -= len(block)
        out.flush()
        os.fsync(out.fileno())


def _write_synced(path: Path, lines: list[bytes]) -> None:
    with open(path, "wb") as out:
        out.write(b"".join(lines))
        out.flush()
        os.fsync(out.fileno())


def fsync_path(path: Path) -> None:
    """Make a folder's renames, or the lines appended to a file, durable. The hash file's writer appends
    without an fsync: it is synced before a mark counts its lines, which a power cut must not take back."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
