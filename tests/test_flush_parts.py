"""A flush reads a batch file in parts (parser/pipeline/batch_read.read_parts) and inserts each before
reading the next: its memory follows the part, not the staging file (a restart over 200,000 staged
rows read the 835 MiB file whole and took 1.9 GB). In-process, the real Sink and a SQLite file: every
row stored once across parts, the counts right, a refused row set aside from whichever part holds
it, bytes not UTF-8 in a later part stored once, a failed part's batch stored whole at the next flush."""
from __future__ import annotations

import tracemalloc

import pytest

from db.store import Database
from parser.core.errors import StorageError
from parser.core.record import RECORD_FIELDS
from parser.pipeline import batch_read
from parser.pipeline.batch_read import read_parts
from parser.pipeline.staging import read_rows
from tests.process import lock_sqlite
from tests.test_flush_bulk import entry, open_sink, quarantined, run_sql, select, write_batch

PARAGRAPH = "<p>" + "words of a long post " * 20 + "</p>"  # about 400 characters


def long_entry(n: int, title: str | None = None) -> dict:
    return {**entry(n, title), "content": PARAGRAPH * 10}  # about 4 KB, as a real post's content


@pytest.fixture
def sqlite_db(tmp_path):
    url = f"sqlite:///{tmp_path / 'db' / 'items.db'}"
    database = Database(url)
    yield database, url
    database.close()


def staged_batch(sink):
    """The staging file as the flush will read it: rotated into its batch file."""
    sink.staging.rotate()
    (batch,) = sink.staging.batches()
    return batch


def test_the_parts_together_are_the_file(tmp_path):
    sink = open_sink(tmp_path / "staging")
    sink.stage([long_entry(n) for n in range(120)])
    parts = list(read_parts(sink.staging.path, part_chars=20_000))
    assert len(parts) >= 20
    assert all(len(p.rows) <= 6 for p in parts)  # a part ends once it holds part_chars
    assert [list(r) for p in parts for r in p.rows] == [list(r.values()) for r in read_rows(sink.staging.path)]
    assert {p.header for p in parts} == {tuple(next(read_rows(sink.staging.path)).keys())}
    sink.close()


def test_a_file_without_records_is_one_part_with_its_header(tmp_path):
    path = tmp_path / "staging.csv"
    path.write_text('"hash","title"\n', encoding="utf-8")
    assert [(p.header, p.rows) for p in read_parts(path)] == [(("hash", "title"), [])]


def test_a_batch_of_many_parts_is_stored_whole_once_with_the_right_counts(tmp_path, sqlite_db, monkeypatch):
    db, url = sqlite_db
    monkeypatch.setattr(batch_read, "PART_CHARS", 20_000)
    sink = open_sink(tmp_path / "staging")
    sink.stage([long_entry(n) for n in range(300)])
    assert sink.flush(db) == (300, 0, 0, 0)
    assert [r[0] for r in select(url, "SELECT title FROM items ORDER BY id")] == [f"item {n}" for n in range(300)]
    sink.stage([long_entry(n) for n in range(300, 310)])
    write_batch(tmp_path / "staging", ("hash", "source", "guid", "link", "title"),
                select(url, "SELECT hash, source, guid, link, title FROM items WHERE id <= 50"))  # as they were
    assert sink.flush(db) == (10, 0, 50, 0)  # the 50 already stored, in a part of their own batch file
    sink.close()


def test_a_refused_row_in_a_later_part_is_set_aside_and_the_others_stored(tmp_path, sqlite_db, monkeypatch):
    db, url = sqlite_db
    monkeypatch.setattr(batch_read, "PART_CHARS", 20_000)
    db.table("items", ("hash", *RECORD_FIELDS))
    run_sql(url, "DROP TABLE items", "CREATE TABLE items (id INTEGER PRIMARY KEY, hash VARCHAR(128) NOT NULL UNIQUE, "
            + ", ".join(f"{c} TEXT" for c in RECORD_FIELDS) + ", CHECK (title NOT LIKE 'refused%'))")
    db.tables.clear()
    db.metadata.clear()
    staging = tmp_path / "staging"
    sink = open_sink(staging)
    refused = {3, 150, 299}  # in the first part, one in the middle, the last
    sink.stage([long_entry(n, f"refused {n}" if n in refused else None) for n in range(300)])
    assert sink.flush(db) == (297, 0, 3, 0)
    titles = [r[0] for r in select(url, "SELECT title FROM items ORDER BY id")]
    assert titles == [f"item {n}" for n in range(300) if n not in refused]
    assert sorted(q["record"]["title"] for q in quarantined(staging)) == ["refused 150", "refused 299", "refused 3"]
    sink.close()


def test_bytes_not_utf8_in_a_later_part_are_stored_once_with_every_other_row(tmp_path, sqlite_db, monkeypatch):
    """The reader starts again without strict UTF-8 and skips the records it gave: none twice."""
    db, url = sqlite_db
    monkeypatch.setattr(batch_read, "PART_CHARS", 20_000)
    sink = open_sink(tmp_path / "staging")
    sink.stage([long_entry(n) for n in range(200)])
    batch = staged_batch(sink)
    data = batch.read_bytes()
    at = data.index(b"item 170")
    batch.write_bytes(data[:at] + b"item \xff" + data[at + 6:])  # "item 170" -> "item \xff70"
    assert sink.flush(db) == (200, 0, 0, 0)
    titles = [r[0] for r in select(url, "SELECT title FROM items ORDER BY id")]
    assert len(titles) == 200 and titles[:3] == ["item 0", "item 1", "item 2"]
    assert titles[170] == "item \ufffd70"  # the byte made safe as intake.decide would
    sink.close()


def test_a_flush_reads_in_parts_and_holds_about_a_part_not_the_file(tmp_path, sqlite_db, monkeypatch):
    db, url = sqlite_db
    monkeypatch.setattr(batch_read, "PART_CHARS", 256 << 10)
    sink = open_sink(tmp_path / "staging")
    for start in range(0, 2000, 500):
        sink.stage([long_entry(n) for n in range(start, start + 500)])
    size = sink.staging.path.stat().st_size
    assert size > 8 << 20
    tracemalloc.start()
    try:
        assert sink.flush(db) == (2000, 0, 0, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < size / 4, f"the flush held {peak / 2**20:.1f} MiB at its peak for a {size / 2**20:.1f} MiB file"
    assert select(url, "SELECT COUNT(*) FROM items") == [(2000,)]
    sink.close()


def test_a_part_that_fails_leaves_the_batch_for_the_next_flush_which_stores_every_row_once(tmp_path, monkeypatch):
    """Another process takes the database's write lock once the first part is committed: the batch
    stays; the next flush loads it whole, the first part's rows counted as already stored, none twice."""
    path = tmp_path / "db" / "items.db"
    url = f"sqlite:///{path}"
    db = Database(url, timeout=0.2)  # a lock waited on this long, then the flush fails as locked
    monkeypatch.setattr(batch_read, "PART_CHARS", 20_000)
    sink = open_sink(tmp_path / "staging")
    sink.stage([long_entry(n) for n in range(100)])
    parts = batch_read.read_parts
    blocker = []

    def locked_after_the_first(*args, **kwargs):  # the real parts; the lock taken between the first two
        for n, part in enumerate(parts(*args, **kwargs)):
            if n == 1 and not blocker:  # at the first flush only
                blocker.append(lock_sqlite(path))
            yield part

    monkeypatch.setattr("parser.pipeline.flusher.read_parts", locked_after_the_first)
    with pytest.raises(StorageError, match="locked"):
        sink.flush(db)
    blocker[0].execute("ROLLBACK")
    blocker[0].close()
    first_part = select(url, "SELECT COUNT(*) FROM items")[0][0]
    assert 0 < first_part < 100
    assert len(sink.staging.batches()) == 1  # the batch kept
    assert sink.flush(db) == (100 - first_part, 0, first_part, 0)
    assert [r[0] for r in select(url, "SELECT title FROM items ORDER BY id")] == [f"item {n}" for n in range(100)]
    assert not sink.staging.batches()
    sink.close()
    db.close()
