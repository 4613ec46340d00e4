"""The intake: where every record's fate is decided, once, and said. A sink's first half.

Each entry a poll, a push or a job hands in gets one Verdict: NEW (never staged), EDITED (stored before,
its digest differs from the source's last poll's), RECHECKED (stored before, the last poll's digest unknown:
staged again, the flush changes its row only where something differs), REPEATED (the source's last poll had
it with the same digest: never read whole) or DUPLICATE (staged before and no update asked, or twice in one
batch). The rules are here alone: `first_look` decides REPEATED where the body is parsed (a parse process:
parser/pipeline/first_read.py), before any entry is read whole, and `decide` the rest on the main thread, the
records keyed (parser/pipeline/identity.py) and checked against the hashes (parser/pipeline/dedup.py). The
Intake then appends the NEW, EDITED and RECHECKED records durably to the staging CSV and only then remembers
their hashes; with the feeds' sink, each source's last poll's digests (parser/pipeline/last_polls.py) are saved
after the hashes. The flush (parser/pipeline/flusher.py) takes the CSV from there.
"""
from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, cast

from ..core.record import AnyRecord, StagedRecord, clean_text, record_digest, safe_record
from .identity import Identity
from .last_polls import LastPolls, short_key
from .quarantine import set_aside
from .staging import StagingFile, read_rows

if TYPE_CHECKING:  # a parse process imports this module for first_look: not the hash files' Bloom filter
    from .dedup import Uniqueness  # imported on first use: the checker's only (a parse process's memory)
    from .hash_window import Compacted  # imported on first use: the checker's only (a parse process's memory)


class Verdict(enum.Enum):
    """What the intake decided of one entry, and why (the value)."""
    NEW = "never staged before"
    EDITED = "stored before; its digest differs from the source's last poll"
    RECHECKED = "stored before; the source's last poll is not known, so the flush compares it with its row"
    REPEATED = "the source's last poll had it with the same digest: not read again"
    DUPLICATE = "staged before (or earlier in this batch), and no update asked"

    @property
    def staged(self) -> bool:
        """Whether a record so judged goes to the staging CSV."""
        return self in (Verdict.NEW, Verdict.EDITED, Verdict.RECHECKED)


@dataclass(frozen=True)
class FirstLook:
    """first_look's answer for one body's kept entries: their keys, which to read whole (not REPEATED), the
    records' ids as identity stores them, every entry's digest, and identity's lines for the log."""
    keys: list[str]
    wanted: list[bool]
    stored_ids: list[dict[str, str]]
    digests: dict[str, str]
    log_lines: list[tuple[bool, str]]


def first_look(identity: Identity, ids: Sequence[Mapping[str, str]], feed_links: Iterable[str],
               previous: Mapping[str, str] | None) -> FirstLook | None:
    """Where the body is parsed, before any entry is read whole: each entry keyed from its ids ({source,
    guid, link, digest} as the adapter reads them) and REPEATED where `previous` (short key -> digest of the
    source's last poll, parser/pipeline/last_polls.py) holds its key with the same digest. None when a key needs
    more than the ids (an entry with neither guid nor link, keyed by its content; UNIQUE_FIELDS naming other
    fields): every entry is then read whole and keyed from the record (parser/pipeline/first_read.py)."""
    if not identity.keyed_by_ids():
        return None
    log_lines: list[tuple[bool, str]] = []
    # As the sink would see them: sanitize.finish_record's clean_text, then safe_record.
    stubs = [safe_record({name: clean_text(value) for name, value in one.items() if name != "digest"}) for one in ids]
    identified = identity.identify(stubs, feed_links, log_lines)
    if identified.by_content:
        return None
    digests = [one.get("digest", "") for one in ids]
    before = previous or {}
    wanted = [not digest or before.get(short_key(key)) != digest
              for key, digest in zip(identified.keys, digests, strict=True)]
    return FirstLook(keys=identified.keys, wanted=wanted, stored_ids=identified.records,
                     digests={key: digest for key, digest in zip(identified.keys, digests, strict=True) if digest},
                     log_lines=log_lines)


@dataclass
class Staged:
    """What the intake made of one batch."""
    new: list[StagedRecord]  # the new records, each with its `hash`
    # Records stored before, staged again to update their rows: their digest differs from the last poll's
    # (EDITED), or none was known (RECHECKED: a first poll since the digests were lost; the flush changes
    # the row only where something differs).
    updates: list[StagedRecord] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)  # key -> digest of every entry of the batch
    verdicts: Counter[Verdict] = field(default_factory=Counter)  # how many entries each Verdict

    @property
    def changed(self) -> int:
        """The updates that are edits seen (EDITED)."""
        return self.verdicts[Verdict.EDITED]

    @property
    def duplicates(self) -> int:
        """What the log counts as duplicates: DUPLICATE, REPEATED, and RECHECKED (the flush mostly finds its
        row unchanged)."""
        return self.verdicts[Verdict.DUPLICATE] + self.verdicts[Verdict.REPEATED] + self.verdicts[Verdict.RECHECKED]


class Batch(NamedTuple):
    """One poll's (or delivery's) records for stage_many."""
    records: Sequence[AnyRecord]
    feed_links: Iterable[str] = ()  # the feed's own addresses (parser/pipeline/identity.py)
    keys: Sequence[str] | None = None  # taken already where the body was parsed (parser/pipeline/first_read.py)
    repeated: int = 0  # entries judged REPEATED there (first_look), never read whole
    # key -> digest, as the parse took them (the records' and the unread entries'); None: from the records.
    digests: Mapping[str, str] | None = None
    # The source's last poll's digests (short key -> digest, parser/pipeline/last_polls.py); None: none known, so
    # an entry stored before is staged again (the flush changes its row only when something differs).
    previous: Mapping[str, str] | None = None
    updates: bool = False  # stage an entry stored before whose digest changed (UPDATES is not "ignore")


def decide(batch: Batch, dedup: Uniqueness, identity: Identity, seen: set[str] | None = None) -> Staged:
    """The verdict on each of the batch's records (those first_look did not judge already), in Staged.verdicts.
    Key each record (parser/pipeline/identity.py: one poll's records together, `feed_links` being the feed's
    own addresses; or `keys` given, taken with the same rules where the body was parsed) and stage, with its
    `hash`, those neither staged before nor already in `seen` (this batch, or a dry run's earlier batches):
    NEW; the uniqueness check is asked once per batch. With `updates`, a record stored before is staged too
    (it updates its row at the flush) when its digest differs from `previous`'s (EDITED) or `previous` lacks
    it (stored, but not by the source's last poll that was kept: a kill between the hash file's save and the
    digests'), and every one when `previous` is None (RECHECKED). The rest are DUPLICATE; the batch's
    `repeated` entries are counted as REPEATED."""
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
    staged = Staged(new=fresh, digests=dict(digests or {}))
    verdicts = staged.verdicts
    verdicts[Verdict.REPEATED] += batch.repeated
    for record, key in zip(records, keys, strict=True):
        digest = staged.digests.get(key) or staged.digests.setdefault(key, record_digest(record))
        verdict = _verdict(key, digest, unseen, seen, None if previous is None else previous.get(short_key(key)),
                           updates=updates)
        verdicts[verdict] += 1
        if not verdict.staged:
            continue
        seen.add(key)
        (fresh if verdict is Verdict.NEW else staged.updates).append(_hashed(key, record))
    return staged


def _verdict(key: str, digest: str, unseen: set[str], seen: set[str], before: str | None, *,
             updates: bool) -> Verdict:
    """One record's verdict on the main thread (first_look gave REPEATED where the body was parsed)."""
    if key in seen:
        return Verdict.DUPLICATE
    if key in unseen:
        return Verdict.NEW
    if not updates or before == digest:
        return Verdict.DUPLICATE
    return Verdict.EDITED if before is not None else Verdict.RECHECKED


def _hashed(key: str, record: AnyRecord) -> StagedRecord:
    # A Record unpacked is a Mapping[str, object] to mypy; with "hash" added it is a HashedRecord.
    return cast(StagedRecord, {"hash": key, **record})


class Intake:
    """One table's intake: identity, uniqueness (the hashes), the staging CSV and the last polls' digests."""

    def __init__(self, table: str, identity: Identity, dedup: Uniqueness, staging: StagingFile, *,
                 folder: Path, last_polls: LastPolls | None = None):
        self.table, self.identity, self.dedup, self.staging = table, identity, dedup, staging
        self.folder, self.last_polls = folder, last_polls

    def stage_many(self, batches: Sequence[Batch]) -> list[Staged]:
        """Several polls' records (each with its feed's links) in one durable append, one fsync for all;
        a record two of them share is new in the first only. Return each batch's Staged."""
        seen: set[str] = set()
        results = [decide(Batch(*batch), self.dedup, self.identity, seen) for batch in batches]
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
        if self.last_polls is not None:  # after the hashes: a digest saved never leads the hash it goes with
            self.last_polls.save()

    def close(self) -> None:
        self.dedup.close()
