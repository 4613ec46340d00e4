"""Identity that changes underneath a project (issue 18 cases 3, 8, 9): links that differ only by a
parameter that names the entry (`ref`, PHP-Nuke's `sid`) stay apart; a changed UNIQUE_FIELDS or HASH
is refused at start, naming the old and new value; a hash file brought to a database that does not
hold what was flushed from it is refused at start, saying what to do. Nothing is stored twice or
dropped without a word."""
from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

from db.store import Database
from parser.core import logs
from parser.core.errors import SettingsError
from parser.core.record import RECORD_FIELDS
from parser.jobs.job_files import job_unique_rule
from parser.pipeline.sink import Sink, SinkFiles, UniqueRule
from tests.feeds import numbered_items, rss


def one_item(link: str, title: str) -> bytes:
    """A feed that shows one item at a time, as deal-of-the-day feeds and `max_items: 1` do."""
    return rss([{"title": title, "link": link}])


def sink(folder: Path, *, algorithm: str = "sha224", unique_fields="auto") -> Sink:
    return Sink(table="items", columns=RECORD_FIELDS, unique=UniqueRule(unique_fields, "hashfile", algorithm),
                files=SinkFiles(folder))


def records(links: list[str], source: str = "s") -> list[dict]:
    return [{"source": source, "link": link, "guid": link, "title": link} for link in links]


def move_hashes_away(staging: Path, to: Path) -> None:
    """What the messages tell an operator to do: staging/hashes.* moved away."""
    to.mkdir()
    for path in staging.glob("hashes.*"):
        shutil.move(path, to / path.name)


# -- case 3: a parameter that can name the entry is part of its identity ------------------------------

def test_links_that_differ_only_by_ref_or_sid_are_different_entries(server, project):
    server.route("/deals.xml", body=one_item("https://shop.example/deal.php?ref=17&utm_source=rss", "Deal 17"))
    server.route("/nuke.xml", body=one_item("http://nuke.example/modules.php?name=News&file=article&sid=123",
                                            "Story 123"))
    # Two sources whose links share host and path, told apart by sid alone.
    server.route("/other.xml", body=one_item("http://nuke.example/modules.php?name=News&file=article&sid=7",
                                             "Story 7"))
    project.write_params(SOURCES=[{"name": "deals", "url": server.url("/deals.xml")},
                                  {"name": "nuke", "url": server.url("/nuke.xml"), "max_items": 1},
                                  {"name": "other", "url": server.url("/other.xml")}])
    project.run("--once", check=True)
    server.route("/deals.xml", body=one_item("https://shop.example/deal.php?ref=18&utm_source=rss", "Deal 18"))
    server.route("/nuke.xml", body=one_item("http://nuke.example/modules.php?name=News&file=article&sid=124",
                                            "Story 124"))
    project.run("--once", check=True)
    stored = {r["title"]: r["link"] for r in project.rows()}
    # Stored with the parameter that names them; the tracking parameter is still dropped.
    assert stored == {
        "Deal 17": "https://shop.example/deal.php?ref=17", "Deal 18": "https://shop.example/deal.php?ref=18",
        "Story 123": "http://nuke.example/modules.php?file=article&name=News&sid=123",
        "Story 124": "http://nuke.example/modules.php?file=article&name=News&sid=124",
        "Story 7": "http://nuke.example/modules.php?file=article&name=News&sid=7"}
    assert project.polls("deals").count((1, 1, 0)) == 2 and project.polls("nuke").count((1, 1, 0)) == 2


# -- case 9: hashes taken by another identity rule ----------------------------------------------------

def test_a_changed_unique_fields_is_refused_at_start_naming_old_and_new_value(server, project, tmp_path):
    server.route("/feed.xml", body=rss([{**item, "guid": f"g-{i}"} for i, item in enumerate(numbered_items(1, 10))]))
    project.write_params(SOURCES=[{"name": "feed", "url": server.url("/feed.xml")}])
    project.run("--once", check=True)
    assert len(project.rows()) == 10

    project.write_params(SOURCES=[{"name": "feed", "url": server.url("/feed.xml")}], UNIQUE_FIELDS=["guid"])
    refused = project.run("--once")
    assert refused.returncode == 2, refused.stderr
    critical = project.log("critical.log")
    assert "UNIQUE_FIELDS was 'auto' and is now ['guid']" in critical
    assert "Set UNIQUE_FIELDS back to 'auto'" in critical and f"move {project.staging}/hashes.* away" in critical
    assert "Traceback" not in critical and "UNIQUE_FIELDS was 'auto'" in refused.stderr
    assert len(project.rows()) == 10  # nothing stored twice

    # The documented way out: a new history under the new rule (each entry then stored once more).
    move_hashes_away(project.staging, tmp_path / "old-hashes")
    project.run("--once", check=True)
    assert len(project.rows()) == 20
    project.run("--once", check=True)
    assert len(project.rows()) == 20 and project.polls("feed")[-1] == (10, 0, 0)


def test_a_changed_hash_of_the_same_width_is_refused(tmp_path):
    # sha256 and sha3_256 both give 64 hex digits: the hash file's width cannot tell them apart.
    first = sink(tmp_path, algorithm="sha256")
    first.stage(records(["http://example.com/a"]))
    first.close()
    with pytest.raises(SettingsError, match=r"HASH was 'sha256' and is now 'sha3_256'.*Set HASH back to 'sha256'"):
        sink(tmp_path, algorithm="sha3_256")
    again = sink(tmp_path, algorithm="sha256")  # set back: the history goes on
    assert again.stage(records(["http://example.com/a"])).duplicates == 1
    again.close()


def test_a_jobs_changed_unique_fields_is_refused_naming_the_job(tmp_path):
    settings = SimpleNamespace(dedup="hashfile", hash="sha224", unique_window=None)

    def job_sink(unique_fields: tuple[str, ...]) -> Sink:  # as a job's files open it (parser/jobs/job_files.py)
        return Sink(table="books", columns=["url", "fetched", "title"], files=SinkFiles(tmp_path),
                    unique=job_unique_rule("books", unique_fields, settings))

    first = job_sink(("url",))
    first.stage([{"url": "http://shop.example/book/1", "title": "One"}])
    first.close()
    with pytest.raises(SettingsError, match=r"unique_fields of job 'books' \(LINK_JOBS\) was \['url'\] and is "
                                            r"now \['url', 'title'\]"):
        job_sink(("url", "title"))


def test_a_project_from_before_the_rule_was_recorded_adopts_it_and_is_told_what_changed(tmp_path):
    first = sink(tmp_path)
    first.stage(records(["http://example.com/a"]))
    first.close()
    (tmp_path / "hashes.json").unlink(missing_ok=True)  # as a version before it left the folder
    logs.setup(tmp_path / "logs", console=False)
    try:
        again = sink(tmp_path)
        again.close()
    finally:
        logs.setup(None, console=False)
    # Nothing to do: an INFO line in parser.log, and errors.log (where a failure goes) holds nothing.
    errors = tmp_path / "logs" / "errors.log"
    assert not errors.exists() or errors.read_text() == ""
    said = (tmp_path / "logs" / "parser.log").read_text()
    assert "identity rules 2 taken over from 1 (said once; nothing to do): links keep their ref, sid, referrer " \
           "and spm parameters" in said
    recorded = json.loads((tmp_path / "hashes.json").read_text())  # the rule recorded again, as the start found it
    assert (recorded["hash"], recorded["unique_fields"]) == ("sha224", "auto"), recorded
    assert '"unique_fields": "auto"' in (tmp_path / "hashes.json").read_text()


# -- case 8: a hash file brought to a database that lacks what was flushed from it -------------------

@pytest.mark.parametrize("first", ["sqlite", "postgresql"])
def test_a_project_pointed_at_a_database_without_its_rows_is_refused_saying_what_to_do(server, project, tmp_path,
                                                                                       request, first):
    server.route("/feed.xml", body=rss(numbered_items(1, 10)))
    sources = [{"name": "feed", "url": server.url("/feed.xml")}]
    stored_in = request.getfixturevalue("pg_url") if first == "postgresql" else "sqlite:///db/items.db"
    project.write_params(SOURCES=sources, DB_URL=stored_in)
    project.run("--once", check=True)

    project.write_params(SOURCES=sources, DB_URL="sqlite:///db/copy.db")  # a copy of the project, a new database
    refused = project.run("--once")
    assert refused.returncode == 2, refused.stderr
    critical = project.log("critical.log")
    assert "says its records were flushed into table items of" in critical
    assert "does not hold them" in critical and "the 10 entries it holds would count as stored" in critical
    assert f"move {project.staging}/hashes.* away" in critical and "set it back" in critical
    assert server.hits["/feed.xml"] == 1  # refused before polling: nothing dropped as a duplicate

    project.write_params(SOURCES=sources, DB_URL=stored_in)  # pointed back: it goes on
    project.run("--once", check=True)
    assert project.polls("feed", stored_in) == [(10, 10, 0), (10, 0, 0)]

    project.write_params(SOURCES=sources, DB_URL="sqlite:///db/copy.db")
    move_hashes_away(project.staging, tmp_path / "old-hashes")  # the other way out: everything stored again
    project.run("--once", check=True)
    project.db_path = project.folder / "db" / "copy.db"
    assert len(project.rows()) == 10


def test_a_database_restored_from_a_backup_older_than_the_last_flush_is_noticed(tmp_path):
    folder, db_file = tmp_path / "staging", tmp_path / "items.db"
    db = Database(f"sqlite:///{db_file}")
    first = sink(folder)
    first.stage(records(["http://example.com/1", "http://example.com/2"]))
    first.flush(db)
    db.close()
    shutil.copy(db_file, tmp_path / "backup.db")
    db = Database(f"sqlite:///{db_file}")
    first.stage(records([f"http://example.com/{n}" for n in range(3, 30)]))
    first.flush(db)
    first.close()
    db.close()
    shutil.copy(tmp_path / "backup.db", db_file)  # restored: the rows of the second flush are gone

    db = Database(f"sqlite:///{db_file}")
    restarted = sink(folder)
    with pytest.raises(SettingsError, match="does not hold them"):
        restarted.history.check_database(db, "items")
    restarted.close()
    db.close()


def test_some_of_the_newest_rows_deleted_are_said_once_with_the_way_to_store_them_again(server, project, tmp_path):
    server.route("/feed.xml", body=rss(numbered_items(1, 12)))
    project.write_params(SOURCES=[{"name": "feed", "url": server.url("/feed.xml")}])
    project.run("--once", check=True)
    deleted = {row["link"] for row in project.rows()[-8:][::2]} | {project.rows()[-1]["link"]}  # 5 of the 8 newest
    with sqlite3.connect(project.db_path) as con:
        con.executemany("DELETE FROM items WHERE link = ?", [(link,) for link in deleted])
    assert len(deleted) == 5 and len(project.rows()) == 7

    for _ in range(2):  # no refusal; said at the first start after the deletion, not again
        project.run("--once", check=True)
    said = [line for line in project.log().splitlines() if "newest rows flushed from" in line]
    assert len(said) == 1, said
    assert "table items: 5 of the 8 newest rows flushed from hashes.txt are gone from it" in said[0]
    assert f"move {project.staging}/hashes.* away" in said[0]
    assert len(project.rows()) == 7  # they stay out: the hashes remember them

    move_hashes_away(project.staging, tmp_path / "old-hashes")  # the way the line gives: they are stored again
    project.run("--once", check=True)
    assert {row["link"] for row in project.rows()} >= deleted and len(project.rows()) == 12
