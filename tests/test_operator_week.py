"""Issue 21, the loop's and jobs' words: the minute summary counts polls and sources apart, a
Retry-After hold says until when, singular words, no flush line for a table nothing touched,
--links-only is a one-shot."""
from __future__ import annotations

import logging
import re

from parser.core.runinfo import RunInfo
from parser.feeds.poll_outcome import PollRecorder
from parser.pipeline.sink import PrintSink
from parser.sources.state import SourceState
from tests.conftest import Project
from tests.feeds import numbered_items, rss
from tests.server import LoopbackServer
from tests.shop import HARVEST_FIELDS, Shop


def test_the_summary_counts_polls_and_distinct_sources_apart(caplog):
    run_info = RunInfo(pid=1, started="2026-12-06T00:00:00Z")
    recorder = PollRecorder(PrintSink.__new__(PrintSink), run_info, dead_after=10)  # summary() reads its stats alone
    a, b = SourceState(), SourceState()
    with caplog.at_level(logging.INFO, logger="parser"):
        for state, name in ((a, "a"), (b, "b"), (a, "a")):
            recorder.stats.answered(state, 0.0, name, body_bytes=10, not_modified=False)
        recorder.stats.staged(a, 0.0, new=4, duplicates=0, blocked=0)
        recorder.summary()
        recorder.stats.answered(a, 0.0, "a", body_bytes=10, not_modified=False)
        recorder.summary()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("polled:")]
    assert lines[0].startswith("polled: 3 polls of 2 sources in ")
    assert "4 new records, 0 duplicates, 0 not modified, 0 errors" in lines[0]
    assert lines[1].startswith("polled: 1 poll of 1 source in ")
    assert "0 new records" in lines[1]


def test_a_retry_after_hold_says_until_when_in_errors_log(project: Project, server: LoopbackServer):
    server.route("/busy", status=503, headers={"Retry-After": "120"})
    server.route("/fine", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "busy", "url": server.url("/busy")},
                                  {"name": "fine", "url": server.url("/fine")}])
    project.run("--once", check=True)
    errors = project.log("errors.log")
    assert re.search(r"HTTP 503 Service Unavailable; held until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ "
                     r"\(Retry-After 120 s\)", errors), errors
    # Both sources polled once, the held one as a failed poll (the runs table).
    assert sorted((r["source"], r["outcome"], r["status"]) for r in project.rows("runs")) == \
        [("busy", "error", 503), ("fine", "new", 200)]


def template_job(server: LoopbackServer) -> dict:
    return {"name": "pages", "template": server.url("/item/{id}"), "values": {"id": {"from": 1, "to": 3}},
            "fields": HARVEST_FIELDS}


def test_links_only_without_once_runs_pass_1_and_exits(project: Project, server: LoopbackServer):
    shop = Shop(server)
    project.write_params(LINK_JOBS=[template_job(server)])
    done = project.run("--links-only", timeout=30)  # before: pass 1, then silence for ever
    assert done.returncode == 0, done.stderr
    links = (project.staging / "jobs" / "pages" / "links.txt").read_text(encoding="utf-8")
    assert [line.split("\t")[0] for line in links.splitlines() if line and not line.startswith("#")] == \
        [server.url(f"/item/{n}") for n in (1, 2, 3)]
    assert shop.item_hits() == {}  # pass 1 alone


def test_a_job_alone_writes_no_flush_line_for_the_untouched_feeds_table(project: Project, server: LoopbackServer):
    Shop(server)
    project.write_params(SOURCES=[{"name": "f", "url": server.url("/f.xml")}], LINK_JOBS=[template_job(server)])
    project.run("--once", "--job", "pages", check=True)
    log = project.log()
    assert "flush (once): 3 rows written to pages" in log
    assert "rows written to items" not in log, log


def test_one_more_link_is_said_in_the_singular(project: Project, server: LoopbackServer):
    Shop(server)
    job = {**template_job(server), "values": {"id": {"from": 1}}, "stop_after_misses": 1}
    project.write_params(LINK_JOBS=[job])
    project.run("--once", check=True)
    log = project.log()
    assert "pages  pass 1 (template): 1 more link past the last confirmed one" in log, log
    assert "1 more links" not in log


def test_the_opml_rename_notice_is_said_once_per_params_content(project: Project, server: LoopbackServer):
    from tests.test_opml import feed_outline, opml
    server.route("/a.xml", body=rss(numbered_items(1, 1, host="a.example")))
    server.route("/b.xml", body=rss(numbered_items(1, 1, host="b.example")))
    feeds = project.folder / "feeds.opml"
    feeds.write_text(opml(f'{feed_outline("News", server.url("/a.xml"))}\n'
                          f'{feed_outline("News", server.url("/b.xml"))}'), encoding="utf-8")
    project.write_params(SOURCES_OPML="feeds.opml")
    renamed = "this one is named 'News (2)'"
    project.run("--once", check=True)
    assert project.log().count(renamed) == 1
    project.run("--once", check=True)  # the same params: one short line, not the notice again
    log = project.log()
    assert log.count(renamed) == 1, log
    assert "params: 1 note as at the last start, not repeated" in log
    feeds.write_text(opml(f'{feed_outline("Tech", server.url("/a.xml"))}\n'
                          f'{feed_outline("Tech", server.url("/b.xml"))}'), encoding="utf-8")
    project.run("--once", check=True)  # a new notice: said in full
    assert "this one is named 'Tech (2)'" in project.log()
