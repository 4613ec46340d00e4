"""What a table's hash file means: hashes.json beside hashes.txt says which identity rule took its
hashes (HASH, UNIQUE_FIELDS, the identity rules' version) and which database its records were
flushed into, so that neither can change underneath it without a word.

A hash is only a name for "seen": under another rule the same entry gets another hash, so a hash
file kept across a change of UNIQUE_FIELDS or HASH would let every entry be stored again; and a
hash file brought to a database that lacks its records (a copied project, a restored backup) would
keep them out of it for good. Both are refused at start, saying what to do (HistoryMismatchError:
exit 2, so a service manager does not restart into it); a table whose older rows are there but not
its newest (rows deleted on purpose, or a backup older than the last flush) is refused with a way
that keeps every hash as well (`accept-deletions`, for rows deleted on purpose). A newer version of
the identity rules is taken over with an errors.log line saying what it changes. Written whole
(parser/core/jsonfile.py); a project of a version before this file adopts the settings it runs with,
with a parser.log line.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from db.marks import spread_hashes
from db.store import Database

from ..core.errors import HistoryMismatchError, StorageError
from ..core.jsonfile import read_object, write_whole
from ..core.urls import redact_url
from .identity import AUTO, RULE_CHANGES, RULES_VERSION

log = logging.getLogger("parser")
MARKS = 8  # newest rows remembered after a flush: a database holding none of them is not the one flushed into
FIRST_RULES = 1  # what a hash file without hashes.json was made with: the versions before it


class History:
    """The hashes.json of one hash file (`folder`/`stem`.txt, or .bloom with DEDUP = "bloom")."""

    def __init__(self, folder: Path, stem: str, *, dedup_mode: str, algorithm: str,
                 unique_fields: str | Sequence[str], setting: str = "UNIQUE_FIELDS", read_only: bool = False,
                 remembered_beside: Sequence[str] = ()):
        """`setting` names unique_fields in the operator's words (UNIQUE_FIELDS, or a job's key);
        `remembered_beside`: the files in `folder` that remember what was stored besides the hashes (a job's
        links.status), to be moved away with them for deleted rows to be stored again."""
        self.path = folder / f"{stem}.json"
        self.hashes = None if dedup_mode == "off" else folder / f"{stem}.{'bloom' if dedup_mode == 'bloom' else 'txt'}"
        self.away = folder / f"{stem}.*"
        fields = unique_fields if unique_fields == AUTO else list(unique_fields)
        self.rule = {"hash": algorithm, "unique_fields": fields, "identity_rules": RULES_VERSION}
        self.setting = setting
        self.read_only = read_only
        self.beside = [folder / name for name in remembered_beside]
        self.saved = read_object(self.path) or {}

    # -- at start -----------------------------------------------------------------------------
    def check_rule(self) -> None:
        """Refuse hashes taken by another HASH or unique_fields; take over older identity rules, saying
        what changes; record the rule when it is not recorded yet."""
        if self.hashes is None:
            return  # DEDUP = "off": no hashes, nothing to keep apart
        if not self._has_hashes():
            self._write(self.rule)  # a new history (or one moved away): begun under the rule in effect
            return
        saved = self.saved or {"hash": self.rule["hash"], "unique_fields": self.rule["unique_fields"],
                               "identity_rules": FIRST_RULES}
        settings = (("hash", "HASH"), ("unique_fields", self.setting))
        changed = [(setting, saved[key], self.rule[key]) for key, setting in settings
                   if saved.get(key, self.rule[key]) != self.rule[key]]
        if changed:
            raise HistoryMismatchError(
                f"{self.hashes} was begun under another identity rule: "
                f"{'; '.join(f'{setting} was {old!r} and is now {new!r}' for setting, old, new in changed)}. "
                f"Its {self._count()}hashes were taken by the old rule, so every entry seen before would get "
                f"a new hash and be stored again. Set "
                f"{' and '.join(f'{setting} back to {old!r}' for setting, old, _ in changed)}; or, to start a "
                f"new history under the new rule, move {self.away} away (the entries still in the feeds are "
                "then stored once more: a second row each in the table)")
        rules = saved.get("identity_rules")
        rules = rules if isinstance(rules, int) and not isinstance(rules, bool) else FIRST_RULES
        if rules > RULES_VERSION:
            raise HistoryMismatchError(
                f"{self.hashes} was made by a newer version of the parser (identity rules {rules}; this one "
                f"knows {RULES_VERSION}): run the newer version, or move {self.away} away to start a new history")
        if not self.saved and not self.read_only:
            log.info("%s: its identity rule recorded in %s (HASH %s, %s %r)", self.hashes, self.path.name,
                     self.rule["hash"], self.setting, self.rule["unique_fields"])
        if rules < RULES_VERSION and not self.read_only:
            for version in range(rules + 1, RULES_VERSION + 1):
                # Nothing to do, so parser.log, not errors.log: an upgrade must not look like a failure.
                log.info("%s: identity rules %d taken over from %d (said once; nothing to do): %s", self.hashes,
                         version, version - 1, RULE_CHANGES[version])
        if saved != {**saved, **self.rule}:
            self._write({**saved, **self.rule})

    def check_database(self, db: Database, table: str) -> None:
        """Refuse a database that holds none of the newest rows this hash file's records were flushed
        into (a new database, a dropped table, a backup older than the last flush, newest rows deleted).
        When the table's older rows are there (rows deleted, or an older backup), the refusal offers
        `accept-deletions`, which keeps every hash. A database that cannot be read now is not judged:
        the flush says what is wrong with it."""
        older = self.missing_newest(db, table)
        if older is None:
            self._tell_gone(db, table)
            return
        flushed = self.saved["flushed"]
        where = (f"{self.hashes} says its records were flushed into table {table} of {flushed.get('database')}, "
                 f"but the database of DB_URL ({redact_url(db.url)})")
        if older:
            raise HistoryMismatchError(
                f"{where} does not hold them: table {table} is there with older rows flushed from these hashes "
                f"({older} of the {len(flushed.get('older') or ())} marks), its newest rows are not. If you deleted "
                f"those rows on purpose, run `parser-daemon accept-deletions` (with this --params): every "
                f"hash is kept, so the deleted entries stay out and nothing is stored twice. If the database was "
                f"restored from a backup older than the last flush, move {self.away} away instead (the entries "
                "still in the feeds are stored again; rows it holds already are not doubled)")
        raise HistoryMismatchError(
            f"{where} does not hold them (no table {table}, or none of "
            f"the rows flushed there): the {self._count()}entries it holds would count as stored and never "
            f"be stored in this database. If this database is new or restored from a backup and should get "
            f"the entries again, move {self.away} away (the entries still in the feeds are stored again; rows "
            "it holds already are not doubled); if DB_URL names the wrong database, set it back")

    def _tell_gone(self, db: Database, table: str) -> None:
        """Some (not all: that is refused) of the newest rows flushed from these hashes are gone from the table,
        deleted: their entries stay out, as the hashes remember them. Said once in parser.log, with the way
        to store them again: the table as it is now becomes the mark, as after a flush."""
        flushed = self.saved.get("flushed")
        if self.hashes is None or self.read_only or not isinstance(flushed, dict) or flushed.get("table") != table:
            return
        marks = [m for m in flushed.get("newest") or () if isinstance(m, str)]
        try:
            gone = sum(not db.holds_any(table, [mark]) for mark in marks)
        except StorageError:
            return  # the flush says what is wrong with the database
        if not gone:
            return
        # A job's links are done: they are fetched again only without their statuses.
        way = f"move {self.away} away (the entries still in the feeds are staged again" if not self.beside else \
            f"move {self.away} and {' and '.join(map(str, self.beside))} away (every link of the job is fetched again"
        log.info("table %s: %d of the %d newest rows flushed from %s are gone from it (deleted since the last "
                 "flush?). Their entries stay out: the hash file remembers them, so they are not staged again. To "
                 "store them again, stop the daemon and %s; rows the table holds are not doubled); to keep them "
                 "out, nothing to do (said once)", table, gone, len(marks), self.hashes.name, way)
        self.flushed(db, table)

    def missing_newest(self, db: Database, table: str) -> int | None:
        """None when the database holds the mark of the last flush (or there is none, or it cannot be
        read now); else how many of the older marks it holds (0: another database)."""
        flushed = self.saved.get("flushed")
        if self.hashes is None or not isinstance(flushed, dict) or not self._has_hashes():
            return None
        marks = [m for m in flushed.get("newest") or () if isinstance(m, str)]
        older = [m for m in flushed.get("older") or () if isinstance(m, str)]
        if not marks or flushed.get("table") != table:
            return None
        try:
            if db.holds_any(table, marks):
                return None
            return sum(db.holds_any(table, [m]) for m in older)
        except StorageError:
            return None

    def accept(self, db: Database, table: str) -> bool:
        """The operator says the rows missing from this table were deleted on purpose: the table as it is
        now becomes the mark; every hash is kept. False when there was nothing to accept."""
        if self.missing_newest(db, table) is None:
            return False
        self._write({k: v for k, v in self.saved.items() if k != "flushed"})
        self.flushed(db, table)
        return True

    def marked(self) -> list[str]:
        """The hashes of the rows that mark this database now (hashes.json read again: a flush beside the
        reader may have moved them). The retention pass (parser/retention.py) never deletes them, so a kill in
        the middle of it leaves a database a start accepts; they go at a later pass, once newer rows mark it."""
        flushed = (read_object(self.path) or {}).get("flushed")
        newest = flushed.get("newest") if isinstance(flushed, dict) else None
        return [m for m in newest if isinstance(m, str)] if isinstance(newest, list) else []

    # -- at a flush ---------------------------------------------------------------------------
    def flushed(self, db: Database, table: str) -> None:
        """After a flush that wrote or met rows: remember the table's newest rows, and rows spread over
        the older ones, as the mark of this database. A failed read keeps the earlier mark, which the
        database holds as well."""
        if self.hashes is None or self.read_only:
            return
        try:
            newest = db.newest_hashes(table, MARKS)
            older = [h for h in spread_hashes(db, table, MARKS) if h not in newest] if newest else []
        except StorageError:
            return
        flushed = {"database": redact_url(db.url), "table": table, "newest": newest, "older": older}
        if newest and self.saved.get("flushed") != flushed:
            self._write({**(self.saved or self.rule), "flushed": flushed})

    # -- helpers ------------------------------------------------------------------------------
    def _has_hashes(self) -> bool:
        if self.hashes is None:  # DEDUP "off": no hash file
            return False
        try:
            return self.hashes.stat().st_size > 0
        except OSError:
            return False

    def _count(self) -> str:
        """'1,234 ' for a hash file (fixed-width lines, of the HASH that wrote them), '' for a Bloom filter."""
        if self.hashes is None or self.hashes.suffix != ".txt":
            return ""
        with open(self.hashes, "rb") as f:
            width = len(f.readline())
        return f"{self.hashes.stat().st_size // width:,} "

    def _write(self, data: dict) -> None:
        if self.read_only or data == self.saved:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(self.path, data, indent=1)
        self.saved = data
