"""The flush's rule for a hash the table holds (db/upsert.py), in-process on SQLite and PostgreSQL: an
edit replaces the row and sets `changed`; a value filled where there was none (a column an upgrade added)
updates the row without calling it an edit; another source's copy of an entry never edits it; loading the
same rows twice writes nothing the second time; an older poll flushed last (another daemon of a group) never
overwrites a newer one; versions of one entry staged between two flushes go in the order they were fetched,
each kept once with "history"; a source's own mode holds for its rows alone."""
from __future__ import annotations

import pytest

from db.upsert import Updates
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


def when(value) -> str:
    """A stored time as the staged rows spell it: SQLite's text, PostgreSQL's timestamptz."""
    return value if isinstance(value, str) else value.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("stored_before", [True, False])
def test_an_older_poll_flushed_last_never_overwrites_a_newer_one(tmp_path, db, db_url, stored_before):  # noqa: F811
    """Two daemons of a group (each its own staging): A polled the score at 10:00, B at 10:05 after the
    edit; B flushes first, then A. A's older version is no edit: the row stays at B's, `changed` B's poll
    time (with no row before, B's insert is the newer version and A's the one refused)."""
    if stored_before:
        assert flush_rows(tmp_path, db, [entry(1, title="0-0", fetched="2026-11-01T09:00:00Z")]) == (1, 0, 0)
    b = flush_rows(tmp_path / "b", db, [entry(1, title="2-1 (final)", fetched="2026-11-01T10:05:00Z")])
    assert b == ((0, 1, 0) if stored_before else (1, 0, 0))
    assert flush_rows(tmp_path / "a", db, [entry(1, title="1-0", fetched="2026-11-01T10:00:00Z")]) == (0, 0, 1)
    [(title, changed)] = select(db_url, "SELECT title, changed FROM items")
    assert (title, changed and when(changed)) == ("2-1 (final)", "2026-11-01T10:05:00Z" if stored_before else None)
    # A poll after B's is an edit again.
    assert flush_rows(tmp_path / "a", db, [entry(1, title="2-1", fetched="2026-11-01T10:10:00Z")]) == (0, 1, 0)
    assert [when(c) for (c,) in select(db_url, "SELECT changed FROM items")] == ["2026-11-01T10:10:00Z"]


@pytest.mark.parametrize("staged", ["as polled", "later poll first"])
def test_history_keeps_each_version_staged_between_two_flushes_once(tmp_path, db, db_url, staged):  # noqa: F811
    """A price edited 10.00 -> 12.00 -> 15.00 between two flushes: the batch holds two versions of one
    row, applied in the order they were fetched, so each earlier version is kept once and the row is at
    the last."""
    first = entry(1, summary="10.00", fetched="2026-11-01T10:00:00Z")
    assert flush_rows(tmp_path, db, [first], updates="history") == (1, 0, 0)
    polls = [entry(1, summary="12.00", fetched="2026-11-01T11:00:00Z"),
             entry(1, summary="15.00", fetched="2026-11-01T12:00:00Z")]
    sink = open_sink(tmp_path / "staging", updates="history")
    for poll in polls if staged == "as polled" else polls[::-1]:
        sink.stage_many([Batch([poll], previous=None, updates=True)])
    assert sink.flush(db) == (0, 2, 0, 2)
    sink.close()
    assert [(s, when(c)) for s, c in select(db_url, "SELECT summary, changed FROM items")] \
        == [("15.00", "2026-11-01T12:00:00Z")]
    assert select(db_url, "SELECT summary FROM items_versions ORDER BY version") == [("10.00",), ("12.00",)]


def test_a_sources_own_mode_holds_for_its_rows_alone(tmp_path, db, db_url):  # noqa: F811
    """UPDATES "update" with a source of "ignore" and one of "history" (Settings.items_updates): the
    "ignore" source's row is never updated (a group's other daemon staging it again), the "history"
    source's earlier version is kept, the default source's is not."""
    updates = Updates("update", (("frozen", "ignore"), ("shop", "history")))
    names = ("news", "frozen", "shop")
    first = [entry(n, source=name, title="first") for n, name in enumerate(names, 1)]
    assert flush_rows(tmp_path, db, first, updates=updates) == (3, 0, 0)
    edits = [entry(n, source=name, title="edited", fetched="2026-11-09T00:00:00Z") for n, name in enumerate(names, 1)]
    assert flush_rows(tmp_path / "other", db, edits, updates=updates) == (0, 2, 1)
    assert select(db_url, "SELECT source, title FROM items ORDER BY id") \
        == [("news", "edited"), ("frozen", "first"), ("shop", "edited")]
    assert select(db_url, "SELECT source, title FROM items_versions") == [("shop", "first")]


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
