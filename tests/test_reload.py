"""SIGHUP through the real daemon process: a good params file applies (sources added and removed,
intervals), a bad one is refused with a line in the logs and the daemon goes on with the old one."""
from __future__ import annotations

import signal

from tests.feeds import numbered_items, rss
from tests.process import stop, wait_for


def hup_and_wait(project, proc, what: str) -> None:
    before = project.log().count("SIGHUP")
    proc.send_signal(signal.SIGHUP)
    wait_for(lambda: project.log().count("SIGHUP") > before, what)
    assert proc.poll() is None, "the daemon stopped on SIGHUP"


def test_sighup_applies_a_good_params_file_and_refuses_a_bad_one(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 1, host="a.example")))
    server.route("/b.xml", body=rss(numbered_items(1, 2, host="b.example")))
    server.route("/c.xml", body=rss(numbered_items(1, 3, host="c.example")))
    a, b, c = ({"name": n, "url": server.url(f"/{n}.xml")} for n in "abc")
    project.write_params(SOURCES=[a, b], POLL_INTERVAL=3600, FLUSH_INTERVAL=0.3)
    proc = project.start()
    try:
        wait_for(lambda: len(project.rows()) == 3, "a and b stored")

        # A good file: b removed, c added, a polled every 0.3 s from now on.
        project.write_params(SOURCES=[{**a, "interval": 0.3}, c], POLL_INTERVAL=3600, FLUSH_INTERVAL=0.3)
        hits_b = server.hits["/b.xml"]
        hup_and_wait(project, proc, "the reload line")
        wait_for(lambda: {r["source"] for r in project.rows()} == {"a", "b", "c"}, "c stored")
        hits_a = server.hits["/a.xml"]
        wait_for(lambda: server.hits["/a.xml"] >= hits_a + 3, "a polled on its new interval", timeout=15)
        assert server.hits["/b.xml"] == hits_b  # removed: no longer polled
        assert "read again: 2 sources (added: c; removed: b; changed: a)" in project.log()

        # A bad file: refused, the running settings stay (a still polled, c still there).
        project.params.write_text("SOURCES = [{'name': 'x', 'url': 'ftp://nowhere'}]\nPOLL_INTERVALL = 5\n",
                                  encoding="utf-8")
        hup_and_wait(project, proc, "the refusal")
        errors = project.log("errors.log")
        assert "SIGHUP: refused, the running settings stay" in errors
        assert "POLL_INTERVALL: unknown setting, did you mean POLL_INTERVAL?" in errors
        hits_a = server.hits["/a.xml"]
        wait_for(lambda: server.hits["/a.xml"] >= hits_a + 2, "a still polled after the refusal", timeout=15)
        assert server.hits.get("/x.xml") is None
    finally:
        code = stop(proc)
    assert code == 0
    assert sorted(r["link"] for r in project.rows()) == sorted(
        [f"http://a.example/item/{n}" for n in (1,)] + [f"http://b.example/item/{n}" for n in (1, 2)]
        + [f"http://c.example/item/{n}" for n in (1, 2, 3)])
