"""Where records go after parsing: uniqueness check -> staging CSV -> (flush) -> database table.

A Sink is the same for every kind of record: the cyclic pass has one (table `items`), each
two-pass job has its own (its own table, CSV and hash file), so uniqueness is per table.
--dry-run opens a PrintSink in its place (the one choice, where the run is opened): the same
interface, the records that would be staged printed, nothing written.
"""
from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol, TextIO, cast

from db.bulk import Loaded
from db.schema import TableSpec
from db.store import Database
from db.upsert import Updates

from ..core.errors import RecordRefusedError, StorageError
from ..core.record import AnyRecord, StagedRecord, record_digest, safe_record
from .batch_read import read_parts
from .dedup import Uniqueness, open_uniqueness
from .hash_window import Compacted
from .history import History
from .identity import Identity
from .known import KnownDigests, short_key
from .quarantine import set_aside
from .staging import ESCAPED_START, StagingFile, read_header, read_rows

log = logging.getLogger("parser")


@dataclass
class Staged:
    new: list[StagedRecord]  # the new records, each with its `hash`
    duplicates: int
    # Records stored before, staged again to update their rows: their digest differs from the last poll's
    # (`changed` of them), or none was known (a first poll since the digests were lost: the flush changes
    # the row only where something differs).
    updates: list[StagedRecord] = field(default_factory=list)
    changed: int = 0
    digests: dict[str, str] = field(default_factory=dict)  # key -> digest of every entry of the batch


@dataclass(frozen=True)
class SinkFiles:
    """Where a sink keeps its files: its folder, the staging CSV's name there and the hash file's stem
    (parser/pipeline/dedup.py)."""
    staging_dir: Path
    csv_name: str = "staging.csv"
    hash_stem: str = "hashes"


@dataclass(frozen=True)
class UniqueRule:
    """How a sink tells a record staged before: `fields`, "auto" or a list of fields (parser/pipeline/identity.py),
    named `setting` in params.py; DEDUP's mode and HASH's algorithm; `window`: UNIQUE_WINDOW in seconds
    (parser/pipeline/hash_window.py), which a dry run's read-only check does not use."""
    fields: str | Sequence[str]
    dedup_mode: str
    algorithm: str
    setting: str = "UNIQUE_FIELDS"
    window: float | None = None


class FlushCount(NamedTuple):
    written: int  # rows inserted
    updated: int  # rows an update changed (an entry edited at its source)
    already: int  # rows the table held as they were (a batch loaded again, an unchanged entry rechecked)
    versions: int = 0  # earlier versions of updated rows copied into `<table>_versions` (UPDATES "history")


class Batch(NamedTuple):
    """One poll's (or delivery's) records for stage_many."""
    records: Sequence[AnyRecord]
    feed_links: Iterable[str] = ()  # the feed's own addresses (parser/pipeline/identity.py)
    keys: Sequence[str] | None = None  # taken already where the body was parsed (parser/pipeline/first_read.py)
    known: int = 0  # entries left unread there as seen by the source's last poll: duplicates
    # key -> digest, as the parse took them (the records' and the unread entries'); None: from the records.
    digests: Mapping[str, str] | None = None
    # The source's last poll's digests (short key -> digest, parser/pipeline/known.py); None: none known, so
    # an entry stored before is staged again (the flush changes its row only when something differs).
    previous: Mapping[str, str] | None = None
    updates: bool = False  # stage an entry stored before whose digest changed (UPDATES is not "ignore")


def select_new(batch: Batch, dedup: Uniqueness, identity: Identity, seen: set[str] | None = None) -> Staged:
    """Key each of the batch's records (parser/pipeline/identity.py: one poll's records together, `feed_links`
    being the feed's own addresses; or `keys` given, taken with the same rules where the body was parsed) and
    keep, with its `hash`, those neither staged before nor already in `seen` (this batch, or a dry run's
    earlier batches); the uniqueness check is asked once per batch. With `updates`, a record stored before is
    kept too (it updates its row at the flush) when its digest differs from `previous`'s or `previous` lacks
    it (stored, but not by the source's last poll that was kept: a kill between the hash file's save and the
    digests'), and every one when `previous` is None. The batch's `known` entries are not counted here."""
    records, keys, digests, previous, updates = batch.records, batch.keys, batch.digests, batch.previous, \
        batch.updates
    # The one place every record passes (polled, pushed, a job's objects, an inbox left by a crash):
    # text no UTF-8 file or database can hold is made safe here, before the key is taken.
    records = [safe_record(record) for record in records]
    if keys is None:
        identified = identity.identify(records, batch.feed_links)
        records, keys = identified.records, identified.keys
    unseen = dedup.unseen(keys)
    seen = set() if seen is None else seen
    fresh: list[StagedRecord] = []
    staged = Staged(new=fresh, duplicates=0, digests=dict(digests or {}))
    for record, key in zip(records, keys, strict=True):
        digest = staged.digests.get(key) or staged.digests.setdefault(key, record_digest(record))
        if key in seen:
            continue
        if key in unseen:
            seen.add(key)
            fresh.append(_hashed(key, record))
        elif updates and (before := None if previous is None else previous.get(short_key(key))) != digest:
            seen.add(key)
            staged.updates.append(_hashed(key, record))
            staged.changed += before is not None  # an edit seen; else a recheck, which the flush may find unchanged
    staged.duplicates = len(records) - len(fresh) - staged.changed
    return staged


def _hashed(key: str, record: AnyRecord) -> StagedRecord:
    # A Record unpacked is a Mapping[str, object] to mypy; with "hash" added it is a HashedRecord.
    return cast(StagedRecord, {"hash": key, **record})


def _checked(batch: Batch, dedup: Uniqueness, identity: Identity, seen: set[str]) -> Staged:
    staged = select_new(batch, dedup, identity, seen)
    staged.duplicates += batch.known
    return staged


def print_records(records: Sequence[StagedRecord], out: TextIO, table: str,
                  updates: Sequence[StagedRecord] = ()) -> None:
    """--dry-run's output: a record a line, as JSON, without the hash. "@table" first names the table
    it would go to (items, or a job's), as the records of several jobs share the stream; no column can
    be named so (a job's columns are lowercase letters, digits and _). `updates` (records stored before,
    staged again to update their rows) follow, each with "@update": true. A missing value is null, as the
    table (an empty cell is NULL) and `export` have it."""
    for record, mark in [*((r, {}) for r in records), *((r, {"@update": True}) for r in updates)]:
        shown = {"@table": table, **mark, **{k: _shown(v) for k, v in record.items() if k != "hash"}}
        print(json.dumps(shown, ensure_ascii=False), file=out)
    out.flush()


def _shown(value: object) -> object:
    # What the staging CSV writes as an empty cell (staging.py's cell_text), which the flush stores as NULL.
    return None if value == "" or value == [] or value == {} else value


class Sink:
    def __init__(self, *, table: str, columns: Sequence[str], unique: UniqueRule, files: SinkFiles,
                 updates: str | Updates = "update", known: KnownDigests | None = None):
        """`unique`: how a record staged before is told (its key's fields, DEDUP, HASH, UNIQUE_WINDOW);
        `files`: where the staging CSV and hashes are; `updates`: the table's UPDATES mode at the flush, or
        its sources' (db/upsert.py); `known`: the feeds' sink's, each source's last poll
        (parser/pipeline/known.py), saved with the hashes."""
        self.table = table
        self.updates = updates
        self.columns = ("hash", *columns)
        self.identity = Identity(unique.fields, unique.algorithm, table=table)
        self.folder = staging_dir = files.staging_dir
        # Before any file opens: hashes of another rule are refused, naming the setting's old value.
        self.history = History(staging_dir, files.hash_stem, dedup_mode=unique.dedup_mode, algorithm=unique.algorithm,
                               unique_fields=unique.fields, setting=unique.setting)
        self.history.check_rule()
        self.staging = StagingFile(staging_dir / files.csv_name, self.columns)
        self.dedup: Uniqueness = open_uniqueness(unique.dedup_mode, staging_dir, unique.algorithm, files.hash_stem,
                                                 window=unique.window)
        self.known = known

    def table_spec(self) -> TableSpec:
        """What the database makes this sink's table from (flush_all.prepare_tables, at start)."""
        return TableSpec(self.table, self.columns, None, history=_keeps_history(self.updates))

    def check_history(self, db: Database) -> None:
        """At start: refuse a database these hashes were not flushed into (parser/pipeline/history.py)."""
        self.history.check_database(db, self.table)

    def compact_hashes(self) -> Compacted | None:
        """UNIQUE_WINDOW: the hashes older than the window out of the hash file, at most once a day."""
        return self.dedup.compact()

    def staged_rows(self) -> Iterator[dict[str, str]]:
        """Every row staged and not flushed yet: the batches rotated for a flush, then the staging CSV."""
        for path in [*self.staging.batches(), self.staging.path]:
            if path.exists():
                yield from read_rows(path)

    def stage(self, records: Sequence[AnyRecord], feed_links: Iterable[str] = ()) -> Staged:
        """select_new, then append to the CSV durably, and only then remember the hashes."""
        return self.stage_many([Batch(records, feed_links)])[0]

    def stage_many(self, batches: Sequence[Batch]) -> list[Staged]:
        """Several polls' records (each with its feed's links) in one durable append, one fsync for all;
        a record two of them share is new in the first only. Return each batch's Staged."""
        seen: set[str] = set()
        results = [_checked(Batch(*batch), self.dedup, self.identity, seen) for batch in batches]
        new = [record for staged in results for record in staged.new]
        rows = new + [record for staged in results for record in staged.updates]
        if rows:
            refused: list[tuple[StagedRecord, str]] = []
            self.staging.append(rows, refused)
            for record, error in refused:
                set_aside(self.folder, self.table, record, error)
            self.dedup.add(r["hash"] for r in new)  # a set-aside record is not asked for again
        return results

    def flush(self, db: Database | None) -> FlushCount:
        """Load every pending batch into the table; return what was written, updated, already stored.

        Rotate, insert (or update, as `updates` says: db/upsert.py) by hash, commit, then delete the batch:
        a crash anywhere in between is repaired by doing it again, and a row updated already is left as it
        is the second time. A batch read here goes in parts of batch_read.PART_CHARS, each committed: after
        a crash or a failed part, the parts already in are counted as already stored when loaded again.
        """
        assert db is not None, "only --dry-run runs without a database, and its sink is a PrintSink"
        self.staging.rotate()
        written = updated = already = versions = 0
        for batch in self.staging.batches():
            loaded, rows = self._load(db, batch)
            os.remove(batch)
            written, updated = written + loaded.inserted, updated + loaded.updated
            already += rows - loaded.inserted - loaded.updated
            versions += loaded.versions
        if written or already or updated:  # the mark of the database these hashes went into (pipeline/history.py)
            self.history.flushed(db, self.table)
        return FlushCount(written, updated, already, versions)

    def _load(self, db: Database, batch: Path) -> tuple[Loaded, int]:
        """Load one batch file; return (what was loaded, rows in it). PostgreSQL parses the file itself;
        when it cannot or refuses something, the file is read here and inserted as rows, a part at a
        time: the memory a flush takes follows the part, not the file."""
        loaded = db.insert_file(self.table, self.columns, batch, read_header(batch) or (),
                                escaped_start=ESCAPED_START, mode=self.updates)
        if loaded is not None:
            return loaded
        done, rows = Loaded(0, 0), 0
        for cells in read_parts(batch):  # each part inserted (its own transaction) and let go before the next
            for unsafe in cells.unsafe:  # a file staged by an older version: text made safe as select_new does
                numbered = {str(i): cell for i, cell in enumerate(cells.rows[unsafe])}
                cells.rows[unsafe] = tuple(safe_record(numbered).values())
            if cells.rows:
                done += self._insert(db, cells.header, cells.rows)
            rows += len(cells.rows)
        return done, rows

    def _insert(self, db: Database, fields: Sequence[str], rows: Sequence[Sequence[str | None]]) -> Loaded:
        """Insert rows (cells in the order of `fields`); when the database refuses a value, find the
        refused rows by halving (a few transactions for a few bad rows among thousands), set them aside
        and insert the others."""
        try:
            return db.insert_new(self.table, self.columns, rows, fields=fields, mode=self.updates)
        except RecordRefusedError as exc:
            if len(rows) == 1:
                set_aside(self.folder, self.table, dict(zip(fields, rows[0], strict=True)), str(exc))
                return Loaded(0, 0)
        middle = len(rows) // 2
        return self._insert(db, fields, rows[:middle]) + self._insert(db, fields, rows[middle:])

    def pending_rows(self) -> int:
        return self.staging.pending_rows()

    def save(self) -> None:
        self.dedup.save()
        if self.known is not None:  # after the hashes: a digest saved never leads the hash it goes with
            self.known.save()

    def close(self) -> None:
        self.dedup.close()

    def say(self, text: str) -> None:
        """A PrintSink's comment line; a Sink's records speak through the log lines instead."""

    def show(self, records: Sequence[StagedRecord], updates: Sequence[StagedRecord] = ()) -> None:
        """A PrintSink prints the records that would be staged (new, and `updates` of stored rows); a Sink
        has staged them."""


class PrintSink:
    """--dry-run's sink: Sink's interface, writing nothing. Uniqueness is checked read-only against
    the hashes staged by earlier runs (so what is stored already is not shown) and against this run's
    own records; show() prints the records that would be staged (JSON lines on `out`, stdout: `| jq` reads
    them), say() the `#` comment lines about them on `notes` (stderr unless given)."""

    def __init__(self, *, table: str, columns: Sequence[str], unique: UniqueRule, files: SinkFiles, out: TextIO,
                 notes: TextIO | None = None):
        self.table = table
        self.columns = ("hash", *columns)
        self.identity = Identity(unique.fields, unique.algorithm, table=table)
        self.history = History(files.staging_dir, files.hash_stem, dedup_mode=unique.dedup_mode,
                               algorithm=unique.algorithm, unique_fields=unique.fields, setting=unique.setting,
                               read_only=True)
        self.history.check_rule()  # what a real run would refuse, refused
        self.dedup: Uniqueness = open_uniqueness(unique.dedup_mode, files.staging_dir, unique.algorithm,
                                                 files.hash_stem, read_only=True)
        self.seen: set[str] = set()  # this run's digests: the read-only check does not take new ones
        self.out = out
        self.notes = notes
        self.updates: str | Updates = "ignore"  # writes nothing, so keeps no versions

    def table_spec(self) -> TableSpec:
        return TableSpec(self.table, self.columns, None, history=False)

    def check_history(self, db: Database) -> None:
        self.history.check_database(db, self.table)

    def compact_hashes(self) -> Compacted | None:
        return self.dedup.compact()

    def staged_rows(self) -> Iterator[dict[str, str]]:
        return iter(())  # nothing is staged

    def stage(self, records: Sequence[AnyRecord], feed_links: Iterable[str] = ()) -> Staged:
        return select_new(Batch(records, feed_links), self.dedup, self.identity, self.seen)

    def stage_many(self, batches: Sequence[Batch]) -> list[Staged]:
        return [_checked(Batch(*batch), self.dedup, self.identity, self.seen) for batch in batches]

    def flush(self, db: Database | None) -> FlushCount:
        return FlushCount(0, 0, 0)

    def pending_rows(self) -> int:
        return 0  # nothing is staged

    def save(self) -> None:
        pass

    def close(self) -> None:
        self.dedup.close()

    def say(self, text: str) -> None:
        notes = self.notes or sys.stderr  # looked up now: the stream in place when it is said
        self.out.flush()  # the records before it come first on a terminal showing both
        print(f"# {text}", file=notes)
        notes.flush()

    def show(self, records: Sequence[StagedRecord], updates: Sequence[StagedRecord] = ()) -> None:
        print_records(records, self.out, self.table, updates)


class RecordSink(Protocol):
    """Where a technique stages its records: a table's Sink, or --dry-run's PrintSink in its place."""
    table: str

    def table_spec(self) -> TableSpec:
        """Its table's name, columns, kinds and whether it keeps `<table>_versions` (UPDATES "history")."""
        ...

    def check_history(self, db: Database) -> None:
        """Refuse a database the hashes were not flushed into (SettingsError: exit 2)."""
        ...

    def compact_hashes(self) -> Compacted | None: ...

    def staged_rows(self) -> Iterator[dict[str, str]]:
        """The rows staged and not flushed yet."""
        ...

    def stage(self, records: Sequence[AnyRecord], feed_links: Iterable[str] = ()) -> Staged: ...

    def stage_many(self, batches: Sequence[Batch]) -> list[Staged]: ...

    def flush(self, db: Database | None) -> FlushCount: ...

    def pending_rows(self) -> int:
        """Records staged and not flushed yet."""
        ...

    def save(self) -> None: ...

    def close(self) -> None: ...

    def say(self, text: str) -> None: ...

    def show(self, records: Sequence[StagedRecord], updates: Sequence[StagedRecord] = ()) -> None: ...


__all__ = ["Batch", "PrintSink", "RecordSink", "Sink", "SinkFiles", "Staged", "StorageError", "UniqueRule"]


class SinkSettings(Protocol):
    """What open_sink reads of the settings (parser/settings/params.py's Settings)."""
    @property
    def dedup(self) -> str: ...
    @property
    def hash(self) -> str: ...
    @property
    def unique_window(self) -> float | None: ...


def open_sink(settings: SinkSettings, *, table: str, columns: Sequence[str], unique_fields: str | Sequence[str],
              staging_dir: Path, dry_run: bool, out: TextIO | None = None, updates: str | Updates = "update",
              known: KnownDigests | None = None) -> RecordSink:
    """A table's sink with its staging.csv and hashes in `staging_dir`; --dry-run's PrintSink in its place.
    `updates`: the table's UPDATES mode, or its sources' (db/upsert.py); `known`: the feeds' digests, a real
    run's only."""
    setting = "UNIQUE_FIELDS" if table == "items" else f"unique_fields of job {table!r} (LINK_JOBS)"
    unique = UniqueRule(unique_fields, settings.dedup, settings.hash, setting, window=settings.unique_window)
    files = SinkFiles(staging_dir)
    if dry_run:
        return PrintSink(table=table, columns=columns, unique=unique, files=files, out=out or sys.stdout)
    return Sink(table=table, columns=columns, unique=unique, files=files, updates=updates, known=known)


def _keeps_history(updates: str | Updates) -> bool:
    """Whether a sink's UPDATES (one mode, or the table's with its sources' own) keeps any row's versions."""
    return (updates if isinstance(updates, Updates) else Updates(updates)).widest == "history"
