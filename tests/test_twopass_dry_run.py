"""--dry-run with two-pass jobs: both passes run in memory, the records that would be staged are printed
as JSON lines, at most 20 objects a job are fetched, and nothing at all is written (no link file,
status file, harvest log, staging, database or log)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.feeds import numbered_items, rss
from tests.shop import HARVEST_FIELDS, Shop


@pytest.fixture
def shop(server) -> Shop:
    return Shop(server)


def harvest_job(server) -> dict:
    return {"name": "shop", "objects": r"/item/\d+$", "fields": HARVEST_FIELDS,
            "harvest": {"root": server.url("/"), "follow": r"/(list|calendar)/", "depth": 3}}


def printed(proc) -> tuple[list[dict], list[str]]:
    """(records, comment lines) from a dry run's output: the records on stdout, the comments on stderr."""
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return records, [line for line in proc.stderr.splitlines() if line.startswith("#")]


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under folder with a digest of its bytes: any write shows."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_dry_run_runs_both_passes_in_memory_prints_the_records_and_writes_nothing(server, shop, project):
    server.route("/feed.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "feed", "url": server.url("/feed.xml")}], LINK_JOBS=[harvest_job(server)])
    proc = project.run("--dry-run")
    assert proc.returncode == 0, proc.stderr

    records, comments = printed(proc)
    objects = {r["url"].replace(server.url(""), ""): r for r in records if "url" in r}
    assert set(objects) == {f"/item/{n}" for n in range(1, 9)}
    assert objects["/item/5"]["name"] == "Item 5" and objects["/item/5"]["price"] == "5.99"
    assert [r["title"] for r in records if "title" in r] == ["Item 2", "Item 1"]  # the feed, as before
    assert "# shop: pass 1 (harvest): 5 pages fetched (0 failed), 9 links, 9 new" in comments
    assert f"# shop: {server.url('/item/404')}: HTTP 404 Not Found" in comments
    assert "# shop: 9 links fetched: 8 records, 8 new would be staged, 1 failed" in comments
    assert shop.item_hits() == {f"/item/{n}": 1 for n in [*range(1, 9), 404]}
    assert not project.staging.exists() and not project.logs.exists() and not project.db_path.exists()
    assert list(project.folder.iterdir()) == [project.params]


def test_after_a_real_run_the_dry_run_shows_only_what_is_new_and_touches_no_file(server, shop, project):
    project.write_params(LINK_JOBS=[harvest_job(server)])
    project.run("--once", check=True)
    shop.add_item(9, on_list=2)
    status = project.staging / "jobs" / "shop" / "links.status"
    with open(status, "a", encoding="utf-8") as f:
        f.write("2026-01-01T00:00:00Z\tdone\t1\thttp://torn")  # a torn last line: a real run would cut it
    before = snapshot(project.folder)
    hits = dict(shop.item_hits())

    proc = project.run("--dry-run")
    assert proc.returncode == 0, proc.stderr
    records, comments = printed(proc)
    assert [r["url"] for r in records] == [server.url("/item/9")]
    assert "# shop: pass 1 (harvest): 5 pages fetched (0 failed), 10 links, 1 new" in comments
    assert shop.item_hits() == {**hits, "/item/9": 1}  # only the pending link: no object fetched twice
    assert snapshot(project.folder) == before


def test_dry_run_fetches_at_most_20_objects_a_job_and_says_so(server, project):
    Shop(server, items_per_list=30, lists=1)
    project.write_params(LINK_JOBS=[{"name": "pages", "template": server.url("/item/{id}"),
                                     "values": {"id": {"from": 1, "to": 5_000_000}}, "fields": HARVEST_FIELDS}])
    proc = project.run("--dry-run")
    assert proc.returncode == 0, proc.stderr
    records, comments = printed(proc)
    assert sorted(r["url"] for r in records) == sorted(server.url(f"/item/{n}") for n in range(1, 21))
    assert "# pages: more than 20 links pending: the dry run fetches the first 20 and stops there" in comments
    assert "# pages: pass 1 (template): 21 links, 21 new (expanded only as far as 21 links pending)" in comments
    assert sum(1 for p in server.hits if p.startswith("/item/")) == 20
    assert list(project.folder.iterdir()) == [project.params]


def test_a_dry_run_of_feeds_and_a_job_after_real_runs_changes_no_file_and_prints_only_what_is_new(server, project):
    """The project folder (staging, logs, database, the job's link file and state) listed with each file's
    bytes and modification time before and after a --dry-run: the same. A failing feed is a comment line
    among the records, as the job's failed links are, and no errors.log line on the console."""
    shop = Shop(server, items_per_list=4, lists=1)
    server.route("/feed.xml", body=rss(numbered_items(1, 2)))
    server.route("/bad.xml", status=500, body=b"down")
    project.write_params(SOURCES=[{"name": "feed", "url": server.url("/feed.xml")},
                                  {"name": "bad", "url": server.url("/bad.xml")}],
                         LINK_JOBS=[{"name": "pages", "template": server.url("/item/{id}"),
                                     "values": {"id": {"from": 1, "to": 5}}, "fields": HARVEST_FIELDS}])
    project.run("--once")  # 'bad' fails: its error goes to errors.log
    assert len(project.rows()) == 2 and len(project.rows("pages")) == 4
    server.route("/feed.xml", body=rss(numbered_items(1, 3)))
    project.write_params(SOURCES=[{"name": "feed", "url": server.url("/feed.xml")},
                                  {"name": "bad", "url": server.url("/bad.xml")}],
                         LINK_JOBS=[{"name": "pages", "template": server.url("/item/{id}"),
                                     "values": {"id": {"from": 1, "to": 6}}, "fields": HARVEST_FIELDS}])
    shop.add_item(6)

    def listing() -> dict[str, tuple[str, int]]:
        return {str(p.relative_to(project.folder)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
                for p in sorted(project.folder.rglob("*")) if p.is_file()}

    before = listing()
    assert any(name.startswith("db/") for name in before) and "staging/jobs/pages/links.txt" in before
    proc = project.run("--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert listing() == before

    records, comments = printed(proc)
    assert sorted(r.get("title") or r.get("url") for r in records) == ["Item 3", server.url("/item/6")]
    assert "# feed: 3 records, 1 new would be staged" in comments
    assert "# bad: error: HTTP 500 Internal Server Error" in comments
    assert f"# pages: {server.url('/item/5')}: HTTP 404 Not Found" not in comments  # gone for good: not asked
    assert "# pages: pass 1 (template): 6 links, 1 new" in comments
    said = [line for line in proc.stderr.splitlines() if not line.startswith("#")]
    assert not [line for line in said if "bad" in line or "500" in line]
    assert len(project.rows()) == 2 and len(project.rows("pages")) == 4
