"""Issue 27, case 19, what an operator reads: `--once --source` on a webhook says it runs nothing,
`export-opml` keeps disabled sources (marked) and writes a discovered feed's address, `status` says when
state.json is damaged, a failed poll is a WARNING (a charset note no ERROR), and each `--dry-run` record
names its table."""
from __future__ import annotations

import json

from lxml import etree

from tests.conftest import Project
from tests.feeds import numbered_items, rss
from tests.server import LoopbackServer
from tests.shop import HARVEST_FIELDS, Shop


# -- --dry-run: each record names its table ---------------------------------------------------------
def test_each_dry_run_record_names_the_table_it_would_go_to(server: LoopbackServer, project: Project):
    """Two jobs over the same pages give records of one shape: only "@table" tells them apart on stdout."""
    Shop(server, items_per_list=4, lists=1)
    server.route("/feed.xml", body=rss(numbered_items(1, 1)))
    jobs = [{"name": name, "template": server.url("/item/{id}"), "values": {"id": {"from": low, "to": low + 1}},
             "fields": HARVEST_FIELDS} for name, low in (("alpha", 1), ("beta", 3))]
    project.write_params(SOURCES=[{"name": "feed", "url": server.url("/feed.xml")}], LINK_JOBS=jobs)
    proc = project.run("--dry-run", "--source", "feed", "--job", "alpha", "--job", "beta")
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert all(list(r)[0] == "@table" for r in records), records  # first, where a reader looks
    by_table = sorted((r["@table"], r.get("url") or r["title"]) for r in records)
    assert by_table == [("alpha", server.url("/item/1")), ("alpha", server.url("/item/2")),
                        ("beta", server.url("/item/3")), ("beta", server.url("/item/4")), ("items", "Item 1")]


# -- --once --source on a webhook source --------------------------------------------------------------
def test_once_on_a_webhook_source_says_it_has_nothing_to_do(server: LoopbackServer, project: Project, monkeypatch):
    monkeypatch.setenv("HOOK_SECRET", "x")
    server.route("/feed.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "hook", "protocol": "webhook", "path": "/hook", "secret_env": "HOOK_SECRET"},
                                  {"name": "feed", "url": server.url("/feed.xml")}])
    alone = project.run("--once", "--source", "hook")
    assert alone.returncode == 2, alone.stderr  # cron's mail: nothing was run
    assert "error: --once has nothing to run: 'hook' (webhook): not polled; its records are pushed to the " \
           "listener (WEBHOOK_LISTEN) of a daemon running without --once" in alone.stderr

    both = project.run("--once", "--source", "hook", "--source", "feed")
    assert both.returncode == 0, both.stderr
    warned = [line for line in both.stderr.splitlines() if "'hook' (webhook): not polled" in line]
    assert len(warned) == 1 and " WARNING  " in warned[0], both.stderr  # off a terminal: what cron mails
    assert "'hook' (webhook): not polled" in project.log()
    assert len(project.rows()) == 2


# -- status over a damaged state.json -----------------------------------------------------------------
def test_status_says_state_json_is_damaged_and_what_the_daemon_will_do(server: LoopbackServer, project: Project):
    server.route("/feed.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "feed", "url": server.url("/feed.xml")}])
    project.run("--once", check=True)
    state = project.staging / "state.json"
    whole = state.read_text(encoding="utf-8")
    state.write_text(whole[: len(whole) // 2], encoding="utf-8")  # a disk full, or an editor's crash

    shown = project.run("status", check=True).stdout
    assert "state.json in STAGING_DIR is DAMAGED, read as empty" in shown, shown
    assert "is not valid JSON" in shown
    assert "the next start moves it aside to state.json.bad, and every source starts" in shown
    viewed = json.loads(project.run("status", "--json", check=True).stdout)["state_file"]
    assert viewed["path"] == str(state) and viewed["whole"]
    assert viewed["damage"][0]["what"].startswith("is not valid JSON")

    project.run("--once", check=True)  # what status said the start does, it does
    assert (project.staging / "state.json.bad").read_text(encoding="utf-8") == whole[: len(whole) // 2]
    assert "DAMAGED" not in project.run("status", check=True).stdout

    broken = json.loads(state.read_text(encoding="utf-8"))
    broken["feed"]["failures"] = "many"  # one field, by hand
    state.write_text(json.dumps(broken), encoding="utf-8")
    shown = project.run("status", check=True).stdout
    assert "state.json in STAGING_DIR is DAMAGED in places" in shown
    assert 'feed: failures is "many", not a whole number: reset to 0' in shown
    assert "the next start resets what is damaged (a line each in errors.log) and keeps" in shown


# -- export-opml: disabled sources kept, a discovered feed exported --------------------------------------
def test_export_opml_keeps_disabled_sources_marked_and_writes_the_feed_found_on_a_page(server: LoopbackServer,
                                                                                       project: Project, tmp_path):

    server.route("/feed.xml", body=rss(numbered_items(1, 2)))
    server.route("/blog", content_type="text/html; charset=utf-8", body=(
        b'<!DOCTYPE html><html><head><title>Blog</title><link rel="alternate" type="application/rss+xml" '
        b'href="/feed.xml"></head><body>Posts</body></html>'))
    project.write_params(SOURCES=[{"name": "blog", "url": server.url("/blog"), "tags": ["news"]},
                                  {"name": "paused", "url": "https://paused.example/feed.xml", "enabled": False,
                                   "tags": ["news"]}])
    project.run("--once", check=True)
    assert len(project.rows()) == 2  # the page's feed was found and read

    out = tmp_path / "out.opml"
    done = project.run("export-opml", "-o", str(out), check=True)
    outlines = {o.get("text"): o for o in etree.parse(str(out)).iter("outline") if o.get("xmlUrl")}
    assert outlines["blog"].get("xmlUrl") == server.url("/feed.xml")  # what the daemon polls, not the page
    assert outlines["blog"].get("htmlUrl") == server.url("/blog")
    assert outlines["blog"].get("isComment") is None
    assert outlines["paused"].get("isComment") == "true" and outlines["paused"].get("category") == "news"
    assert '2 feed sources written to' in done.stderr
    assert '(1 disabled, isComment="true"; 1 as the feed found on its page)' in done.stderr

    # Read back as another project's SOURCES_OPML: the paused source stays off, the blog is its feed.
    other = tmp_path / "other"
    other.mkdir()
    (other / "params.py").write_text(f"SOURCES_OPML = {str(out)!r}\n", encoding="utf-8")
    from parser.settings.params import load_settings
    back = {s.name: (s.url, s.enabled, s.tags) for s in load_settings(other / "params.py").sources}
    assert back == {"blog": (server.url("/feed.xml"), True, ("news",)),
                    "paused": ("https://paused.example/feed.xml", False, ("news",))}


# -- log levels: a failed poll is a WARNING at least, a charset note on a stored feed no ERROR -----------
def test_a_failed_poll_is_a_warning_and_a_charset_note_on_a_stored_feed_no_error(server: LoopbackServer,
                                                                                 project: Project):
    server.route("/down.xml", status=500, body=b"oops", content_type="text/plain")
    server.route("/mixed.xml", body=rss([{"title": "Café crème", "link": "http://example.com/1"}]),
                 content_type="application/rss+xml; charset=iso-8859-1")  # the document says utf-8
    project.write_params(SOURCES=[{"name": "down", "url": server.url("/down.xml")},
                                  {"name": "mixed", "url": server.url("/mixed.xml")}])
    project.run("--once")
    assert [r["title"] for r in project.rows()] == ["Café crème"]  # stored fine
    failed = [line for line in project.log().splitlines() if "down  error  HTTP 500" in line]
    assert len(failed) == 1 and " WARNING  " in failed[0], project.log()
    errors = project.log("errors.log").splitlines()
    charset = [line for line in errors if "  mixed  " in line]
    assert len(charset) == 1 and "charset disagreement" in charset[0], errors
    assert " WARNING  " in charset[0], errors
    assert [" ERROR  " in line for line in errors if "  down  " in line] == [True]  # the failure stays an ERROR
