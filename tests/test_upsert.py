"""The flush's rule for a hash the table holds (db/upsert.py), in-process on SQLite and PostgreSQL: an
edit replaces the row and sets `changed`; a value filled where there was none (a column an upgrade added)
updates the row without calling it an edit; another source's copy of an entry never edits it; loading the
same rows twice writes nothing the second time."""
from __future__ import annotations

from parser.pipeline.sink import Batch
from tests.test_flush_bulk import db, db_url, open_sink, select  # noqa: F401 (fixtures)


def entry(n: int, **fields) -> dict:
    link = f"http://news.example/item/{n}"
    return {"source": "news", "guid": link, "link": link, "title": f"item {n}", "fetched": f"2026-11-0{n}T00:00:00Z",
            **fields}


def flush_rows(tmp_path, db, records, updates="update"):  # noqa: F811
    """Stage `records` as a poll whose source's digests are unknown (every stored entry staged again, the
    flush deciding), unless `updates` is "ignore"; flush; return the flush's counts."""
    sink = open_sink(tmp_path / "staging", updates=updates)
    sink.stage_many([Batch(records, previous=None, updates=updates != "ignore")])
    counts = sink.flush(db)[:3]  # versions: counted apart (test_the_versions_a_history_flush_keeps_are_counted)
    sink.close()
    return counts


def rows(db_url):  # noqa: F811
    return select(db_url, "SELECT title, summary, source, changed IS NOT NULL FROM items ORDER BY id")


def test_an_edit_sets_changed_a_filled_value_does_not_and_twice_writes_nothing(tmp_path, db, db_url):  # noqa: F811
    assert flush_rows(tmp_path, db, [entry(1), entry(2)]) == (2, 0, 0)
    assert rows(db_url) == [("item 1", None, "news", False), ("item 2", None, "news", False)]
    filled = [entry(1, summary="now with a summary", fetched="2026-11-05T00:00:00Z"), entry(2)]
    assert flush_rows(tmp_path, db, filled) == (0, 1, 1)
    assert rows(db_url)[0] == ("item 1", "now with a summary", "news", False)  # filled: no edit
    edited = [entry(1, title="item 1, edited", summary="now with a summary", fetched="2026-11-06T00:00:00Z")]
    assert flush_rows(tmp_path, db, edited) == (0, 1, 0)
    assert rows(db_url)[0] == ("item 1, edited", "now with a summary", "news", True)
    assert flush_rows(tmp_path, db, edited) == (0, 0, 1)  # the same again: nothing written


def test_another_source_sharing_an_entry_never_edits_it(tmp_path, db, db_url):  # noqa: F811
    assert flush_rows(tmp_path, db, [entry(1)]) == (1, 0, 0)
    assert flush_rows(tmp_path, db, [entry(1, source="aggregator", title="retitled")]) == (0, 0, 1)
    assert rows(db_url) == [("item 1", None, "news", False)]


def test_ignore_stores_a_hash_once_and_never_touches_it(tmp_path, db, db_url):  # noqa: F811
    assert flush_rows(tmp_path, db, [entry(1)], updates="ignore") == (1, 0, 0)
    assert flush_rows(tmp_path, db, [entry(1, title="edited")], updates="ignore") == (0, 0, 0)
    assert rows(db_url) == [("item 1", None, "news", False)]


def test_the_versions_a_history_flush_keeps_are_counted(tmp_path, db, db_url):  # noqa: F811
    """UPDATES "history": the flush counts the earlier versions it copied, which are the edits only (a value
    filled where there was none updates the row and keeps no version)."""
    def flush(records):
        sink = open_sink(tmp_path / "staging", updates="history")
        sink.stage_many([Batch(records, previous=None, updates=True)])
        try:
            return sink.flush(db)
        finally:
            sink.close()

    assert flush([entry(1), entry(2)]) == (2, 0, 0, 0)
    assert flush([entry(1, summary="now with a summary"), entry(2, title="item 2, edited")]) == (0, 2, 0, 1)
    assert select(db_url, "SELECT title FROM items_versions") == [("item 2",)]
