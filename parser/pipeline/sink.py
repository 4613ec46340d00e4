"""Where records go after parsing: the intake (uniqueness check -> staging CSV) -> (flush) -> database table.

A Sink is the same for every kind of record: the cyclic pass has one (table `items`), each
two-pass job has its own (its own table, CSV and hash file), so uniqueness is per table. It is two
halves over one staging file: an Intake (parser/pipeline/intake.py) and a Flusher (parser/pipeline/flusher.py).
--dry-run opens a PrintSink in its place (the one choice, where the run is opened): the same
interface, the records that would be staged printed, nothing written.
"""
from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

from db.schema import TableSpec
from db.store import Database
from db.upsert import Updates

from ..core.errors import StorageError
from ..core.record import AnyRecord, StagedRecord
from .dedup import Uniqueness, open_uniqueness
from .flusher import FlushCount, Flusher
from .hash_window import Compacted
from .history import History
from .identity import Identity
from .intake import Batch, Intake, Staged, Verdict, decide
from .last_polls import LastPolls
from .staging import StagingFile

log = logging.getLogger("parser")


@dataclass(frozen=True)
class SinkFiles:
    """Where a sink keeps its files: its folder, the staging CSV's name there and the hash file's stem
    (parser/pipeline/dedup.py)."""
    staging_dir: Path
    csv_name: str = "staging.csv"
    hash_stem: str = "hashes"
    # What else there remembers a record as stored (a job's links.status): moved away with the hashes to
    # store deleted rows again (parser/pipeline/history.py).
    remembered_beside: tuple[str, ...] = ()


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
    """One table's sink: an Intake (parser/pipeline/intake.py: each record's verdict, identity, uniqueness,
    the staging CSV, the last polls' digests) and a Flusher (parser/pipeline/flusher.py: the batches into the table,
    the refused rows set aside, the history's marks) over the same staging file."""

    def __init__(self, *, table: str, columns: Sequence[str], unique: UniqueRule, files: SinkFiles,
                 updates: str | Updates = "update", last_polls: LastPolls | None = None):
        """`unique`: how a record staged before is told (its key's fields, DEDUP, HASH, UNIQUE_WINDOW);
        `files`: where the staging CSV and hashes are; `updates`: the table's UPDATES mode at the flush, or
        its sources' (db/upsert.py); `last_polls`: the feeds' sink's, each source's last poll
        (parser/pipeline/last_polls.py), saved with the hashes."""
        self.table = table
        self.updates = updates
        self.columns = ("hash", *columns)
        self.identity = Identity(unique.fields, unique.algorithm, table=table)
        self.folder = staging_dir = files.staging_dir
        # Before any file opens: hashes of another rule are refused, naming the setting's old value.
        self.history = History(staging_dir, files.hash_stem, dedup_mode=unique.dedup_mode, algorithm=unique.algorithm,
                               unique_fields=unique.fields, setting=unique.setting,
                               remembered_beside=files.remembered_beside)
        self.history.check_rule()
        self.staging = StagingFile(staging_dir / files.csv_name, self.columns)
        self.dedup: Uniqueness = open_uniqueness(unique.dedup_mode, staging_dir, unique.algorithm, files.hash_stem,
                                                 window=unique.window)
        self.last_polls = last_polls
        self.intake = Intake(table, self.identity, self.dedup, self.staging, folder=staging_dir, last_polls=last_polls)
        self.flusher = Flusher(table, self.columns, self.staging, self.history, folder=staging_dir, updates=updates)

    def table_spec(self) -> TableSpec:
        """What the database makes this sink's table from (flush_all.prepare_tables, at start)."""
        return TableSpec(self.table, self.columns, None, history=_keeps_history(self.updates))

    def check_history(self, db: Database) -> None:
        """At start: refuse a database these hashes were not flushed into (parser/pipeline/history.py)."""
        self.history.check_database(db, self.table)

    def compact_hashes(self) -> Compacted | None:
        return self.intake.compact_hashes()

    def staged_rows(self) -> Iterator[dict[str, str]]:
        return self.intake.staged_rows()

    def stage(self, records: Sequence[AnyRecord], feed_links: Iterable[str] = ()) -> Staged:
        """The intake's verdicts (intake.decide), then the staged ones appended to the CSV durably, and only
        then their hashes remembered."""
        return self.stage_many([Batch(records, feed_links)])[0]

    def stage_many(self, batches: Sequence[Batch]) -> list[Staged]:
        return self.intake.stage_many(batches)

    def flush(self, db: Database | None) -> FlushCount:
        """Load every pending batch into the table (Flusher.flush); return what was written, updated, already
        stored."""
        assert db is not None, "only --dry-run runs without a database, and its sink is a PrintSink"
        return self.flusher.flush(db)

    def pending_rows(self) -> int:
        return self.intake.pending_rows()

    def save(self) -> None:
        self.intake.save()

    def close(self) -> None:
        self.intake.close()

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
        return decide(Batch(records, feed_links), self.dedup, self.identity, self.seen)

    def stage_many(self, batches: Sequence[Batch]) -> list[Staged]:
        return [decide(Batch(*batch), self.dedup, self.identity, self.seen) for batch in batches]

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
    """Where a collector stages its records: a table's Sink, or --dry-run's PrintSink in its place."""
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


__all__ = ["Batch", "FlushCount", "PrintSink", "RecordSink", "Sink", "SinkFiles", "Staged", "StorageError",
           "UniqueRule", "Verdict", "decide"]


class SinkSettings(Protocol):
    """What open_sink reads of the settings (parser/settings/params.py's Settings)."""
    @property
    def dedup(self) -> str: ...
    @property
    def hash(self) -> str: ...
    @property
    def unique_window(self) -> float | None: ...


def open_sink(settings: SinkSettings, *, table: str, columns: Sequence[str], unique_fields: str | Sequence[str],
              staging_dir: Path, updates: str | Updates = "update", last_polls: LastPolls | None = None) -> Sink:
    """The feeds' sink (its key's fields are UNIQUE_FIELDS) with its staging.csv and hashes in `staging_dir`.
    `updates`: the table's UPDATES mode, or its sources' (db/upsert.py); `last_polls`: the feeds' digests."""
    return Sink(table=table, columns=columns, unique=unique_rule(settings, unique_fields),
                files=SinkFiles(staging_dir), updates=updates, last_polls=last_polls)


def open_print_sink(settings: SinkSettings, *, table: str, columns: Sequence[str],
                    unique_fields: str | Sequence[str], staging_dir: Path, out: TextIO) -> PrintSink:
    """A dry run's sink in open_sink's place: the records printed on `out`, nothing written."""
    return PrintSink(table=table, columns=columns, unique=unique_rule(settings, unique_fields),
                     files=SinkFiles(staging_dir), out=out)


def unique_rule(settings: SinkSettings, unique_fields: str | Sequence[str],
                setting: str = "UNIQUE_FIELDS") -> UniqueRule:
    """A sink's rule from the settings: its key's fields, named `setting` in the messages (a job's sinks,
    opened by its files, name their own: parser/jobs/job_files.py)."""
    return UniqueRule(unique_fields, settings.dedup, settings.hash, setting, window=settings.unique_window)


def _keeps_history(updates: str | Updates) -> bool:
    """Whether a sink's UPDATES (one mode, or the table's with its sources' own) keeps any row's versions."""
    return (updates if isinstance(updates, Updates) else Updates(updates)).widest == "history"
