"""Uniqueness checks: has a record with this hash been staged before?

Three implementations behind one small interface, chosen by DEDUP:
- HashFile ("hashfile"): an append-only file of hex digests, a line each, as the record of truth,
  with a persisted Bloom filter in front. A Bloom miss means new, at once. The Bloom hits of one
  batch (one poll) are confirmed together by one scan of the file newest-first, in blocks that
  start small and double: real duplicates are nearly always recent, so they are found in the first
  block; a false positive (rate 1e-6) costs one full scan. So a check costs the same with two
  million stored hashes as with none, and no new record is ever dropped.
- BloomOnly ("bloom"): the filter alone; a false positive drops a new record (rate 1e-6).
- NoDedup ("off"): everything is new; the database's unique hash column still refuses copies.

With UNIQUE_WINDOW the hash file forgets hashes older than the window, at a flush at most once a day
(parser/pipeline/hash_window.py: the marks of when lines were written, and the crash-safe rewrite).

Ordering rule for crash safety: a hash is added only after its record is durably staged. The
files here may lag the staging CSV, never lead it, and the database's unique constraint absorbs
whatever a crash re-stages.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO, Protocol

from pybloom_live import ScalableBloomFilter

from ..core import durable
from ..core.errors import StorageError
from .hash_window import Compacted, Marks, compact, finish_compaction, fsync_path, lines_to_drop

log = logging.getLogger("parser")

BLOOM_CAPACITY = 1_000_000
BLOOM_ERROR = 1e-6
FIRST_BLOCK_LINES = 1_024   # ~57 KiB of sha224 lines: the first read when confirming Bloom hits
SCAN_BLOCK_LINES = 16_384   # ~1 MiB: the largest read, as the blocks double towards the file's start
BOM = b"\xef\xbb\xbf"       # UTF-8's byte order mark, which Notepad may put before the first digest
# Digests this run added, kept in memory (about 100 bytes each): a duplicate is nearly always recent, and one
# added this run is answered without reading the file (a first poll of feeds that share entries read it for
# each of them). Cleared when full: the file stays the truth.
RECENT_MAX = 50_000


class Uniqueness(Protocol):
    def unseen(self, digests: Iterable[str]) -> set[str]: ...
    def add(self, digests: Iterable[str]) -> None: ...
    def save(self) -> None: ...
    def compact(self) -> Compacted | None: ...
    def close(self) -> None: ...


def open_uniqueness(mode: str, folder: Path, algorithm: str, stem: str = "hashes",
                    read_only: bool = False, window: float | None = None) -> Uniqueness:
    """The uniqueness check for DEDUP `mode`, keeping its files in `folder` under `stem`.

    read_only (for --dry-run) answers from the files as they are and writes nothing. `window`
    (UNIQUE_WINDOW, seconds) lets the hash file drop older hashes; the settings allow it with "hashfile" only.
    """
    if mode == "off" or (read_only and not folder.is_dir()):
        return NoDedup()
    if mode == "bloom":
        return BloomOnly(folder / f"{stem}.bloom", read_only)
    return HashFile(folder / f"{stem}.txt", hashlib.new(algorithm).digest_size * 2, read_only, window=window)


class NoDedup:
    def unseen(self, digests: Iterable[str]) -> set[str]:
        return set(digests)

    def add(self, digests: Iterable[str]) -> None:
        pass

    def save(self) -> None:
        pass

    def compact(self) -> Compacted | None:
        return None

    def close(self) -> None:
        pass


def _new_bloom() -> ScalableBloomFilter:
    return ScalableBloomFilter(initial_capacity=BLOOM_CAPACITY, error_rate=BLOOM_ERROR,
                               mode=ScalableBloomFilter.LARGE_SET_GROWTH)


def _load_bloom(path: Path) -> ScalableBloomFilter | None:
    try:
        with open(path, "rb") as f:
            return ScalableBloomFilter.fromfile(f)
    except FileNotFoundError:
        return None
    except Exception as exc:  # a torn or foreign file: rebuild rather than trust it
        log.warning("Bloom filter %s unreadable (%s); rebuilding it", path.name, exc)
        return None


def _save_bloom(bloom: ScalableBloomFilter, path: Path) -> bool:
    """Write the filter atomically; False when the disk refused (full): the filter is only a cache,
    rebuilt from the hash file at the next start, so that is a warning, not a reason to stop."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        with open(tmp, "wb") as f:
            bloom.tofile(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        log.warning("could not save the Bloom filter %s (%s); it is rebuilt at the next start",
                    path.name, exc.strerror or exc)
        return False
    return True


class BloomOnly:
    def __init__(self, path: Path, read_only: bool = False):
        self.path = path
        self.read_only = read_only
        self.bloom = _load_bloom(path) or _new_bloom()
        self.dirty = False

    def unseen(self, digests: Iterable[str]) -> set[str]:
        return {d for d in digests if d not in self.bloom}

    def add(self, digests: Iterable[str]) -> None:
        for d in digests:
            self.bloom.add(d)
            self.dirty = True

    def save(self) -> None:
        if self.dirty and not self.read_only and _save_bloom(self.bloom, self.path):
            self.dirty = False

    def compact(self) -> Compacted | None:
        return None  # a Bloom filter cannot forget: UNIQUE_WINDOW is refused with DEDUP = "bloom"

    def close(self) -> None:
        self.save()


class HashFile:
    """hashes.txt (the truth, append-only) + hashes.bloom (a cache of it) + hashes.bloom.json (how much of
    the file the saved filter covers, so a restart only adds the lines written since) + hashes.marks (when
    its lines were written: what UNIQUE_WINDOW's compaction goes by, and `status` shows)."""

    def __init__(self, path: Path, hex_length: int, read_only: bool = False, *, window: float | None = None,
                 clock: Callable[[], float] = time.time):
        """`window`: seconds after which a hash may be dropped (None: never); `clock`: the wall clock."""
        self.path = path
        self.line_length = hex_length + 1
        self.read_only = read_only
        self.window, self.clock = window, clock
        self.bloom_path = path.with_suffix(".bloom")
        self.meta_path = path.with_suffix(".bloom.json")
        if not read_only:
            finish_compaction(path)  # one a kill cut short: the old file or the new one, whole, before reading
        self._plain_line_ends()
        self._check_width()  # before any repair: a file of another HASH must not be "repaired" away
        self.repaired = 0 if read_only else self._repair_torn_tail()
        self.bloom, self.covered, self.dirty = self._load_or_rebuild()  # covered: bytes of the file in the filter
        self.marks = Marks(path, self.covered // self.line_length, read_only)
        # Not fsynced per append: the file may lag the staging CSV (see the ordering rule above).
        self.file = None if read_only else durable.AppendFile(self.path, sync=False)
        self.recent: set[str] = set()  # RECENT_MAX at most

    # -- start-up -------------------------------------------------------------------------
    def _repair_torn_tail(self) -> int:
        """Cut a partial last line left by a crash mid-write; return the bytes dropped."""
        return durable.repair_tail(self.path, self._whole_lines_length, what="line")

    def _whole_lines_length(self, f: BinaryIO) -> int:
        """Lines are fixed-width: whole ones end at a multiple of the width, on a newline."""
        end = f.seek(0, os.SEEK_END)
        end -= end % self.line_length
        if end:
            f.seek(end - 1)
            if f.read(1) != b"\n":
                end -= self.line_length  # the right length but no newline: not a whole line
        return end

    def _plain_line_ends(self) -> None:
        """A file saved by a Windows editor (CRLF line ends, perhaps a BOM) is rewritten with plain line
        ends: the digests are the same, and the file's fixed width is what every lookup relies on. The
        Bloom filter's count of covered bytes goes with it (the filter is rebuilt from the file)."""
        first = self._first_line()
        if not (first.endswith(b"\r\n") or first.startswith(BOM)):
            return
        if self.read_only:
            raise StorageError(f"{self.path} has Windows line ends (CRLF) or a BOM, as an editor saved it: "
                               "run the daemon once without --dry-run to convert it")
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(self.path, "rb") as f, open(tmp, "wb") as out:
            out.write(f.read(len(BOM)).removeprefix(BOM).replace(b"\r", b""))
            for block in iter(lambda: f.read(1 << 20), b""):
                out.write(block.replace(b"\r", b""))  # a digest is hex: no CR belongs to one
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        self.meta_path.unlink(missing_ok=True)
        log.warning("%s had Windows line ends or a BOM (saved by an editor?): rewritten with plain line "
                    "ends, every digest kept", self.path.name)

    def _first_line(self) -> bytes:
        """The file's first line as written (b"" when there is no file): what its line ends and
        digest width are judged by."""
        try:
            with open(self.path, "rb") as f:
                return f.readline()
        except FileNotFoundError:
            return b""

    def _check_width(self) -> None:
        first = self._first_line()
        if first.endswith(b"\n") and len(first) != self.line_length:
            raise StorageError(
                f"{self.path} holds digests of {len(first) - 1} characters but HASH gives "
                f"{self.line_length - 1}: set HASH back or move the file away to start a new history")

    def _load_or_rebuild(self) -> tuple[ScalableBloomFilter, int, bool]:
        """The filter, how many bytes of the file it covers, and whether it changed since it was saved."""
        size = self.path.stat().st_size if self.path.exists() else 0
        bloom, covered = None, 0
        try:
            meta = json.loads(self.meta_path.read_text())
            covered = int(meta["covers_bytes"])
            if covered <= size:
                bloom = _load_bloom(self.bloom_path)
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            pass
        if bloom is None:
            bloom, covered = _new_bloom(), 0
            if size:
                log.info("building the Bloom filter from %s (%d hashes)", self.path.name,
                         size // self.line_length)
        if covered == size:
            return bloom, covered, False
        with open(self.path, "rb") as f:
            f.seek(covered)
            for line in f:
                bloom.add(line[:-1].decode("ascii"))
        return bloom, size, True

    # -- the interface ----------------------------------------------------------------------
    def unseen(self, digests: Iterable[str]) -> set[str]:
        """The digests never staged before: Bloom misses at once, Bloom hits confirmed by one scan."""
        digests = set(digests)
        maybe = {d for d in digests if d in self.bloom}
        if not maybe:
            return digests
        added = maybe & self.recent  # added this run: known without reading the file
        to_confirm = maybe - added
        return digests - added - (self._found_in_file(to_confirm) if to_confirm else set())

    def add(self, digests: Iterable[str]) -> None:
        digests = list(digests)
        data = b"".join(d.encode("ascii") + b"\n" for d in digests)
        if not data:
            return
        if self.file is not None:
            self.file.append(data)  # disk full: the partial line is taken back and StorageError raised
        for d in digests:
            self.bloom.add(d)
        if len(self.recent) + len(digests) > RECENT_MAX:
            self.recent.clear()
        self.recent.update(digests)
        self.covered += len(data)
        self.dirty = True

    def save(self) -> None:
        """Mark the lines written (at most once an hour), and persist the filter with how much of the file it
        covers (filter first: the meta may only lag)."""
        if self.read_only:
            return
        lines, now = self.covered // self.line_length, self.clock()
        if self.marks.due(lines, now):
            try:
                fsync_path(self.path)  # the lines the mark counts must be on disk before it
                self.marks.note(lines, now)
            except (OSError, StorageError) as exc:  # a full disk: the lines are marked at a later save
                log.warning("could not mark the hashes written (%s): %s", self.marks.path.name,
                            getattr(exc, "strerror", None) or exc)
        if not self.dirty or not _save_bloom(self.bloom, self.bloom_path):
            return
        tmp = self.meta_path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps({"covers_bytes": self.covered}))
            os.replace(tmp, self.meta_path)
        except OSError as exc:  # a lagging meta only makes the next start re-read a few lines
            log.warning("could not save %s (%s)", self.meta_path.name, exc.strerror or exc)
            return
        self.dirty = False

    def close(self) -> None:
        self.save()
        if self.file is not None:
            self.file.close()

    def compact(self, between_steps: Callable[[str], None] = lambda step: None) -> Compacted | None:
        """At a quiet moment: the lines older than the window out of the file, when the oldest are a day past
        it (parser/pipeline/hash_window.py); None when nothing was dropped. The filter keeps the dropped
        hashes (a hash asked again costs one scan of the file, then counts as new) until they are half of
        it: then it is rebuilt from the file. `between_steps` is a test's kill point."""
        if self.window is None or self.file is None:  # no window, or read-only
            return None
        drop = lines_to_drop(self.marks.marks, self.clock(), self.window)
        if not drop:
            return None
        self.file.close()  # the file is replaced: the appends go on in the new one
        self.recent.clear()  # what it held may be among the dropped
        try:
            done, self.marks.marks = compact(self.path, self.line_length, self.marks.marks, drop, self.window,
                                              between_steps)
        finally:
            self.file = durable.AppendFile(self.path, sync=False)
        self.covered, self.dirty = done.bytes_after, True  # its meta is gone with the old file: saved anew
        if len(self.bloom) > 2 * done.kept:
            self.bloom, self.covered, self.dirty = self._load_or_rebuild()  # from the file: its meta is gone
        return done

    def _found_in_file(self, digests: set[str]) -> set[str]:
        """Which of `digests` the file holds. Scanned from the end in line-aligned blocks, small first
        and doubling; lines are fixed-width, so splitting a block on newlines gives whole digests."""
        if not self.path.exists():
            return set()
        wanted = {d.encode("ascii") for d in digests}
        found: set[bytes] = set()
        lines = min(FIRST_BLOCK_LINES, SCAN_BLOCK_LINES)
        with open(self.path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            end -= end % self.line_length
            while end > 0 and wanted:
                start = max(0, end - lines * self.line_length)
                f.seek(start)
                hits = wanted.intersection(f.read(end - start).split(b"\n"))
                found |= hits
                wanted -= hits
                end = start
                lines = min(lines * 2, SCAN_BLOCK_LINES)
        return {d.decode("ascii") for d in found}
