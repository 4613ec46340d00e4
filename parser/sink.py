"""Where records go after parsing: uniqueness check -> staging CSV -> (flush) -> database table.

A Sink is the same for every kind of record: the cyclic pass has one (table `items`), each
two-pass job has its own (its own table, CSV and hash file), so uniqueness is per table.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from db.store import Database

from .dedup import Uniqueness, open_uniqueness
from .errors import StorageError
from .record import record_hash
from .staging import StagingFile, read_rows

log = logging.getLogger("parser")


@dataclass
class Staged:
    new: list[dict]
    duplicates: int


class Sink:
    def __init__(self, *, table: str, columns: Sequence[str], unique_fields: Sequence[str],
                 staging_dir: Path, csv_name: str, hash_stem: str, dedup_mode: str, algorithm: str):
        self.table = table
        self.columns = ("hash", *columns)
        self.unique_fields = tuple(unique_fields)
        self.algorithm = algorithm
        self.staging = StagingFile(staging_dir / csv_name, self.columns)
        self.dedup: Uniqueness = open_uniqueness(dedup_mode, staging_dir, algorithm, hash_stem)

    def select_new(self, records: list[dict]) -> Staged:
        """Hash each record and keep those neither staged before nor repeated within this batch."""
        fresh: list[dict] = []
        seen: set[str] = set()
        for record in records:
            digest = record_hash(record, self.unique_fields, self.algorithm)
            if digest in seen or not self.dedup.is_new(digest):
                continue
            seen.add(digest)
            fresh.append({"hash": digest, **record})
        return Staged(new=fresh, duplicates=len(records) - len(fresh))

    def stage(self, records: list[dict]) -> Staged:
        """select_new, then append to the CSV durably, and only then remember the hashes."""
        staged = self.select_new(records)
        if staged.new:
            self.staging.append(staged.new)
            self.dedup.add(r["hash"] for r in staged.new)
        return staged

    def flush(self, db: Database) -> tuple[int, int]:
        """Load every pending batch into the table; return (rows written, rows already stored).

        Rotate, insert ignoring known hashes, commit, then delete the batch: a crash anywhere in
        between is repaired by doing it again.
        """
        self.staging.rotate()
        written = already = 0
        for batch in self.staging.batches():
            rows = list(read_rows(batch))
            inserted = db.insert_new(self.table, self.columns, rows) if rows else 0
            os.remove(batch)
            written += inserted
            already += len(rows) - inserted
        return written, already

    def save(self) -> None:
        self.dedup.save()

    def close(self) -> None:
        self.dedup.close()


__all__ = ["Sink", "Staged", "StorageError"]
