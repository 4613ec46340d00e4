"""An entry edited at its source updates its stored row (UPDATES, issue 26 point 5): through the real
daemon, on loopback, into SQLite and PostgreSQL. Identity and the hash file are unchanged by an edit; an
unchanged feed stages nothing again; "history" keeps the earlier version; "ignore" is 0.5's rule."""
from __future__ import annotations

import json
import sqlite3

import pytest

from tests.feeds import numbered_items, rss


def edited(items: list[dict], n: int, **changes) -> list[dict]:
    return [{**item, **changes} if item["link"].endswith(f"/item/{n}") else item for item in items]


def by_link(rows: list[dict]) -> dict[str, dict]:
    return {row["link"]: row for row in rows}


def staged_rows(project) -> int:
    path = project.staging / "staging.csv"
    return max(len(path.read_text(encoding="utf-8").splitlines()) - 1, 0) if path.exists() else 0


def test_an_edited_entry_updates_its_row_and_sets_changed_across_once_runs(server, project):
    items = numbered_items(1, 3)
    server.route("/feed.xml", body=rss(items))
    project.write_params(SOURCES=[{"name": "blog", "url": server.url("/feed.xml")}])
    project.run("--once", check=True)
    first = by_link(project.rows())
    assert len(first) == 3 and all(row["changed"] is None for row in first.values())

    server.route("/feed.xml", body=rss(edited(items, 2, title="Item 2, corrected", description="Now longer")))
    project.run("--once", check=True)
    rows = project.rows()
    assert len(rows) == 3  # updated in place, not stored twice
    row = by_link(rows)["http://example.com/item/2"]
    assert row["title"] == "Item 2, corrected" and row["summary"] == "Now longer"
    assert row["changed"] is not None and row["changed"] >= row["fetched"]  # whole seconds: may be one
    assert row["id"] == first["http://example.com/item/2"]["id"] and row["hash"] == first[row["link"]]["hash"]
    assert [r["changed"] for r in rows if r["link"] != row["link"]] == [None, None]
    assert project.polls("blog")[-1] == (3, 0, 1)  # entries, new, changed

    project.run("--once", check=True)  # nothing changed since: nothing staged, nothing updated
    assert project.polls("blog")[-1] == (3, 0, 0)
    assert project.rows() == rows


def test_a_dry_run_shows_an_edit_as_the_update_the_next_poll_stages(server, project):
    items = numbered_items(1, 3)
    server.route("/feed.xml", body=rss(items))
    server.route("/other.xml", body=rss(numbered_items(1, 2, host="other.example")))
    project.write_params(SOURCES=[{"name": "blog", "url": server.url("/feed.xml")},
                                  {"name": "other", "url": server.url("/other.xml")}])
    project.run("--once", check=True)
    files = {p.name: p.read_bytes() for p in project.staging.iterdir() if p.is_file()}

    server.route("/feed.xml", body=rss(edited(items, 2, title="Item 2, corrected")))
    dry = project.run("--dry-run", "--source", "blog")
    assert dry.returncode == 0, dry.stderr
    printed = [json.loads(line) for line in dry.stdout.splitlines()]
    assert [(r["@table"], r.get("@update"), r["title"]) for r in printed] == [("items", True, "Item 2, corrected")]
    assert "# blog: 3 records, 0 new would be staged, 1 as updates of stored rows (1 changed since the last " \
           "poll)" in dry.stderr
    assert {p.name: p.read_bytes() for p in project.staging.iterdir() if p.is_file()} == files  # nothing written

    project.run("--once", "--source", "blog", check=True)  # what the dry run showed is what is stored
    assert project.polls("blog")[-1] == (3, 0, 1)
    assert by_link(project.rows())["http://example.com/item/2"]["title"] == "Item 2, corrected"
    assert project.run("--dry-run", "--source", "blog").stdout == ""  # stored now: nothing more to show


def test_an_unchanged_feed_stages_nothing_again_and_a_lost_digest_file_changes_no_row(server, project):
    items = numbered_items(1, 5)
    server.route("/feed.xml", body=rss(items))
    project.write_params(SOURCES=[{"name": "blog", "url": server.url("/feed.xml")}], FLUSH_INTERVAL=3600)
    project.run("--once", check=True)
    assert (project.staging / "known.tsv").exists()
    before = project.rows()
    project.run("--once", check=True)
    assert project.polls("blog")[-1] == (5, 0, 0)  # read, nothing staged: nothing left for the flush to refuse
    assert (project.last_flush()["rows"], project.last_flush()["already"]) == (0, 0)
    (project.staging / "known.tsv").unlink()  # lost: every stored entry is checked once, no row changes
    project.run("--once", check=True)
    assert (project.last_flush()["rows"], project.last_flush()["already"]) == (0, 5)
    assert project.rows() == before


@pytest.mark.parametrize("mode", ["history", "ignore"])
def test_history_keeps_each_earlier_version_and_ignore_keeps_the_first(server, project, mode):
    items = numbered_items(1, 2)
    server.route("/feed.xml", body=rss(items))
    project.write_params(SOURCES=[{"name": "shop", "url": server.url("/feed.xml")}], UPDATES=mode)
    project.run("--once", check=True)
    for price in ("Price 10", "Price 12"):
        server.route("/feed.xml", body=rss(edited(items, 1, description=price)))
        project.run("--once", check=True)
    row = by_link(project.rows())["http://example.com/item/1"]
    if mode == "ignore":
        assert row["summary"] == "Body of item 1" and row["changed"] is None
        assert project.rows("items_versions") == []
        return
    assert row["summary"] == "Price 12"
    versions = project.rows("items_versions")
    assert [v["summary"] for v in versions] == ["Body of item 1", "Price 10"]
    assert all(v["hash"] == row["hash"] and v["replaced"] for v in versions)


def test_a_source_may_ignore_updates_while_the_others_take_them(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 1, host="a.example")))
    server.route("/b.xml", body=rss(numbered_items(1, 1, host="b.example")))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml"), "updates": "ignore"},
                                  {"name": "b", "url": server.url("/b.xml")}])
    project.run("--once", check=True)
    server.route("/a.xml", body=rss([{**numbered_items(1, 1, host="a.example")[0], "title": "A edited"}]))
    server.route("/b.xml", body=rss([{**numbered_items(1, 1, host="b.example")[0], "title": "B edited"}]))
    project.run("--once", check=True)
    assert sorted(row["title"] for row in project.rows()) == ["B edited", "Item 1"]


def test_a_bad_updates_setting_is_refused_naming_it(project):
    project.write_params(UPDATES="sometimes", SOURCES=[{"name": "x", "url": "http://127.0.0.1:9/f", "updates": 3}])
    failed = project.run("check")
    assert failed.returncode == 2
    assert "UPDATES: must be one of 'update', 'history', 'ignore'" in failed.stderr + failed.stdout
    assert "updates must be one of" in failed.stderr + failed.stdout


@pytest.mark.postgres
def test_postgresql_updates_in_place_with_changed_as_a_time(server, project, pg_url):
    import psycopg
    items = numbered_items(1, 3)
    server.route("/feed.xml", body=rss(items))
    project.write_params(SOURCES=[{"name": "blog", "url": server.url("/feed.xml")}], DB_URL=pg_url, UPDATES="history")
    project.run("--once", check=True)
    server.route("/feed.xml", body=rss(edited(items, 3, title="Item 3, corrected")))
    project.run("--once", check=True)
    with psycopg.connect(pg_url) as con:
        rows = con.execute("SELECT title, changed, changed >= fetched FROM items ORDER BY id").fetchall()
        versions = con.execute("SELECT title FROM items_versions").fetchall()
    assert [r[0] for r in rows] == ["Item 3, corrected", "Item 2", "Item 1"]
    assert rows[0][1] is not None and rows[0][2] is True and rows[1][1] is None
    assert versions == [("Item 3",)]


def test_a_kill_between_staging_and_flush_applies_the_update_once(server, project):
    """The update is staged durably before the digest is kept: a run that dies after staging leaves the
    edit in the staging CSV, and the next run's flush applies it (and no second row)."""
    items = numbered_items(1, 2)
    server.route("/feed.xml", body=rss(items))
    project.write_params(SOURCES=[{"name": "blog", "url": server.url("/feed.xml")}])
    project.run("--once", check=True)
    server.route("/feed.xml", body=rss(edited(items, 1, title="Edited")))
    # Stage without flushing: a database that refuses writes keeps the edit staged (the flush fails).
    con = sqlite3.connect(project.db_path)
    con.execute("CREATE TRIGGER hold BEFORE UPDATE ON items BEGIN SELECT RAISE(ABORT, 'paused'); END")
    con.commit()
    con.close()
    project.run("--once")
    assert staged_rows(project) + sum(1 for p in project.staging.glob("staging.flushing-*.csv")) >= 1
    con = sqlite3.connect(project.db_path)
    con.execute("DROP TRIGGER hold")
    con.commit()
    con.close()
    project.run("--once", check=True)
    rows = project.rows()
    assert len(rows) == 2 and by_link(rows)["http://example.com/item/1"]["title"] == "Edited"
    assert json.loads(json.dumps(rows))  # plain values a user's script reads


def test_a_new_projects_feeds_sharing_entries_stage_each_entry_once(server, project):
    """Nothing was stored before this run: an entry the first feed stored is no edit when the second
    feed shows it (it was staged again as one, once per feed: 4.4 times the rows of a first poll)."""
    items = numbered_items(1, 4)
    server.route("/a.xml", body=rss(items))
    server.route("/b.xml", body=rss(items), delay=1.0)  # back after a's entries are staged (another turn)
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")},
                                  {"name": "b", "url": server.url("/b.xml")}])
    project.run("--once", check=True)
    assert (project.last_flush()["rows"], project.last_flush()["already"]) == (4, 0)
    assert len(project.rows()) == 4


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_history_is_kept_for_the_source_that_asks_for_it_alone(server, project, request, database):
    """A source's own `updates` is its own: "history" on one source keeps that source's earlier versions,
    and the other sources' edits update their rows with none kept (UPDATES "update")."""
    names = ("shop", "news", "blog")
    for name in names:
        server.route(f"/{name}.xml", body=rss(numbered_items(1, 1, host=f"{name}.example")))
    db_url = request.getfixturevalue("pg_url") if database == "postgresql" else "sqlite:///db/items.db"
    project.write_params(DB_URL=db_url, SOURCES=[{"name": name, "url": server.url(f"/{name}.xml"),
                                                  **({"updates": "history"} if name == "shop" else {})}
                                                 for name in names])
    project.run("--once", check=True)
    for name in names:
        server.route(f"/{name}.xml", body=rss([{**numbered_items(1, 1, host=f"{name}.example")[0],
                                                "title": f"{name} edited"}]))
    project.run("--once", check=True)
    query = ("SELECT source, title FROM items ORDER BY source", "SELECT source, title FROM items_versions")
    if database == "postgresql":
        import psycopg
        with psycopg.connect(db_url) as con:
            items, versions = (con.execute(q).fetchall() for q in query)
    else:
        con = sqlite3.connect(project.db_path)
        items, versions = (con.execute(q).fetchall() for q in query)
        con.close()
    assert items == [("blog", "blog edited"), ("news", "news edited"), ("shop", "shop edited")]
    assert versions == [("shop", "Item 1")]
