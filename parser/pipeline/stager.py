"""A sink's first half: a batch's records keyed (parser/pipeline/identity.py), those staged before left out
(parser/pipeline/dedup.py), the rest appended durably to the staging CSV, and only then their hashes
remembered; with the feeds' sink, each source's last poll's digests (parser/pipeline/known.py) saved after
the hashes. The flush (parser/pipeline/flusher.py) takes the CSV from there.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, cast

from ..core.record import AnyRecord, StagedRecord, record_digest, safe_record
from .dedup import Uniqueness
from .hash_window import Compacted
from .identity import Identity
from .known import KnownDigests, short_key
from .quarantine import set_aside
from .staging import StagingFile, read_rows


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


def check_batch(batch: Batch, dedup: Uniqueness, identity: Identity, seen: set[str]) -> Staged:
    staged = select_new(batch, dedup, identity, seen)
    staged.duplicates += batch.known
    return staged


class Stager:
    """Identity, uniqueness, the staging CSV and the known digests of one table's sink."""

    def __init__(self, table: str, identity: Identity, dedup: Uniqueness, staging: StagingFile, *,
                 folder: Path, known: KnownDigests | None = None):
        self.table, self.identity, self.dedup, self.staging = table, identity, dedup, staging
        self.folder, self.known = folder, known

    def stage_many(self, batches: Sequence[Batch]) -> list[Staged]:
        """Several polls' records (each with its feed's links) in one durable append, one fsync for all;
        a record two of them share is new in the first only. Return each batch's Staged."""
        seen: set[str] = set()
        results = [check_batch(Batch(*batch), self.dedup, self.identity, seen) for batch in batches]
        new = [record for staged in results for record in staged.new]
        rows = new + [record for staged in results for record in staged.updates]
        if rows:
            refused: list[tuple[StagedRecord, str]] = []
            self.staging.append(rows, refused)
            for record, error in refused:
                set_aside(self.folder, self.table, record, error)
            self.dedup.add(r["hash"] for r in new)  # a set-aside record is not asked for again
        return results

    def staged_rows(self) -> Iterator[dict[str, str]]:
        """Every row staged and not flushed yet: the batches rotated for a flush, then the staging CSV."""
        for path in [*self.staging.batches(), self.staging.path]:
            if path.exists():
                yield from read_rows(path)

    def pending_rows(self) -> int:
        return self.staging.pending_rows()

    def compact_hashes(self) -> Compacted | None:
        """UNIQUE_WINDOW: the hashes older than the window out of the hash file, at most once a day."""
        return self.dedup.compact()

    def save(self) -> None:
        self.dedup.save()
        if self.known is not None:  # after the hashes: a digest saved never leads the hash it goes with
            self.known.save()

    def close(self) -> None:
        self.dedup.close()
