"""The status page on STATUS_LISTEN, served by the real daemon process: /metrics in the Prometheus text
format, /healthz following the loop and the last flush, and `/` rendered by a real headless Chromium."""
from __future__ import annotations

import re
import shutil
import subprocess
import urllib.error
import urllib.request

import pytest

from db.search_index import START, STOP, Found
from parser.operate.statuspage import render_search
from tests.feeds import numbered_items, rss
from tests.process import free_port, lock_sqlite, stop, wait_for

# One sample line of the text exposition format: name, optional {label="value",...}, value.
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(rf'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{{(?:{LABEL})(?:,{LABEL})*,?\}})? '
                    r'(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?Inf|NaN)( -?\d+)?$')
COMMENT = re.compile(r'^# (?:HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*|TYPE [a-zA-Z_:][a-zA-Z0-9_:]* '
                     r'(?:counter|gauge|histogram|summary|untyped))$')


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def metrics(base: str) -> dict[str, float]:
    status, text = get(base + "/metrics")
    assert status == 200
    values = {}
    for line in text.splitlines():
        assert SAMPLE.match(line) or COMMENT.match(line), f"not in the exposition format: {line!r}"
        if not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def start_with_page(project, **params):
    port = free_port()
    project.write_params(STATUS_LISTEN=f"127.0.0.1:{port}", **params)
    proc = project.start()
    base = f"http://127.0.0.1:{port}"
    wait_for(lambda: f"status page on {base}/" in project.log() or proc.poll() is not None, "the status page")
    assert proc.poll() is None, proc.stderr.read()
    return proc, base


def test_metrics_are_in_the_exposition_format_and_counters_rise_after_a_poll(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 3)), etag='"a1"')
    server.route("/b.xml", status=503, body=b"busy", content_type="text/plain")
    proc, base = start_with_page(project, SOURCES=[
        {"name": "a", "url": server.url("/a.xml"), "interval": 3600},
        {"name": 'we"ird\\name', "url": server.url("/b.xml"), "interval": 3600}], FLUSH_INTERVAL=3600)
    try:
        wait_for(lambda: "a  new 3" in project.log() and "ird" in project.log("errors.log"), "the first polls")
        wait_for(lambda: metrics(base).get("parser_polls_total") == 2, "the cycle's counters")
        before = metrics(base)
        assert before["parser_new_entries_total"] == 3 and before["parser_poll_errors_total"] == 1
        assert before['parser_staged_rows{table="items"}'] == 3
        assert before['parser_source_new_entries_total{source="a"}'] == 3
        assert before['parser_source_errors_total{source="we\\"ird\\\\name"}'] == 1  # quote and backslash escaped
        assert before['parser_source_failures{source="we\\"ird\\\\name"}'] == 1
        assert before["parser_fetch_bytes_total"] > 0 and before["parser_up"] == 1
        assert project.run("poll", "a", "--wait", "60", timeout=90).returncode == 0
        after = metrics(base)
        assert after["parser_polls_total"] == 3
        assert after["parser_not_modified_total"] == before["parser_not_modified_total"] + 1
        assert after['parser_source_polls_total{source="a"}'] == 2
    finally:
        assert stop(proc) == 0


def test_metrics_count_the_rows_a_flush_updated_and_the_versions_it_kept(server, project):
    items = numbered_items(1, 3)
    route = server.route("/a.xml", body=rss(items))
    proc, base = start_with_page(project, SOURCES=[{"name": "a", "url": server.url("/a.xml"), "interval": 3600}],
                                 FLUSH_INTERVAL=0.5, UPDATES="history")
    try:
        wait_for(lambda: metrics(base).get("parser_rows_written_total") == 3, "the first flush counted")
        assert metrics(base)["parser_rows_updated_total"] == 0 and metrics(base)["parser_versions_written_total"] == 0
        route.body = rss([{**item, "title": "Item 2, corrected"} if item["title"] == "Item 2" else item
                          for item in items])
        assert project.run("poll", "a", "--wait", "60", timeout=90).returncode == 0
        wait_for(lambda: metrics(base)["parser_rows_updated_total"] == 1, "the edit's flush counted", timeout=30)
        after = metrics(base)
        assert after["parser_versions_written_total"] == 1 and after["parser_rows_written_total"] == 3
    finally:
        assert stop(proc) == 0
    assert [r["title"] for r in project.rows("items_versions")] == ["Item 2"]  # the version counted


def test_healthz_is_200_while_flushes_succeed_and_503_when_the_database_refuses(server, project):
    server.route("/a.xml", body=rss(numbered_items(1, 2)))
    proc, base = start_with_page(project, SOURCES=[{"name": "a", "url": server.url("/a.xml"), "interval": 0.3}],
                                 FLUSH_INTERVAL=0.5)
    try:
        wait_for(lambda: len(project.rows()) == 2, "the first flush")
        assert get(base + "/healthz")[0] == 200
        blocker = lock_sqlite(project.db_path)
        server.route("/a.xml", body=rss(numbered_items(1, 4)))  # rows to flush while the database refuses
        try:
            wait_for(lambda: get(base + "/healthz")[0] == 503, "503 from /healthz", timeout=60)
            status, reason = get(base + "/healthz")
            assert status == 503 and "database is locked" in reason
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        wait_for(lambda: get(base + "/healthz")[0] == 200, "200 again after a good flush", timeout=60)
        assert len(project.rows()) == 4
        assert get(base + "/nothing")[0] == 404
    finally:
        assert stop(proc) == 0
    with pytest.raises(OSError):  # the page went with the daemon
        urllib.request.urlopen(base + "/healthz", timeout=3)


def test_the_search_box_finds_what_the_search_command_finds_every_value_escaped(server, project):
    # A title with no closing tag and no entity is kept as the feed wrote it (text, not HTML: docs/storage.md).
    hostile = [{"title": '<img src=x onerror=alert(1)> Häuser "am" Hafen', "link": "http://example.com/a",
                "description": "Am <b>Hafen</b> gebaut"},
               {"title": "Der Zug", "link": "http://example.com/b", "description": "Bahnhof"}]
    body = rss(hostile).replace(b"<channel>", b"<channel><language>de</language>", 1)
    server.route("/a.xml", body=body)
    proc, base = start_with_page(project, SOURCES=[{"name": "a<i>", "url": server.url("/a.xml"), "interval": 3600}],
                                 FLUSH_INTERVAL=0.5, SEARCH=True)
    try:
        wait_for(lambda: len(project.rows()) == 2, "the first flush")
        status, page = get(base + "/")
        assert status == 200 and "<form class=search action=/search method=get" in page
        status, page = get(base + "/search?q=Haus")
        command = project.run("search", "Haus", "--format", "jsonl")
        empty = get(base + "/search?q=-Haus")
    finally:
        assert stop(proc) == 0
    assert status == 200 and command.returncode == 0 and len(command.stdout.splitlines()) == 1
    assert "<img" not in page and "<b>" not in page and "<i>" not in page
    assert '<a href="http://example.com/a">&lt;img src=x onerror=alert(1)&gt; Häuser &quot;am&quot; Hafen</a>' in page
    assert "<span class=meta>a&lt;i&gt; · -</span>" in page and "1 found, best first" in page
    assert 'value="Haus"' in page and "Der Zug" not in page
    assert empty[0] == 400 and "nothing to look for" in empty[1]


def test_a_found_entry_links_only_to_an_http_address():
    found = [Found("s", "One", "javascript:alert(1)", None, f"a {START}word{STOP}"),
             Found("s", "Two", " JavaScript:alert(1)", None, ""), Found("s", "Three", "HTTPS://x.org/", None, ""),
             Found("s", "Four", "http://[broken", None, "")]
    page = render_search("word", found, None)
    assert page.count("<a href=") == 2  # Three, and the page's own link back to /
    assert '<a href="HTTPS://x.org/">Three</a>' in page and "javascript" not in page.lower()
    assert "<li>One <span" in page and "<li>Two <span" in page and "<li>Four <span" in page
    assert "<p>a <mark>word</mark></p>" in page


def test_status_listen_is_checked_at_start(project):
    project.write_params(STATUS_LISTEN="8788")
    done = project.run("--once")
    assert done.returncode == 2
    assert "STATUS_LISTEN: must be None (off) or 'host:port' like '127.0.0.1:8788', got '8788'" in done.stderr


def test_status_listen_may_not_take_the_webhook_listeners_port(tmp_path):
    from parser.core.errors import SettingsError
    from parser.settings.params import settings_from_dict
    hook = {"name": "hook", "protocol": "webhook", "path": "/in", "items": "items", "map": {"title": "t", "link": "l"}}
    with pytest.raises(SettingsError, match="STATUS_LISTEN: must not use the port of WEBHOOK_LISTEN"):
        settings_from_dict({"SOURCES": [hook], "WEBHOOK_LISTEN": "127.0.0.1:9000", "STATUS_LISTEN": "127.0.0.1:9000"},
                           tmp_path / "params.py")
    assert settings_from_dict({"STATUS_LISTEN": "127.0.0.1:9000"}, tmp_path / "params.py").status_listen \
        == ("127.0.0.1", 9000)


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install -y chromium; .ci/run installs it)")
    return path


def browse(binary: str, profile, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                           f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120)


def test_the_status_page_renders_its_table_and_plots_in_headless_chromium(server, project, tmp_path):
    binary = chromium()
    server.route("/a.xml", body=rss(numbered_items(1, 5)))
    server.route("/down.xml", status=500, body=b"oops", content_type="text/plain")
    proc, base = start_with_page(project, SOURCES=[
        {"name": "alpha", "url": server.url("/a.xml"), "interval": 3600},
        {"name": "down<b>", "url": server.url("/down.xml"), "interval": 3600}], FLUSH_INTERVAL=0.5, SEARCH=True)
    try:
        wait_for(lambda: len(project.rows()) == 5, "the first flush")
        dom = browse(binary, tmp_path / "profile", "--dump-dom", base + "/")
        assert dom.returncode == 0, dom.stderr[-2000:]
        searched = browse(binary, tmp_path / "profile", "--dump-dom", base + "/search?q=body+item")
        assert searched.returncode == 0, searched.stderr[-2000:]
        shot = tmp_path / "status-page.png"
        picture = browse(binary, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1100,900", base + "/")
        assert picture.returncode == 0, picture.stderr[-2000:]
    finally:
        assert stop(proc) == 0
    page = dom.stdout
    rows = re.findall(r"<tr class=\"([a-z-]+)\"><td>([^<]*)</td>", page)  # as the browser serialises it
    assert [name for _, name in rows] == ["down&lt;b&gt;", "alpha"]  # failing first; the name escaped
    assert rows[0][0] == "failing" and rows[1][0] == "ok"
    assert "HTTP 500 Internal Server Error" in page
    assert page.count("<svg") >= 5  # 3 plots and a sparkline per source
    assert page.count("<rect") >= 2  # bars: the new entries of this hour, the flush
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert '<form class="search" action="/search" method="get"' in page
    found = re.findall(r'<li><a href="(http://example.com/item/\d)">Item \d</a>', searched.stdout)
    assert len(found) == 5 and searched.stdout.count("<mark>") == 10  # "Body of item N": both words marked
