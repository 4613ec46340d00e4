"""`run_daemon.py status`, `reset SOURCE` and `poll SOURCE` beside the real daemon process, on loopback feeds."""
from __future__ import annotations

import csv
import json

from parser.core.record import RECORD_FIELDS
from tests.feeds import numbered_items, rss
from tests.process import lock_sqlite, stop, wait_for


def write_staged(path, rows: int) -> None:
    """A staging CSV as the daemon writes it (every field quoted), each row with a three-line content field."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(["hash", *RECORD_FIELDS])
        for n in range(rows):
            row = {"source": "old", "link": f"http://example.com/old/{n}", "title": f"Old {n}",
                   "content": "<p>first line</p>\n<p>second line</p>\n<pre>third</pre>"}
            writer.writerow([f"{n:056x}", *(row.get(c, "") for c in RECORD_FIELDS)])


def status(project, *args: str) -> str:
    done = project.run("status", *args, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_status_while_the_daemon_runs_lists_the_worst_first_and_counts_staged_rows(server, project):
    server.route("/good.xml", body=rss(numbered_items(1, 3)), etag='"g1"')
    server.route("/broken.xml", status=500, body=b"oops", content_type="text/plain")
    server.route("/gone.xml", status=500, body=b"oops", content_type="text/plain")
    server.route("/busy.xml", status=503, body=b"later", content_type="text/plain", headers={"Retry-After": "7200"})
    project.write_params(SOURCES=[{"name": "good", "url": server.url("/good.xml"), "interval": 3600},
                                  {"name": "busy", "url": server.url("/busy.xml"), "interval": 3600},
                                  {"name": "broken", "url": server.url("/broken.xml"), "interval": 3600},
                                  {"name": "deadone", "url": server.url("/gone.xml"), "interval": 0.2}],
                         DEAD_AFTER=3, FLUSH_INTERVAL=3600)
    # Two rows with multi-line fields waiting from before (9 lines); the database refuses writes, so
    # the start flush fails and leaves them in a staging.flushing-*.csv batch.
    write_staged(project.staging / "staging.csv", 2)
    blocker = lock_sqlite(project.db_path)
    proc = project.start()
    try:
        wait_for(lambda: "deadone  marked dead" in project.log(), "deadone marked dead", timeout=60)
        wait_for(lambda: all(f"{n}  " in project.log() for n in ("good  new 3", "broken  error", "busy  error")),
                 "the first polls")
        # state.json is written in batches (at most once a second), not after every poll.
        saved = (project.staging / "state.json").stat().st_mtime_ns
        wait_for(lambda: (project.staging / "state.json").stat().st_mtime_ns > saved, "the states saved since")
        text = status(project)
        view = json.loads(status(project, "--json"))
        # What `wc -l` would say: 9 lines for the 2 old rows, 3 for the new ones (headers aside).
        lines_on_disk = sum(p.read_text().count("\n") - 1 for p in project.staging.glob("staging*.csv"))
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
        stop(proc)

    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), text
    assert f"daemon: running, pid {proc.pid}, up " in text
    assert "FAILED" in text and "database is locked" in text  # the last flush and its outcome
    assert "items 5 (1 batch from an unfinished flush)" in text  # 2 old rows (9 lines) + 3 new
    names = ("good", "broken", "deadone", "busy")
    table = [line.split()[0] for line in lines if line.split() and line.split()[0] in names]
    assert table == ["deadone", "busy", "broken", "good"]  # dead, held by Retry-After, failing, ok
    row = {line.split()[0]: line for line in lines if line.split() and line.split()[0] in table}
    assert "dead (" in row["deadone"] and "failing 1" in row["broken"] and " ok " in row["good"]
    assert "held to " in row["busy"] and row["busy"].split()[-1] in ("1h59m", "2h00m")  # next poll
    assert "  broken: HTTP 500" in text  # the last error under the table

    assert view["daemon"]["running"] is True and view["daemon"]["pid"] == proc.pid
    assert [s["name"] for s in view["sources"]] == ["deadone", "busy", "broken", "good"]
    dead, busy, broken, good = view["sources"]
    assert busy["state_kind"] == "held" and busy["held_until"] == busy["next_poll"] and busy["last_status"] == 503
    assert dead["dead"] is True and dead["state_kind"] == "dead" and dead["failures"] >= 3
    assert broken["state"] == "failing 1" and broken["last_status"] == 500 and broken["last_success"] is None
    assert good["state"] == "ok" and good["new_24h"] == 3 and good["last_new"].endswith("Z")
    assert good["last_success"] == good["last_poll"] and good["next_poll"] > good["last_poll"]
    assert view["staged"] == [{"table": "items", "rows": 5, "batches": 1}]
    assert view["last_flush"]["ok"] is False and "database is locked" in view["last_flush"]["error"]
    assert lines_on_disk == 9


def test_status_without_a_daemon_says_it_is_not_running_and_writes_nothing(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 2)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml")}])
    project.run("--once", check=True)
    before = {p: p.stat().st_mtime_ns for p in project.staging.rglob("*")}
    text = status(project)
    assert text.startswith("daemon: NOT RUNNING")
    assert "last flush:" in text and "ok, 2 rows" in text
    assert {p: p.stat().st_mtime_ns for p in project.staging.rglob("*")} == before


def test_reset_is_picked_up_by_the_running_daemon_and_polls_a_dead_source(server, project):
    server.route("/ok.xml", body=rss(numbered_items(1, 1)))
    server.route("/flaky.xml", status=500, body=b"down", content_type="text/plain")
    project.write_params(SOURCES=[{"name": "ok", "url": server.url("/ok.xml"), "interval": 3600},
                                  {"name": "flaky", "url": server.url("/flaky.xml"), "interval": 3600}],
                         DEAD_AFTER=2)
    for _ in range(2):
        project.run("--once", check=True)
    flaky = json.loads((project.staging / "state.json").read_text(encoding="utf-8"))["flaky"]
    assert flaky["dead"] is True and flaky["failures"] == 2, flaky  # marked dead at its second failure
    assert server.hits["/flaky.xml"] == 2
    server.route("/flaky.xml", body=rss(numbered_items(5, 2)))  # back up; the daemon would wait hours
    proc = project.start()
    try:
        wait_for(lambda: project.log().count("started:") == 3, "the daemon's start")
        wait_for(lambda: json.loads((project.staging / "daemon.json").read_text())["pid"] == proc.pid, "daemon.json")
        assert server.hits["/flaky.xml"] == 2  # dead: backed off, not polled at start
        done = project.run("reset", "flaky", "--wait", "60", timeout=90)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "reset flaky: new 2"
        assert server.hits["/flaky.xml"] == 3
        assert "flaky  reset by the operator: 2 failures cleared, polled now" in project.log()
        view = json.loads(status(project, "--json"))
        flaky = next(s for s in view["sources"] if s["name"] == "flaky")
        assert flaky["state"] == "ok" and flaky["dead"] is False and flaky["failures"] == 0

        done = project.run("poll", "ok", "--wait", "60", timeout=90)  # poll: polled now, answered with the outcome
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "poll ok: new 0"
        assert server.hits["/ok.xml"] == 3  # two --once runs and this (its interval is an hour)

        unknown = project.run("poll", "nosuch", timeout=30)
        assert unknown.returncode == 2 and "no source named 'nosuch'" in unknown.stderr
        assert list((project.staging / "control").iterdir()) == []  # requests and replies cleaned up
    finally:
        assert stop(proc) == 0
    assert len(project.rows()) == 3
    nobody = project.run("poll", "ok", timeout=30)
    assert nobody.returncode == 1 and "no daemon is running" in nobody.stderr


def test_poll_refuses_a_disabled_source_through_the_daemon(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 1)))
    project.write_params(SOURCES=[{"name": "a", "url": server.url("/a.xml"), "interval": 3600},
                                  {"name": "off", "url": server.url("/a.xml"), "enabled": False}])
    proc = project.start()
    try:
        wait_for(lambda: "a  new 1" in project.log(), "the first poll")
        done = project.run("poll", "off", timeout=30)
        assert done.returncode == 2 and "off is disabled" in done.stderr
    finally:
        stop(proc)


def test_the_hourly_history_keeps_seven_days_and_survives_a_reload(tmp_path):
    from parser.sources.state import HISTORY_HOURS, SourceState, read_states, save_states
    state = SourceState(url="http://example.com/feed")
    start = 1_790_000_000.0
    for hour in range(HISTORY_HOURS + 30):
        state.count(start + hour * 3600, polls=2, new=1)
        state.count(start + hour * 3600 + 60, errors=1)
    assert len(state.hourly) == HISTORY_HOURS
    assert state.hourly[-1][1:] == [1, 1] and state.totals == {"polls": 2 * (HISTORY_HOURS + 30),
                                                                "new": HISTORY_HOURS + 30, "errors": HISTORY_HOURS + 30}
    save_states(tmp_path / "state.json", {"a": state})
    assert read_states(tmp_path / "state.json") == ({"a": state}, [])


def test_status_counts_a_jobs_links_by_status(server, project):
    from tests.shop import HARVEST_FIELDS, Shop
    Shop(server)  # objects /item/1 to /item/8; 9 and 10 are missing (404: gone)
    project.write_params(LINK_JOBS=[{"name": "pages", "template": server.url("/item/{id}"),
                                     "values": {"id": {"from": 1, "to": 10}}, "fields": HARVEST_FIELDS}])
    project.run("--once", check=True)
    text = status(project)
    header = next(line for line in text.splitlines() if line.startswith("JOB"))
    assert header.split() == ["JOB", "PENDING", "DONE", "RETRY", "REFUSED", "GONE", "DEAD"]
    assert next(line for line in text.splitlines() if line.startswith("pages")).split() == \
        ["pages", "0", "8", "0", "0", "2", "0"]
    view = json.loads(status(project, "--json"))
    assert view["jobs"] == [{"name": "pages", "enabled": True, "links": {"pending": 0, "done": 8, "retry": 0,
                                                                      "refused": 0, "gone": 2, "dead": 0}}]
    assert view["staged"] == [{"table": "items", "rows": 0, "batches": 0}, {"table": "pages", "rows": 0, "batches": 0}]
