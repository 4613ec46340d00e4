"""The two-pass technique end to end: run_daemon.py against sites on 127.0.0.1, then read the tables,
the link files and the logs, as a user would."""
from __future__ import annotations

import os
import re
import signal
import sqlite3
import time
from pathlib import Path
from urllib.parse import urljoin

import pytest

from tests.conftest import corpus_dir, link_statuses
from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for
from tests.shop import HARVEST_FIELDS, Shop

OBJECTS = r"/item/\d+$"


@pytest.fixture
def shop(server) -> Shop:
    return Shop(server)


def harvest_job(server, name: str = "shop", **harvest) -> dict:
    return {"name": name, "harvest": {"root": server.url("/"), "follow": r"/(list|calendar)/", "depth": 3, **harvest},
            "objects": OBJECTS, "fields": HARVEST_FIELDS}


def template_job(server, name: str = "pages", values=None, **extra) -> dict:
    return {"name": name, "template": server.url("/item/{id}"), "values": {"id": values or {"from": 1, "to": 10}},
            "fields": HARVEST_FIELDS, **extra}


def by_url(rows: list[dict], server) -> dict[str, dict]:
    return {r["url"].replace(server.url(""), ""): r for r in rows}


def test_harvest_job_stores_each_object_once_with_its_fields(server, shop, project):
    project.write_params(LINK_JOBS=[harvest_job(server)])
    first = project.run("--once")
    assert first.returncode == 0, first.stderr

    rows = by_url(project.rows("shop"), server)
    assert set(rows) == {f"/item/{n}" for n in range(1, 9)}
    assert rows["/item/5"]["name"] == "Item 5" and rows["/item/5"]["price"] == "5.99"
    assert rows["/item/3"]["price"] is None  # no price on the page: NULL, and counted
    assert all(len(r["hash"]) == 56 and r["fetched"].endswith("Z") for r in rows.values())
    assert project.polls("shop") == [(9, 8, 0)]  # pass 2: 9 links fetched, 8 new
    assert link_statuses(project.staging, "shop") == {**{server.url(f"/item/{n}"): "done" for n in range(1, 9)},
                                         server.url("/item/404"): "gone"}  # none to retry, given up or pending
    assert (project.last_flush()["rows"], project.last_flush()["already"]) == (8, 0)
    assert f"shop  {server.url('/item/404')}  HTTP 404 Not Found; not asked again" in project.log("errors.log")
    assert shop.item_hits() == {f"/item/{n}": 1 for n in [*range(1, 9), 404]}
    assert project.rows("items") == []  # the feeds' table is not the job's

    # A second run fetches the listings again, but no object twice; a new object is found and stored.
    shop.add_item(9, on_list=2)
    second = project.run("--once")
    assert second.returncode == 0, second.stderr
    assert shop.item_hits() == {f"/item/{n}": 1 for n in [*range(1, 10), 404]}
    assert server.hits["/list/1"] == 2
    assert set(by_url(project.rows("shop"), server)) == {f"/item/{n}" for n in range(1, 10)}
    links = (project.staging / "jobs" / "shop" / "links.txt").read_text(encoding="utf-8").splitlines()
    assert len([line for line in links if not line.startswith("#")]) == 10  # /item/9 added to the 9 (with 404)


def test_template_job_with_a_range_and_missing_objects(server, shop, project):
    project.write_params(LINK_JOBS=[template_job(server, values={"from": 1, "to": 10})])
    project.run("--once", check=True)
    assert set(by_url(project.rows("pages"), server)) == {f"/item/{n}" for n in range(1, 9)}
    assert link_statuses(project.staging, "pages")[server.url("/item/10")] == "gone"
    project.run("--once", check=True)
    assert shop.item_hits() == {f"/item/{n}": 1 for n in range(1, 11)}  # 404s are final too
    assert len(project.rows("pages")) == 8


def test_open_range_stops_after_misses_and_looks_again_on_the_next_run(server, shop, project):
    del server.routes["/item/4"]  # a gap: one miss does not end the range
    project.write_params(LINK_JOBS=[template_job(server, values={"from": 1}, stop_after_misses=3)])
    project.run("--once", check=True)
    assert set(by_url(project.rows("pages"), server)) == {f"/item/{n}" for n in (1, 2, 3, 5, 6, 7, 8)}
    hits = shop.item_hits()
    assert hits == {f"/item/{n}": 1 for n in range(1, 12)}  # 9, 10, 11 missed: stop before 12

    shop.add_item(9)
    shop.add_item(10)
    project.run("--once", check=True)
    hits = shop.item_hits()
    # The three misses that ended the range are asked again; 9 and 10 now exist, so the walk goes on
    # to 11, 12, 13 and stops again. Nothing before them is fetched twice.
    assert hits == {**{f"/item/{n}": 1 for n in range(1, 9)}, "/item/9": 2, "/item/10": 2, "/item/11": 2,
                    "/item/12": 1, "/item/13": 1}
    assert len(project.rows("pages")) == 9
    assert "3 misses at the end of the range asked again" in project.log()


def test_failures_are_retried_a_bounded_number_of_times(server, shop, project):
    server.route("/item/2", status=500, body=b"oops", content_type="text/plain")
    server.route("/item/5", status=200, body=b'{"not": "html"}', content_type="application/json")
    project.write_params(LINK_JOBS=[template_job(server, values=[2, 5])])
    project.run("--once", check=True)
    errors = project.log("errors.log")
    assert f"pages  {server.url('/item/2')}  HTTP 500 Internal Server Error; attempt 1 of 4, asked again later" \
        in errors
    assert f"pages  {server.url('/item/5')}  not an HTML page: application/json; attempt 1 of 4" in errors

    shop.add_item(2)  # the server recovers
    for _ in range(3):
        project.run("--once", check=True)
    assert [r["name"] for r in project.rows("pages")] == ["Item 2"]
    assert server.hits["/item/2"] == 2
    assert server.hits["/item/5"] == 4
    assert link_statuses(project.staging, "pages")[server.url("/item/5")] == "dead"  # given up after 4 attempts
    project.run("--once", check=True)
    assert server.hits["/item/5"] == 4  # given up: not asked again


def test_job_and_links_only_options(server, shop, project):
    server.route("/feed.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "feed", "url": server.url("/feed.xml")}],
                         LINK_JOBS=[harvest_job(server), template_job(server, values=[1, 2])])
    project.run("--once", "--links-only", check=True)
    assert shop.item_hits() == {} and "/feed.xml" not in server.hits  # pass 1 alone
    assert len((project.staging / "jobs" / "pages" / "links.txt").read_text().splitlines()) == 3  # header + 2
    assert project.rows("shop") == [] and project.rows("pages") == []

    project.run("--once", "--job", "pages", check=True)
    assert len(project.rows("pages")) == 2 and project.rows("shop") == [] and project.rows("items") == []
    assert shop.item_hits() == {"/item/1": 1, "/item/2": 1}

    project.run("--once", "--source", "feed", check=True)
    assert len(project.rows("items")) == 2 and project.rows("shop") == []

    project.run("--once", check=True)  # everything: the feed, and the rest of both jobs
    assert len(project.rows("shop")) == 8 and len(project.rows("pages")) == 2
    # Uniqueness is per job: the two jobs each store /item/1 in their own table, fetching it each once.
    assert shop.item_hits()["/item/1"] == 2

    unknown = project.run("--once", "--job", "nope")
    assert unknown.returncode == 2 and "no job named 'nope'" in unknown.stderr


def test_settings_errors_name_the_job_and_the_key(server, project):
    project.write_params(LINK_JOBS=[{"name": "books", "template": server.url("/b/{id}"), "values": {"id": [1]},
                                     "fields": {"title": "css:h1..x"}, "interval": 0}])
    proc = project.run("--once")
    assert proc.returncode == 2
    assert "LINK_JOBS[0] ('books'): fields['title'] is not a valid CSS selector" in proc.stderr
    assert "LINK_JOBS[0] ('books'): interval must be a number of seconds above 0, got 0" in proc.stderr
    assert not project.staging.exists()


@pytest.mark.parametrize(("names", "said"), [
    (["items_versions"], "LINK_JOBS[0] ('items_versions'): name 'items_versions' is the feeds' earlier versions"),
    (["runs"], "LINK_JOBS[0] ('runs'): name 'runs' is the runs' table"),
    (["parser_links"], "LINK_JOBS[0] ('parser_links'): name 'parser_links': names starting with 'parser_' are "
                       "the parser's own tables"),
    (["parser_schema"], "LINK_JOBS[0] ('parser_schema'): name 'parser_schema': names starting with 'parser_' "
                        "are the parser's own tables"),
    (["shop", "shop_versions"], "LINK_JOBS[1] ('shop_versions'): name 'shop_versions' is the table of job "
                                "'shop''s earlier versions"),
    (["shop_versions", "shop"], "LINK_JOBS[0] ('shop_versions'): name 'shop_versions' is the table of job "
                                "'shop''s earlier versions"),
])
def test_a_job_named_as_one_of_the_parsers_tables_is_refused_at_check_and_start(server, project, names, said):
    project.write_params(LINK_JOBS=[template_job(server, name=name, values=[1]) for name in names])
    for command in (("check",), ("--once",)):
        proc = project.run(*command)
        assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
        assert said in proc.stderr, proc.stderr
    assert not project.db_path.exists() and not project.staging.exists()


@pytest.mark.parametrize("field", ["version", "replaced"])
@pytest.mark.parametrize("setting", ["job", "UPDATES"])
def test_a_history_job_with_a_field_named_as_a_versions_column_is_refused_naming_both(server, project, field,
                                                                                       setting):
    job = template_job(server, name="shop", values=[1])
    job["fields"] = {**job["fields"], field: "css:p.v::text"}
    if setting == "job":
        project.write_params(LINK_JOBS=[{**job, "updates": "history"}])
        said = 'updates "history"'
    else:
        project.write_params(LINK_JOBS=[job], UPDATES="history")
        said = 'UPDATES = "history"'
    for command in (("check",), ("--once",)):
        proc = project.run(*command)
        assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
        assert f"LINK_JOBS[0] ('shop'): fields: {field!r} is a column of shop_versions, the table of earlier " \
               f"versions {said} keeps" in proc.stderr, proc.stderr
    assert not project.db_path.exists() and not project.staging.exists()
    project.write_params(LINK_JOBS=[job])  # updated in place, no versions table: the field is the job's own
    assert project.run("check").returncode == 0


def test_a_killed_pass_2_resumes_without_losing_or_refetching_finished_links(server, project):
    count, workers = 40, 2
    shop = Shop(server, items_per_list=count, lists=1, item_delay=0.05)
    project.write_params(LINK_JOBS=[template_job(server, values=range(1, count + 1))], CONCURRENCY=workers,
                         PER_HOST=workers, FLUSH_INTERVAL=3600)
    status_path = project.staging / "jobs" / "pages" / "links.status"
    daemon = project.start()  # forever mode, as under systemd
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if status_path.exists() and status_path.read_text().count("\tdone\t") >= 10:
                break
            time.sleep(0.01)
        os.kill(daemon.pid, signal.SIGKILL)
    finally:
        daemon.wait(10)
    finished = {url for url, status in link_statuses(project.staging, "pages").items() if status == "done"}
    assert 10 <= len(finished) < count, "the kill did not land in the middle of pass 2"
    # A kill right between staging a record and writing its 'done' line: make one such link.
    lines = status_path.read_text().splitlines(keepends=True)
    cut = next(i for i in range(len(lines) - 1, -1, -1) if "\tdone\t" in lines[i])
    cut_url = lines[cut].split("\t")[3]
    status_path.write_text("".join(lines[:cut] + lines[cut + 1:]))

    resumed = project.run("--once")
    assert resumed.returncode == 0, resumed.stderr
    rows = project.rows("pages")
    assert sorted(r["url"] for r in rows) == sorted(server.url(f"/item/{n}") for n in range(1, count + 1))
    hits = shop.item_hits()
    for url in finished:  # finished before the kill (the cut one included): never fetched again
        assert hits[url.replace(server.url(""), "")] == 1, url
    assert cut_url in finished
    # Repeated: only what was in flight at the kill (fetching, or fetched and waiting up to 50 ms for
    # its batch to be staged), never everything.
    assert sum(hits.values()) <= count + 3 * workers
    # The one link whose 'done' line was cut is marked done from the staging CSV (links.status says why).
    recovered = [line.split("\t")[3] for line in status_path.read_text().splitlines()
                 if "\tdone\t" in line and "recovered from the staging CSV" in line]
    assert recovered == [cut_url] and link_statuses(project.staging, "pages")[cut_url] == "done"


def test_crawlzilla_shop_harvest_counts(server, project):
    root = corpus_dir("crawlzilla", "crawler", "tests", "assets", "books.toscrape.com")
    for path in root.rglob("*.html"):
        server.route("/" + path.relative_to(root).as_posix(), body=path.read_bytes(), content_type="text/html")
    book = r"/catalogue/(?!category/)[^/]+_\d+/index\.html$"
    project.write_params(CONCURRENCY=8, PER_HOST=8, LINK_JOBS=[{
        "name": "books", "objects": book,
        "harvest": {"root": server.url("/index.html"), "depth": 3, "max_pages": 500,
                    "follow": r"/catalogue/category/|/catalogue/page-\d+\.html$"},
        "fields": {"title": "//div[contains(@class, 'product_main')]/h1",
                   "price": "css:.product_main p.price_color::text",
                   "upc": "//th[text()='UPC']/following-sibling::td"}}])
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr

    # What the listings link to, read with a regex instead of lxml: the harvest must find the same.
    listed: set[str] = set()
    for path in root.rglob("*.html"):
        rel = "/" + path.relative_to(root).as_posix()
        if re.search(book, rel):
            continue  # object pages are leaves
        for href in re.findall(r'href="([^"#]+)"', path.read_text(encoding="utf-8")):
            target = urljoin(rel, href)
            if re.search(book, target):
                listed.add(target)
    links = [line.split("\t")[0].replace(server.url(""), "")
             for line in (project.staging / "jobs" / "books" / "links.txt").read_text().splitlines()
             if not line.startswith("#")]
    assert len(links) == len(set(links)) == len(listed) == 529
    assert set(links) == listed

    existing = {"/" + p.relative_to(root).as_posix() for p in root.rglob("*.html")}
    rows = by_url(project.rows("books"), server)
    assert set(rows) == listed & existing and len(rows) == 63
    for rel, row in rows.items():
        html = (root / rel.lstrip("/")).read_text(encoding="utf-8")
        assert row["title"] == re.search(r"<h1>(.*?)</h1>", html).group(1).replace("&#39;", "'").replace(
            "&amp;", "&").replace("&quot;", '"')
        assert re.fullmatch(r"£\d+\.\d\d", row["price"]) and re.fullmatch(r"[0-9a-f]{16}", row["upc"])
    gone = [u for u, s in link_statuses(project.staging, "books").items() if s == "gone"]
    assert len(gone) == 529 - 63
    run, pages = project.harvest_pages("books")
    assert (run, len(pages), sum(outcome != "ok" for outcome in pages.values())) == (1, 68, 13)  # 68 fetched, 13 failed


def test_robochecker_robots_txt_from_crawlzilla(server, project):
    root = corpus_dir("crawlzilla", "crawler", "tests", "assets", "robochecker")
    for path in root.rglob("*"):
        if path.is_file():
            server.route("/" + path.relative_to(root).as_posix(), body=path.read_bytes(),
                         content_type="text/plain" if path.suffix == ".txt" else "text/html")
    server.route("/", content_type="text/html",
                 body=b'<a href="/index.html">home</a><a href="/no-crawl/test.html">secret</a>')
    project.write_params(LINK_JOBS=[{"name": "robo", "harvest": {"root": server.url("/")}, "objects": r"\.html$",
                                     "fields": {"text": "//body"}}])
    project.run("--once", check=True)
    assert [r["url"] for r in project.rows("robo")] == [server.url("/index.html")]
    assert "/no-crawl/test.html" not in server.hits


def test_link_file_is_readable(server, shop, project):
    project.write_params(LINK_JOBS=[harvest_job(server)])
    project.run("--once", "--links-only", check=True)
    folder: Path = project.staging / "jobs" / "shop"
    first_lines = (folder / "links.txt").read_text().splitlines()[:2]
    assert first_lines[0].startswith("# job shop: object links found by pass 1")
    assert first_lines[1] == f"{server.url('/item/1')}\t1\t{server.url('/')}"


def test_forever_mode_runs_pass_1_again_after_the_interval(server, shop, project):
    project.write_params(LINK_JOBS=[harvest_job(server, name="shop") | {"interval": 1}], FLUSH_INTERVAL=1)
    daemon = project.start()
    try:
        wait_for(lambda: len(project.rows("shop")) == 8, "the first harvest's objects stored")
        shop.add_item(9, on_list=1)
        wait_for(lambda: len(project.rows("shop")) == 9, "the object a later pass 1 finds stored")
    finally:
        assert stop(daemon) == 0
    assert len(project.rows("shop")) == 9
    assert set(shop.item_hits().values()) == {1}  # listings again and again, objects once
    assert server.hits["/list/1"] >= 2 and project.harvest_pages("shop")[0] >= 2  # pass 1's second run at least


@pytest.mark.postgres
def test_a_job_table_in_postgresql(server, shop, project, pg_url):
    import psycopg
    project.write_params(DB_URL=pg_url, LINK_JOBS=[template_job(server, values=range(1, 6))])
    project.run("--once", check=True)
    project.run("--once", check=True)
    with psycopg.connect(pg_url) as con:
        rows = con.execute("SELECT url, name, price FROM pages ORDER BY url").fetchall()
    assert rows == [(server.url(f"/item/{n}"), f"Item {n}", None if n == 3 else f"{n}.99") for n in range(1, 6)]


def test_a_jobs_newest_rows_deleted_are_said_once_with_the_way_to_store_them_again(server, shop, project, tmp_path):
    project.write_params(LINK_JOBS=[template_job(server, values={"from": 1, "to": 8})])
    project.run("--once", check=True)
    rows = project.rows("pages")
    with sqlite3.connect(project.db_path) as con:
        con.executemany("DELETE FROM pages WHERE id = ?", [(r["id"],) for r in rows[-5:]])
    for _ in range(2):
        project.run("--once", check=True)
    said = [line for line in project.log().splitlines() if "newest rows flushed from" in line]
    folder = project.staging / "jobs" / "pages"
    assert len(said) == 1 and "table pages: 5 of the 8 newest rows" in said[0], said
    assert f"move {folder}/hashes.* and {folder}/links.status away" in said[0]
    assert len(project.rows("pages")) == 3  # they stay out

    (tmp_path / "old").mkdir()  # the way the line gives: every link fetched again, the 5 stored again
    for path in [*folder.glob("hashes.*"), folder / "links.status"]:
        path.rename(tmp_path / "old" / path.name)
    project.run("--once", check=True)
    assert sorted(r["url"] for r in project.rows("pages")) == sorted(r["url"] for r in rows)
