"""Field coverage (parser/core/coverage.py): a feed's or a job's share of records with each field, per pass,
kept in daemon.json across restarts, and one errors.log line when a field falls below half its usual share.
Each pass here is a `--once` run of the real daemon against the loopback server, so every pass after the
first reads the history the last process left."""
from __future__ import annotations

import json
import time

from parser.core.coverage import Coverage
from parser.operate.status import collect
from parser.operate.statuspage import render_metrics, render_page
from parser.settings.params import load_settings
from tests.feeds import numbered_items, rss
from tests.shop import HARVEST_FIELDS, item_page


def coverage_lines(project) -> list[str]:
    path = project.logs / "errors.log"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return [line for line in text.splitlines() if "field coverage" in line]


def metrics(project) -> dict[str, float]:
    """/metrics as the status page renders it, from the files the daemon left."""
    values = {}
    for line in render_metrics(collect(load_settings(project.params), time.time())).decode().splitlines():
        if not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def saved_coverage(project) -> dict:
    return json.loads((project.staging / "daemon.json").read_text(encoding="utf-8"))["coverage"]


def poll_feed(server, project, first: int, count: int, *, dated: bool = True) -> None:
    items = numbered_items(first, count)
    if not dated:
        for item in items:
            del item["date"]
    server.route("/f.xml", body=rss(items))
    project.run("--once", check=True)


def feed_project(server, project) -> None:
    project.write_params(SOURCES=[{"name": "f", "url": server.url("/f.xml"), "interval": 3600}])


def test_a_feed_whose_entries_lose_their_dates_says_so_once_and_its_coverage_drops(server, project):
    feed_project(server, project)
    for k in range(3):  # three passes, three processes: the history is read back from daemon.json each time
        poll_feed(server, project, 1 + 6 * k, 6)
    assert saved_coverage(project)["source/f"]["history"]["published"] == [1.0, 1.0, 1.0]
    assert metrics(project)['parser_field_coverage{field="published",source="f"}'] == 1.0
    assert coverage_lines(project) == []

    poll_feed(server, project, 19, 6, dated=False)
    lines = coverage_lines(project)
    assert len(lines) == 1, lines
    assert "  f  " in lines[0] and "published in 0% of this pass's 6 records, usually 100%" in lines[0]
    after = metrics(project)
    assert after['parser_field_coverage{field="published",source="f"}'] == 0.0
    assert after['parser_field_coverage_usual{field="published",source="f"}'] == 1.0
    assert after['parser_field_coverage{field="title",source="f"}'] == 1.0
    view = collect(load_settings(project.params), time.time())
    assert "published 0%" in render_page(view)
    assert project.run("status").stdout.count("source f: published 0%, usually 100%") == 1

    poll_feed(server, project, 25, 6, dated=False)  # still without: said once, not at every pass
    assert len(coverage_lines(project)) == 1


def test_a_job_whose_markup_changes_names_the_field_and_its_metric_drops(server, project):
    for n in range(1, 25):
        server.route(f"/item/{n}", content_type="text/html", body=item_page(n, price=n <= 18))
    for k in range(4):  # each run's template reaches 6 more items: a pass 2 of 6 new objects
        project.write_params(LINK_JOBS=[{"name": "pages", "template": server.url("/item/{id}"),
                                         "values": {"id": {"from": 1, "to": 6 * (k + 1)}}, "fields": HARVEST_FIELDS}])
        project.run("--once", check=True)
        if k == 2:
            assert metrics(project)['parser_job_field_coverage{field="price",job="pages"}'] == 1.0
            assert coverage_lines(project) == []
    lines = coverage_lines(project)
    assert len(lines) == 1, lines
    assert "  pages  " in lines[0]  # the job, then its address
    assert "price in 0% of this pass's 6 records, usually 100%" in lines[0]
    assert "check the job's rule for price" in lines[0]
    after = metrics(project)
    assert after['parser_job_field_coverage{field="price",job="pages"}'] == 0.0
    assert after['parser_job_field_coverage{field="name",job="pages"}'] == 1.0
    assert len(project.rows("pages")) == 24


def test_a_small_pass_says_nothing(server, project):
    feed_project(server, project)
    for k in range(3):
        poll_feed(server, project, 1 + 4 * k, 4)
    poll_feed(server, project, 13, 4, dated=False)  # below MIN_RECORDS: shown, never judged
    assert coverage_lines(project) == []
    assert metrics(project)['parser_field_coverage{field="published",source="f"}'] == 0.0


def test_a_short_history_says_nothing(server, project):
    feed_project(server, project)
    for k in range(2):
        poll_feed(server, project, 1 + 6 * k, 6)
    poll_feed(server, project, 13, 6, dated=False)  # two passes behind it: not yet a usual share
    assert coverage_lines(project) == []
    assert metrics(project)['parser_field_coverage{field="published",source="f"}'] == 0.0
    assert saved_coverage(project)["source/f"]["history"]["published"] == [1.0, 1.0, 0.0]  # judged, then kept


def test_a_field_that_comes_back_may_be_said_again_and_a_restart_keeps_what_was_said():
    coverage = Coverage()
    full = [{"title": "t", "published": "2026-01-01T00:00:00Z"}] * 6
    bare = [{"title": "t", "published": ""}] * 6
    fields = ("title", "published")
    for _ in range(3):
        assert coverage.passed("source/a", full, fields) == []
    assert [d.field for d in coverage.passed("source/a", bare, fields)] == ["published"]
    again = Coverage(json.loads(json.dumps(coverage.as_json())))  # daemon.json's round trip
    assert again.passed("source/a", bare, fields) == []  # said once, also across a restart
    assert again.passed("source/a", full, fields) == []  # back: the next fall is said
    assert [d.field for d in again.passed("source/a", bare, fields)] == ["published"]
