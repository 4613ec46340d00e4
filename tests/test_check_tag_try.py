"""Issue 21, what newsboat, Miniflux and Scrapy users reach for, through the installed `parser-daemon`:
`check` (nginx -t: the settings checked, each source and job listed, nothing fetched or written),
`--tag NAME` (sources selected by tag; tags in `status` and as OPML categories), and `try JOB URL`
(Scrapy's shell: one page fetched with the job's politeness, each field shown, nothing written)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.feeds import numbered_items, rss
from tests.process import wait_for
from tests.server import LoopbackServer
from tests.shop import HARVEST_FIELDS, Shop
from tests.test_opml import opml

INSTALLED = Path(sys.executable).parent / "parser-daemon"  # the console script of the test virtualenv
pytestmark = pytest.mark.skipif(not INSTALLED.exists(), reason="no installed parser-daemon beside this Python")


def daemon(project: Project, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(INSTALLED), "--params", str(project.params), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=project.folder)


def files_in(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def feeds(server: LoopbackServer, *names: str) -> None:
    for name in names:
        server.route(f"/{name}.xml", body=rss(numbered_items(1, 1, host=f"{name}.example")))


# -- check ----------------------------------------------------------------------------------------
def test_check_lists_sources_and_jobs_fetches_nothing_and_writes_nothing(project: Project, server: LoopbackServer):
    feeds(server, "world")
    project.write_params(
        SOURCES=[{"name": "world", "url": server.url("/world.xml"), "tags": ["news", "daily"]},
                 {"name": "secret", "url": "https://user:pw@example.org/feed?token=abc", "interval": 300,
                  "enabled": False}],
        LINK_JOBS=[{"name": "pages", "template": server.url("/item/{id}"), "values": {"id": {"from": 1, "to": 3}},
                    "fields": HARVEST_FIELDS}])
    done = daemon(project, "check")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"staging:  {project.staging} (made at the first start)" in out
    assert f"database: sqlite:///{project.db_path} (not connected by check)" in out
    world = next(line.split() for line in out.splitlines() if line.startswith("  world "))
    assert world == ["world", "feed", "10m", "news,daily", server.url("/world.xml")]
    secret = next(line for line in out.splitlines() if line.startswith("  secret (off) "))
    assert "5m" in secret and "https://***@example.org/feed?token=***" in secret and "pw" not in secret
    assert "  pages: table pages, pass 1 (template) every 1d, fields name, price" in out
    assert f"    links file: {project.staging / 'jobs' / 'pages' / 'links.txt'}" in out
    assert out.rstrip().endswith("params.py: settings ok (2 sources, 1 job); nothing was fetched or written")
    assert server.hits == {}
    assert files_in(project.folder) == {"params.py"}


def test_check_says_what_a_start_says_about_bad_settings_with_exit_2(project: Project):
    project.write_params(MAX_ITEMS="fifty", SOURCES=[{"name": "a", "url": "http://127.0.0.1:9/a.xml"}])
    check, start = daemon(project, "check"), daemon(project, "--once")
    assert check.returncode == start.returncode == 2
    assert check.stderr == start.stderr and "MAX_ITEMS" in check.stderr
    assert check.stdout == ""
    assert files_in(project.folder) == {"params.py"}


def test_check_refuses_hash_files_a_start_would_refuse_and_changes_none(project: Project, server: LoopbackServer):
    feeds(server, "a")
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}])
    assert daemon(project, "--once").returncode == 0
    before = {p: p.stat().st_mtime_ns for p in project.folder.rglob("*")}
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}], HASH="sha256")
    before[project.params] = project.params.stat().st_mtime_ns
    hits = dict(server.hits)
    check = daemon(project, "check")
    assert check.returncode == 2
    assert check.stderr.startswith("settings error: ") and "HASH was 'sha224' and is now 'sha256'" in check.stderr
    assert {p: p.stat().st_mtime_ns for p in project.folder.rglob("*")} == before
    assert server.hits == hits


# -- --tag ----------------------------------------------------------------------------------------
def tagged_sources(server: LoopbackServer) -> list[dict]:
    feeds(server, "world", "weather", "tech", "old")
    return [{"name": "world", "url": server.url("/world.xml"), "tags": ["news"]},
            {"name": "weather", "url": server.url("/weather.xml"), "tags": ["news", "daily"]},
            {"name": "tech", "url": server.url("/tech.xml"), "tags": ["geek"]},
            {"name": "old", "url": server.url("/old.xml"), "tags": ["news"], "enabled": False}]


def test_tag_runs_the_enabled_sources_with_that_tag(project: Project, server: LoopbackServer):
    project.write_params(SOURCES=tagged_sources(server))
    done = daemon(project, "--once", "--tag", "news")
    assert done.returncode == 0, done.stderr
    assert server.hits == {"/world.xml": 1, "/weather.xml": 1}  # not the disabled one, nor another tag
    assert sorted(r["source"] for r in project.rows()) == ["weather", "world"]
    # Several tags, and --source beside them: the union, each source once.
    done = daemon(project, "--once", "--tag", "daily", "--tag", "geek", "--source", "old", "--source", "weather")
    assert done.returncode == 0, done.stderr
    assert server.hits == {"/world.xml": 1, "/weather.xml": 2, "/tech.xml": 1, "/old.xml": 1}


def test_an_unknown_tag_is_an_error_naming_the_known_tags(project: Project, server: LoopbackServer):
    project.write_params(SOURCES=tagged_sources(server))
    done = daemon(project, "--once", "--tag", "sport")
    assert done.returncode == 2
    assert done.stderr.strip() == "error: no source tagged 'sport' in params.py (tags: news, daily, geek)"
    assert server.hits == {} and files_in(project.folder) == {"params.py"}


@pytest.mark.parametrize(("tags", "said"), [
    ("news", "tags must be a list of short strings like ['news', 'daily'], got 'news'"),
    (["a,b"], "tags: 'a,b' is not a tag: 1 to 40 characters, without a comma, a slash"),
    (["x" * 41], f"tags: {'x' * 41!r} is not a tag: 1 to 40 characters"),
    ([" news"], "tags: ' news' is not a tag"),
])
def test_a_bad_tags_value_is_a_settings_error_naming_the_source(project: Project, tags, said):
    project.write_params(SOURCES=[{"name": "a", "url": "http://127.0.0.1:9/a.xml", "tags": tags}])
    done = daemon(project, "check")
    assert done.returncode == 2
    assert "params.py: SOURCES[0] ('a'): " + said in done.stderr, done.stderr


def test_status_shows_each_tag_and_its_sources(project: Project, server: LoopbackServer):
    project.write_params(SOURCES=tagged_sources(server))
    text = daemon(project, "status")
    assert text.returncode == 0, text.stderr
    assert "\ntags:\n  daily: weather\n  geek: tech\n  news: weather, world, old\n" in text.stdout  # the table's order
    view = json.loads(daemon(project, "status", "--json").stdout)
    assert {s["name"]: s["tags"] for s in view["sources"]} == \
        {"world": ["news"], "weather": ["news", "daily"], "tech": ["geek"], "old": ["news"]}


def test_tags_are_opml_categories_both_ways(project: Project, server: LoopbackServer, tmp_path: Path):
    project.write_params(SOURCES=tagged_sources(server)[:2])
    exported = daemon(project, "export-opml").stdout
    assert f'xmlUrl="{server.url("/weather.xml")}" category="news,daily"/>' in exported
    # A reader's export: its categories (and folders) become tags that --tag selects by.
    (project.folder / "feeds.opml").write_text(opml(
        f'<outline text="reader" title="reader" xmlUrl="{server.url("/tech.xml")}" category="geek,/long/reads"/>'),
        encoding="utf-8")
    project.write_params(SOURCES_OPML="feeds.opml")
    check = daemon(project, "check")
    assert check.returncode == 0, check.stderr
    assert next(line.split() for line in check.stdout.splitlines() if line.startswith("  reader "))[3] == \
        "geek,long,reads"
    done = daemon(project, "--once", "--tag", "reads")
    assert done.returncode == 0, done.stderr
    assert server.hits == {"/tech.xml": 1}


# -- try ------------------------------------------------------------------------------------------
def shop_job(server: LoopbackServer, **more) -> dict:
    return {"name": "pages", "template": server.url("/item/{id}"), "values": {"id": {"from": 1, "to": 2}},
            "fields": HARVEST_FIELDS, **more}


def test_try_shows_each_field_and_whether_it_matched_and_writes_nothing(project: Project, server: LoopbackServer):
    shop = Shop(server)
    project.write_params(LINK_JOBS=[shop_job(server)], USER_AGENT="tester/1.0")
    done = daemon(project, "try", "pages", server.url("/item/3"))  # item 3 has no price; not in the job's links
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"job pages: GET {server.url('/item/3')}: 200, text/html, ")
    assert lines[1:] == ["FIELD  MATCHED  VALUE",
                         "name   yes      Item 3",
                         "price  no       -  (selector css:span.price::text)",
                         "1 of 2 fields matched; nothing was written"]
    assert shop.item_hits() == {"/item/3": 1}
    assert [h.get("User-Agent") for path, h in server.requests if path == "/item/3"] == ["tester/1.0"]
    assert files_in(project.folder) == {"params.py"}


def test_try_keeps_to_a_harvest_jobs_robots_txt(project: Project, server: LoopbackServer):
    shop = Shop(server)
    harvest = {"root": server.url("/"), "objects": r"/item/\d+$"}
    project.write_params(LINK_JOBS=[{"name": "crawl", "harvest": harvest, "fields": HARVEST_FIELDS}])
    done = daemon(project, "try", "crawl", server.url("/private/item/9"))
    assert done.returncode == 1
    assert done.stderr.startswith(f"error: {server.url('/private/item/9')}: not fetched: ")
    assert "robots.txt" in done.stderr, done.stderr
    assert server.hits.get("/robots.txt") == 1 and "/private/item/9" not in server.hits
    assert shop.item_hits() == {}
    assert files_in(project.folder) == {"params.py"}


def test_try_says_why_a_fetch_failed_and_names_the_known_jobs(project: Project, server: LoopbackServer):
    Shop(server)
    project.write_params(LINK_JOBS=[shop_job(server)])
    missing = daemon(project, "try", "pages", server.url("/item/404"))
    assert missing.returncode == 1
    assert f"error: {server.url('/item/404')}: not fetched: HTTP 404" in missing.stderr
    unknown = daemon(project, "try", "shop", server.url("/item/1"))
    assert unknown.returncode == 2
    assert unknown.stderr.strip() == "error: no job named 'shop' in params.py (jobs: pages)"
    assert files_in(project.folder) == {"params.py"}


def test_try_honours_a_pause_the_host_asked_the_job_for(project: Project, server: LoopbackServer):
    import time
    Shop(server)
    project.write_params(LINK_JOBS=[shop_job(server)])
    state = project.staging / "jobs" / "pages" / "state.json"
    state.parent.mkdir(parents=True)
    host = server.url("/").rstrip("/")
    state.write_text(json.dumps({"holds": {host: time.time() + 600}, "hold_seconds": {host: 600}}), encoding="utf-8")
    done = daemon(project, "try", "pages", server.url("/item/1"))
    assert done.returncode == 1
    assert "asked for no requests" in done.stderr and "(Retry-After)" in done.stderr, done.stderr
    assert server.hits == {}


def test_ctrl_c_during_try_ends_it_with_130_and_no_traceback(project: Project, server: LoopbackServer):
    """A page that never answers, and the user presses Ctrl-C (SIGINT to the foreground group)."""
    import os
    import signal
    server.route("/slow", hang=True)
    project.write_params(LINK_JOBS=[shop_job(server)])
    # As from a terminal: SIGINT not ignored, even when this test runs in a background job of a shell
    # (which starts it with SIGINT ignored, and Python then keeps it so).
    proc = subprocess.Popen([str(INSTALLED), "--params", str(project.params), "try", "pages", server.url("/slow")],
                            cwd=project.folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_for(lambda: any(path == "/slow" for path, _ in server.requests), "the request")
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err and err.strip() == "interrupted", err
    assert files_in(project.folder) == {"params.py"}
