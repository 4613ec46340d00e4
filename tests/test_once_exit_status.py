"""`--once` under cron (issue 27, case 16): a run in which every polled source failed exits 4, not 0;
one where some failed says how many in its last line (parser.log's, and stderr's, which cron mails)."""
from __future__ import annotations

from tests.feeds import numbered_items, rss


def last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def test_once_exit_code_and_last_line_say_how_many_sources_failed(server, project):
    server.route("/ok.xml", body=rss(numbered_items(1, 2)))
    server.route("/gone1.xml", status=404, body=b"no")
    server.route("/gone2.xml", status=500, body=b"no")
    gone = [{"name": "gone1", "url": server.url("/gone1.xml")}, {"name": "gone2", "url": server.url("/gone2.xml")}]
    ok = {"name": "ok", "url": server.url("/ok.xml")}

    project.write_params(SOURCES=gone)
    every = project.run("--once")
    assert every.returncode == 4, every.stderr
    assert "done: every source polled failed (2 of 2; errors.log says why): exit 4" in last_line(project.log())
    assert "every source polled failed" in last_line(every.stderr)  # off a terminal: what cron mails

    project.write_params(SOURCES=[ok, *gone])
    some = project.run("--once")
    assert some.returncode == 0, some.stderr
    assert "done: 2 of 3 sources polled failed (errors.log says why)" in last_line(project.log())
    assert "2 of 3 sources polled failed" in last_line(some.stderr)
    assert len(project.rows()) == 2

    project.write_params(SOURCES=[ok])
    none = project.run("--once")
    assert none.returncode == 0, none.stderr
    assert "done: 1 source polled, none failed" in last_line(project.log())

    project.write_params(SOURCES=gone)  # --dry-run is a --once too
    dry = project.run("--dry-run")
    assert dry.returncode == 4, dry.stderr
