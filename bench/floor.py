"""The floor under a round of bench_steady: the CPU no feed reader can go below for what the round served.

Two parts, each measured in this process, one core, after the round (not while either side runs):
- reading the bytes: lxml's parse of every body the round answered with a body (a 200), the tree made
  and let go, no record made (a JSON body: json.loads); the parser recovers, as xmlfeed's does, so a
  body that is not well-formed costs what reading it costs;
- writing the rows: the rows the round stored, read back from ours' database, inserted by one bare
  `sqlite3` executemany into an empty table of the same schema, in one transaction, synchronous FULL.
Ours' CPU over the sum says how far the round is from its floor: the rest is making records (dates,
text, sanitizing), the uniqueness check, staging, start-up and the parse processes' own costs.
"""
from __future__ import annotations

import json
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from lxml import etree


@dataclass(frozen=True)
class Floor:
    bodies: int
    reading_cpu: float  # CPU s of lxml's parse of the bodies
    rows: int
    writing_cpu: float  # CPU s of the bare executemany of the rows

    @property
    def cpu(self) -> float:
        return self.reading_cpu + self.writing_cpu

    def describe(self, ours_cpu: float) -> str:
        times = f": ours {ours_cpu / self.cpu:.1f}x it" if self.cpu >= 0.01 else ""
        return (f"floor {self.cpu:.2f} CPU s (lxml's parse of the {self.bodies} bodies served "
                f"{self.reading_cpu:.2f} s, writing the {self.rows} rows stored {self.writing_cpu:.2f} s){times}")


def reading_cpu(bodies: list[bytes]) -> float:
    """CPU s to parse each body into a tree (XML) or values (JSON), and nothing more."""
    parser = etree.XMLParser(recover=True, resolve_entities=False, no_network=True, huge_tree=True)
    started = time.process_time()
    for body in bodies:
        if body.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{":
            json.loads(body)
        else:
            etree.fromstring(body, parser)
    return time.process_time() - started


def writing_cpu(db: Path, table: str, after_id: int) -> tuple[int, float]:
    """(rows, CPU s) of a bare executemany of `table`'s rows with id > after_id into an empty copy of it."""
    source = sqlite3.connect(db)
    try:
        schema = source.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
        indexes = [sql for (sql,) in source.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", (table,))]
        cursor = source.execute(f"SELECT * FROM {table} WHERE id > ?", (after_id,))  # noqa: S608 (our table)
        columns = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
    finally:
        source.close()
    if not schema or not rows:
        return 0, 0.0
    with tempfile.TemporaryDirectory() as folder:
        target = sqlite3.connect(Path(folder) / "floor.db", isolation_level=None)
        try:
            target.execute("PRAGMA synchronous = FULL")
            target.execute(schema[0])
            for sql in indexes:
                target.execute(sql)
            insert = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
            started = time.process_time()
            target.execute("BEGIN")
            target.executemany(insert, rows)
            target.execute("COMMIT")
            return len(rows), time.process_time() - started
        finally:
            target.close()


def largest_id(db: Path, table: str) -> int:
    if not db.exists():
        return 0
    con = sqlite3.connect(db)
    try:
        return con.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}").fetchone()[0]  # noqa: S608 (our table)
    except sqlite3.Error:
        return 0
    finally:
        con.close()
