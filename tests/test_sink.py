"""parser/pipeline/sink.py in-process, on real files and a real SQLite database: stage_many keeps a record new
in the first batch only and remembers its hash only once it is durably staged; flush loads every
pending batch and is repaired by doing it again after a crash; a row the database refuses is found by
halving and set aside in quarantine.jsonl while the others are stored. The daemon tests
(test_cyclic_e2e.py, test_poison_records.py, test_crash_safety.py) show the same through a process."""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from db.store import Database
from parser.core.record import RECORD_FIELDS
from parser.pipeline.sink import Sink, SinkFiles, UniqueRule


def open_items_sink(staging: Path) -> Sink:
    return Sink(table="items", columns=RECORD_FIELDS, unique=UniqueRule("auto", "hashfile", "sha224"),
                files=SinkFiles(staging))


def entry(n: int, title: str | None = None, source: str = "news") -> dict:
    link = f"http://news.example/item/{n}"
    return {"source": source, "guid": link, "link": link, "title": title or f"item {n}"}


def stored_titles(path: Path, table: str = "items") -> list[str]:
    con = sqlite3.connect(path)
    try:
        return [row[0] for row in con.execute(f"SELECT title FROM {table} ORDER BY id")]
    finally:
        con.close()


@pytest.fixture
def database(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'db' / 'items.db'}")
    yield db
    db.close()


def test_stage_many_keeps_a_shared_record_new_in_the_first_batch_only(tmp_path):
    sink = open_items_sink(tmp_path / "staging")
    first, second = sink.stage_many([([entry(1), entry(2)], ()), ([entry(2), entry(3)], ())])
    assert [r["title"] for r in first.new] == ["item 1", "item 2"] and first.duplicates == 0
    assert [r["title"] for r in second.new] == ["item 3"] and second.duplicates == 1
    assert all(len(r["hash"]) == 56 for r in first.new + second.new)  # sha224, hex
    staged = (tmp_path / "staging" / "staging.csv").read_text(encoding="utf-8").splitlines()
    assert staged[0].startswith('"hash","source","guid","link","title"') and len(staged) == 4
    again = sink.stage([entry(1), entry(3), entry(4)])
    assert [r["title"] for r in again.new] == ["item 4"] and again.duplicates == 2
    sink.close()
    restarted = open_items_sink(tmp_path / "staging")  # the hash file outlives the process
    assert restarted.stage([entry(4), entry(5)]).duplicates == 1
    restarted.close()


def test_a_record_the_csv_cannot_hold_is_set_aside_and_its_batch_goes_on(tmp_path):
    """Nothing reaches staging unsafe (intake.decide makes text safe first); should the CSV still refuse
    a row, it goes to quarantine.jsonl and the rows beside it are staged."""
    sink = open_items_sink(tmp_path / "staging")
    sink.staging.append = lambda rows, refused: [refused.append((r, "no room")) for r in rows if "bad" in r["title"]]
    staged = sink.stage([entry(1, "bad one"), entry(2)])
    assert len(staged.new) == 2
    quarantined = [json.loads(line) for line in (tmp_path / "staging" / "quarantine.jsonl").read_text().splitlines()]
    assert [(q["table"], q["source"], q["record"]["title"], q["error"]) for q in quarantined] == [
        ("items", "news", "bad one", "no room")]
    sink.close()


def test_flush_loads_the_staged_rows_and_a_crash_before_the_batch_is_deleted_loses_nothing(tmp_path, database):
    staging = tmp_path / "staging"
    sink = open_items_sink(staging)
    sink.stage([entry(n) for n in range(1, 4)])
    assert sink.flush(database) == (3, 0, 0, 0)
    assert stored_titles(tmp_path / "db" / "items.db") == ["item 1", "item 2", "item 3"]
    assert sink.staging.batches() == [] and sink.staging.pending_rows() == 0
    assert sink.flush(database) == (0, 0, 0, 0)  # nothing staged: nothing to do

    sink.stage([entry(4), entry(5)])
    batch = sink.staging.rotate()
    kept = batch.with_name("kept.csv")
    shutil.copy(batch, kept)
    assert sink.flush(database) == (2, 0, 0, 0)
    shutil.move(kept, batch)  # as if the process died after the commit, before deleting the batch
    assert sink.flush(database) == (0, 0, 2, 0)  # loaded again: the rows already there are not doubled
    assert stored_titles(tmp_path / "db" / "items.db") == [f"item {n}" for n in range(1, 6)]
    sink.close()


def test_rows_the_database_refuses_are_found_by_halving_and_set_aside_the_others_stored(tmp_path, database):
    """Three refused rows among a thousand: a few dozen transactions find them (not a thousand), they
    go to quarantine.jsonl with the database's reason, and the 997 others are stored."""
    path = tmp_path / "db" / "items.db"
    path.parent.mkdir(exist_ok=True)  # the Database made it
    con = sqlite3.connect(path)  # a user's own table, with a rule of its own the records break
    con.execute("CREATE TABLE items (id INTEGER PRIMARY KEY AUTOINCREMENT, hash VARCHAR(128) NOT NULL, "
                + ", ".join(f"{c} TEXT" for c in RECORD_FIELDS) + ", CHECK (title NOT LIKE 'refused%'))")
    con.execute("CREATE UNIQUE INDEX items_hash_key ON items (hash)")
    con.commit()
    con.close()
    sink = open_items_sink(tmp_path / "staging")
    refused_at = {100, 101, 700}
    sink.stage([entry(n, f"refused {n}" if n in refused_at else None) for n in range(1000)])
    calls = []
    real_insert = database.insert_new

    def counted(name, columns, rows, **kwargs):
        calls.append(len(rows))
        return real_insert(name, columns, rows, **kwargs)
    database.insert_new = counted
    written, _, _not_written, _ = sink.flush(database)
    assert written == 997
    assert len(calls) <= 60, f"{len(calls)} transactions to find 3 refused rows"
    titles = stored_titles(path)
    assert len(titles) == 997 and not [t for t in titles if t.startswith("refused")]
    quarantined = [json.loads(line) for line in (tmp_path / "staging" / "quarantine.jsonl").read_text().splitlines()]
    assert sorted(q["record"]["title"] for q in quarantined) == ["refused 100", "refused 101", "refused 700"]
    assert all(q["table"] == "items" and "refused a value" in q["error"] for q in quarantined)
    assert sink.staging.batches() == []  # the batch is done: the refused rows are not tried again
    sink.close()
