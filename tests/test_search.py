"""`parser-daemon search`: entries a daemon stored from loopback feeds, found as a user asks for them, on SQLite
and PostgreSQL; the index follows edits and deletes; SEARCH = False leaves no index and the command says so."""
from __future__ import annotations

import json
import sqlite3
from datetime import timedelta

import pytest
import sqlalchemy as sa

from tests.conftest import Project
from tests.feeds import BASE_TIME, rss

GERMAN = [
    {"title": "Die Häuser am Hafen", "link": "http://example.com/de/1", "date": BASE_TIME + timedelta(hours=1),
     "description": "Neue Wohnungen entstehen am Wasser"},
    {"title": "Der Zug fährt ab", "link": "http://example.com/de/2", "date": BASE_TIME + timedelta(hours=2),
     "description": "Der Bahnhof wird erneuert"},
]
ENGLISH = [
    {"title": "Houses by the harbour", "link": "http://example.com/en/1", "date": BASE_TIME + timedelta(hours=3),
     "description": "New flats are built by the water"},
    {"title": "Trains leave the station", "link": "http://example.com/en/2", "date": BASE_TIME,
     "description": "The station near the harbour is rebuilt"},
]


def feed(items: list[dict], language: str) -> bytes:
    return rss(items).replace(b"<channel>", f"<channel><language>{language}</language>".encode(), 1)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request) -> str:
    if request.param == "sqlite":
        return "sqlite:///db/items.db"
    return request.getfixturevalue("pg_url")


def stored(server, project: Project, db_url: str, **params) -> None:
    """The two feeds, polled and flushed by the daemon itself (--once), with SEARCH on unless said."""
    params.setdefault("SEARCH", True)
    server.route("/de.xml", body=feed(GERMAN, "de-DE"))
    server.route("/en.xml", body=feed(ENGLISH, "en-gb"))
    project.write_params(DB_URL=db_url, SOURCES=[{"name": "hafen", "url": server.url("/de.xml")},
                                                 {"name": "port", "url": server.url("/en.xml")}], **params)
    project.run("--once", check=True)


def found(project: Project, *words: str) -> list[dict]:
    proc = project.run("search", "--format", "jsonl", *words)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def titles(project: Project, *words: str) -> list[str]:
    return [row["title"] for row in found(project, *words)]


def execute(db_url: str, project: Project, statement: str) -> None:
    url = f"sqlite:///{project.db_path}" if db_url.startswith("sqlite") else db_url
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(statement))
    engine.dispose()


def index_objects(db_url: str, project: Project) -> list[str]:
    if db_url.startswith("sqlite"):
        with sqlite3.connect(project.db_path) as con:
            return [name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE name LIKE 'items_search%'")]
    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        names = list(conn.execute(sa.text("SELECT relname FROM pg_class WHERE relname LIKE 'items_search%'")).scalars())
    engine.dispose()
    return names


def test_search_finds_the_stored_entries_best_first(server, project, db_url):
    stored(server, project, db_url)
    # A German entry is read as German: Haus finds Häuser (PostgreSQL's german stemmer; SQLite: a prefix
    # without accents), and not the English house, which no language stems to haus.
    rows = found(project, "Haus")
    assert [row["title"] for row in rows] == ["Die Häuser am Hafen"]
    assert rows[0] == {"source": "hafen", "title": "Die Häuser am Hafen", "link": "http://example.com/de/1",
                       "published": "2026-11-01T13:00:00Z", "snippet": "Neue Wohnungen entstehen am Wasser"}
    assert titles(project, "Zug") == ["Der Zug fährt ab"]
    # English stemmed: stations finds station; a word in the title ranks above one in the summary.
    assert titles(project, "stations") == ["Trains leave the station"]
    assert titles(project, "harbour") == ["Houses by the harbour", "Trains leave the station"]
    assert titles(project, "harbour -flats") == ["Trains leave the station"]
    assert titles(project, '"leave the station"') == ["Trains leave the station"]
    assert titles(project, "hafen or harbour", "--source", "hafen") == ["Die Häuser am Hafen"]
    assert titles(project, "harbour", "--since", "2026-11-01T14:30:00Z") == ["Houses by the harbour"]
    limited = project.run("search", "harbour", "--limit", "1", "--format", "jsonl")
    assert limited.returncode == 0 and len(limited.stdout.splitlines()) == 1
    assert "--limit for more" in limited.stderr
    text = project.run("search", "station")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == ["2026-11-01T12:00:00Z  port  Trains leave the station",
                                        "    http://example.com/en/2",
                                        "    The station near the harbour is rebuilt"]
    assert text.stderr == "1 found\n"
    nothing = project.run("search", "zeppelin")
    assert (nothing.returncode, nothing.stdout, nothing.stderr) == (0, "", "0 found\n")


def test_an_edit_at_the_source_and_a_delete_change_what_is_found(server, project, db_url):
    stored(server, project, db_url, UPDATES="history")
    edited = [{**ENGLISH[0], "title": "Flats by the quay"}, ENGLISH[1]]
    server.route("/en.xml", body=feed(edited, "en-gb"))
    project.run("--once", check=True)
    # The index is no record field: the earlier version is kept without it, and export does not show it.
    versions = [json.loads(line) for line in project.run("export", "--table", "items_versions").stdout.splitlines()]
    assert [row["title"] for row in versions] == ["Houses by the harbour"] and "search" not in versions[0]
    exported = [json.loads(line) for line in project.run("export").stdout.splitlines()]
    assert len(exported) == 4 and "search" not in exported[0]
    assert titles(project, "quay") == ["Flats by the quay"]
    assert titles(project, "harbour") == ["Trains leave the station"]  # the old title is no longer found
    execute(db_url, project, "DELETE FROM items WHERE link = 'http://example.com/en/2'")
    assert titles(project, "harbour") == []
    assert titles(project, "flats") == ["Flats by the quay"]


def test_search_off_leaves_no_index_and_a_later_start_builds_it_from_the_rows(server, project, db_url):
    stored(server, project, db_url, SEARCH=False)
    assert index_objects(db_url, project) == []
    off = project.run("search", "Haus")
    assert off.returncode == 2 and off.stdout == ""
    assert off.stderr.startswith("error: search is off (SEARCH = False in params.py)"), off.stderr
    # SEARCH = True on a database that holds rows and no index (as 0.6.0 left it): the start builds it.
    stored(server, project, db_url)
    assert index_objects(db_url, project)
    assert titles(project, "Haus") == ["Die Häuser am Hafen"]
    # Made over the 4 rows stored before it: each of them found through it.
    assert {title for word in ("Haus", "Zug", "harbour") for title in titles(project, word)} == \
        {item["title"] for item in GERMAN + ENGLISH}
    stored(server, project, db_url, SEARCH=False)  # turned off again: dropped
    assert index_objects(db_url, project) == []


def test_a_database_without_the_index_is_exit_1_and_bad_arguments_exit_2(server, project):
    project.write_params(SEARCH=True)
    unbuilt = project.run("search", "Haus")
    assert unbuilt.returncode == 1 and "no database" in unbuilt.stderr
    stored(server, project, "sqlite:///db/items.db")
    execute("sqlite", project, "DROP TABLE items_search")
    unbuilt = project.run("search", "Haus")
    assert unbuilt.returncode == 1 and "start the daemon once" in unbuilt.stderr, unbuilt.stderr
    for args, said in ((["--", "-haus"], "nothing to look for"), (["Haus", "--limit", "0"], "--limit"),
                       (["Haus", "--since", "soon"], "is no time")):
        bad = project.run("search", *args)
        assert bad.returncode == 2 and said in bad.stderr, (args, bad.stderr)


def test_search_is_off_unless_asked_for(project):
    project.write_params()
    proc = project.run("search", "Haus")
    assert proc.returncode == 2 and proc.stderr.startswith("error: search is off"), proc.stderr


def test_search_must_be_true_or_false(project):
    project.write_params(SEARCH="yes")
    proc = project.run("check")
    assert proc.returncode == 2
    assert "SEARCH: must be True or False, got 'yes'" in proc.stderr
