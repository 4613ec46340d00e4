"""Hostile and broken sources, all in one `--once` as a user would run it: each gives a clear line in
errors.log naming the source, the good sources are stored all the same, and the run ends in bounded
time and memory. The server is tests/server.py on 127.0.0.1. TIMEOUT and DEADLINE are short so the
run is quick: the point is that they apply, not their size."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.feeds import numbered_items, rss
from tests.process import free_port
from tests.server import LoopbackServer

MiB = 1 << 20
PEAK_RSS_LIMIT = 400 * MiB
HANG_LIMIT = 120  # seconds: a run still going by then hangs (it takes a few seconds)
SECRET_MARKER = "LOCAL-FILE-CONTENT-7f3a9c"  # in a local file that an XXE entity points at
SETTINGS = {"TIMEOUT": 2, "DEADLINE": 4, "PER_HOST": 64, "CONCURRENCY": 64, "FLUSH_INTERVAL": 3600}

# source name -> what its line in errors.log must say ({port}: the server's)
EXPECTED = {
    "billion-laughs": "feed is malformed",
    "xxe": "feed is malformed",
    "dtd-fetch": "feed is malformed",
    "gzip-bomb": "response over 10 MiB",
    "endless-body": "response over 10 MiB",
    "drip-body": "took longer than the 4 s deadline",
    "drip-headers": "took longer than the 4 s deadline",
    "never-answers": "read timed out after 2 s",
    "redirect-loop": "redirect loop at http://127.0.0.1:{port}/redirect-loop",
    "moved-301": "moved permanently to http://127.0.0.1:{port}/good-301-target",
    "moved-308": "moved permanently to http://127.0.0.1:{port}/good-308-target",
    "status-401": "HTTP 401 Unauthorized",
    "status-403": "HTTP 403 Forbidden",
    "status-404": "HTTP 404 Not Found",
    "status-410": "HTTP 410 Gone: the server says this address is gone for good; marked gone",
    "status-429": "HTTP 429 Too Many Requests",
    "status-503": "HTTP 503 Service Unavailable",
    "status-500": "HTTP 500 Internal Server Error",
    "html-page": "not a feed: text/html",
    "empty-body": "empty body",
    "truncated": "kept the 5 entries that parsed whole, dropped 1 incomplete",
    "invalid-utf8": "invalid UTF-8: 2 byte sequences replaced by U+FFFD",
    "charset-disagree": "the HTTP header says 'windows-1251', the document says 'utf-8'; read as utf-8",
    "dead-host": "connection refused by 127.0.0.1",
}


# -- the hostile bodies -----------------------------------------------------------------------------
def billion_laughs() -> bytes:
    entities = '<!ENTITY lol "lol">\n' + "".join(
        f'<!ENTITY lol{i} "{(f"&lol{i - 1};" if i > 1 else "&lol;") * 10}">\n' for i in range(1, 10))
    return (f'<?xml version="1.0"?>\n<!DOCTYPE rss [\n{entities}]>\n<rss version="2.0"><channel>'
            '<title>laughs</title><item><title>laughs &lol9;</title><link>http://laughs.example/1</link>'
            '<description>&lol9;</description></item></channel></rss>').encode()


def xxe(secret_path: Path) -> bytes:
    return (f'<?xml version="1.0"?>\n<!DOCTYPE rss [<!ENTITY xxe SYSTEM "{secret_path.as_uri()}">]>\n'
            '<rss version="2.0"><channel><title>xxe &xxe;</title><item><title>secret: &xxe;</title>'
            '<link>http://xxe.example/1</link><description>&xxe;</description></item></channel></rss>'
            ).encode()


def dtd_fetch(dtd_url: str) -> bytes:
    return (f'<?xml version="1.0"?>\n<!DOCTYPE rss SYSTEM "{dtd_url}" [<!ENTITY % remote SYSTEM "{dtd_url}">'
            ' %remote;]>\n<rss version="2.0"><channel><title>dtd</title><item><title>dtd &fromdtd;</title>'
            '<link>http://dtd.example/1</link></item></channel></rss>').encode()


def gzip_bomb(inflated: int = 4 << 30) -> bytes:
    """gzip members of 16 MiB of zeros, repeated: about 4 MiB on the wire that inflate to 4 GiB."""
    member = gzip.compress(b"\0" * (16 * MiB), compresslevel=9)
    return member * (inflated // (16 * MiB))


def truncated_feed() -> bytes:
    """Six items (105..100), cut inside the last one, in the middle of its link."""
    whole = rss(numbered_items(100, 6, host="truncated.example"))
    return whole[:whole.index(b"http://truncated.example/item/100") + 25]


def utf8_with_bad_bytes() -> bytes:
    body = rss([{"title": "Привет, мир", "link": "http://badutf8.example/1"},
                {"title": "Bad XX bytes здесь", "link": "http://badutf8.example/2"}])
    return body.replace(b"Bad XX", b"Bad \xff\xfe")


def drip_headers(h) -> None:
    """A status line, then one header byte every half second: every read gets a byte before TIMEOUT."""
    try:
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for _ in range(1200):
            h.wfile.write(b"X")
            h.wfile.flush()
            time.sleep(0.5)
    except OSError:
        pass
    h.close_connection = True


def hostile_routes(server: LoopbackServer, secret: Path) -> dict[str, dict]:
    """Route settings per case (tests/server.py Route fields)."""
    retry_date = format_datetime(datetime.now(UTC) + timedelta(hours=2), usegmt=True)
    return {
        "billion-laughs": {"body": billion_laughs()},
        "xxe": {"body": xxe(secret)},
        "dtd-fetch": {"body": dtd_fetch(server.url("/evil.dtd"))},
        "gzip-bomb": {"body": gzip_bomb(), "precompressed": True},
        "endless-body": {"endless": True},
        "drip-body": {"body": rss(numbered_items(1, 3, host="drip.example")), "drip": 1.0},
        "drip-headers": {"handler": drip_headers},
        "never-answers": {"hang": True},
        "redirect-loop": {"status": 302, "headers": {"Location": "/redirect-loop-2"}},
        "moved-301": {"status": 301, "headers": {"Location": "/good-301-target"}},
        "moved-308": {"status": 308, "headers": {"Location": "/good-308-target"}},
        "status-401": {"status": 401, "body": b"no"},
        "status-403": {"status": 403, "body": b"no"},
        "status-404": {"status": 404, "body": b"no"},
        "status-410": {"status": 410, "body": b"gone"},
        "status-429": {"status": 429, "headers": {"Retry-After": "3600"}},
        "status-503": {"status": 503, "headers": {"Retry-After": retry_date}},
        "status-500": {"status": 500, "body": b"oops"},
        "html-page": {"body": b"<!doctype html><html><body><p>Welcome</p></body></html>",
                      "content_type": "text/html; charset=utf-8"},
        "empty-body": {"body": b""},
        "truncated": {"body": truncated_feed()},
        "invalid-utf8": {"body": utf8_with_bad_bytes()},
        "charset-disagree": {"body": rss([{"title": "Заголовок", "link": "http://charset.example/1"}]),
                             "content_type": "text/xml; charset=windows-1251"},
    }


# -- running ----------------------------------------------------------------------------------------
def run_measured(project: Project, *args: str, timeout: float = HANG_LIMIT) -> dict:
    """Run the daemon; return its exit code, wall time and peak RSS (wait4's, of this child alone)."""
    with open(project.folder / "stderr.txt", "w") as err:
        proc = subprocess.Popen(project.command(*args), stdout=subprocess.DEVNULL, stderr=err,
                                cwd=project.folder)
        killer = threading.Timer(timeout, proc.kill)
        started = time.monotonic()
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        seconds = time.monotonic() - started
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    return {"code": code, "seconds": seconds, "peak": usage.ru_maxrss * 1024, "hung": code == -9,
            "stderr": (project.folder / "stderr.txt").read_text()}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """Serve every case and a good feed; run --once twice (the second shows Retry-After kept)."""
    folder = tmp_path_factory.mktemp("hostile")
    secret = folder / "secret.txt"
    secret.write_text(SECRET_MARKER)
    server = LoopbackServer().start()
    sources = []
    for name, route in hostile_routes(server, secret).items():
        server.route(f"/{name}", **route)
        sources.append({"name": name, "url": server.url(f"/{name}")})
    sources.append({"name": "dead-host", "url": f"http://127.0.0.1:{free_port()}/feed.xml"})
    server.route("/redirect-loop-2", status=302, headers={"Location": "/redirect-loop"})
    for target in ("good-301-target", "good-308-target"):
        server.route(f"/{target}", body=rss(numbered_items(1, 2, host=f"{target}.example")))
    server.route("/evil.dtd", body=b'<!ENTITY fromdtd "DTD WAS FETCHED">', content_type="application/xml-dtd")
    server.route("/good", body=rss(numbered_items(1, 3, host="good.example")))
    sources.insert(len(sources) // 2, {"name": "good", "url": server.url("/good")})
    project = Project(folder)
    project.write_params(SOURCES=sources, **SETTINGS)
    try:
        first = run_measured(project, "--once")
        hits_first = dict(server.hits)
        second = run_measured(project, "--once")
        hits_second = dict(server.hits)
    finally:
        server.stop()
    print(f"\nhostile --once over {len(sources)} sources: {first['seconds']:.1f} s, "
          f"peak RSS {first['peak'] / MiB:.0f} MiB (second run {second['seconds']:.1f} s, "
          f"{second['peak'] / MiB:.0f} MiB)")
    return {"project": project, "port": server.port, "first": first, "second": second,
            "hits_first": hits_first, "hits_second": hits_second, "sources": sources}


def error_lines(project: Project, source: str) -> list[str]:
    """errors.log lines of one source (the columns are time, source, address, description)."""
    return [line for line in project.log("errors.log").splitlines() if line.split("  ")[1:2] == [source]]


# -- the assertions ---------------------------------------------------------------------------------
def test_every_case_is_served(hostile):
    assert {s["name"] for s in hostile["sources"]} == {*EXPECTED, "good"}


def test_the_hostile_once_ends_within_its_limits(hostile):
    for run in (hostile["first"], hostile["second"]):
        assert not run["hung"], f"the --once over the hostile sources still ran after {HANG_LIMIT} s"
        assert run["code"] == 0, run["stderr"]
        assert run["peak"] < PEAK_RSS_LIMIT, f"peak RSS {run['peak'] / MiB:.0f} MiB"
    assert hostile["project"].log("critical.log") == ""


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_case_gives_a_clear_line_naming_the_source(hostile, name):
    expected = EXPECTED[name].format(port=hostile["port"])
    lines = error_lines(hostile["project"], name)
    assert any(expected in line for line in lines), f"no {expected!r} among {lines}"
    assert all("Traceback" not in line for line in lines)


def test_good_sources_are_stored_next_to_the_hostile_ones(hostile):
    links = {r["link"] for r in hostile["project"].rows()}
    assert {f"http://good.example/item/{n}" for n in (1, 2, 3)} <= links
    assert {f"http://{host}.example/item/{n}" for host in ("good-301-target", "good-308-target")
            for n in (1, 2)} <= links
    assert hostile["project"].polls("good")[0][1] == 3  # the first run: its 3 entries new


def test_no_entity_is_expanded_and_no_local_file_or_dtd_is_read(hostile):
    project = hostile["project"]
    rows = {r["link"]: r for r in project.rows()}
    everything = json.dumps(project.rows(), ensure_ascii=False)
    assert SECRET_MARKER not in everything
    assert SECRET_MARKER not in (project.staging / "staging.csv").read_text(encoding="utf-8")
    assert "DTD WAS FETCHED" not in everything
    assert hostile["hits_first"].get("/evil.dtd") is None and hostile["hits_second"].get("/evil.dtd") is None
    assert "lollollol" not in everything
    assert len(rows["http://laughs.example/1"]["title"]) < 100  # the entity stays a reference


def test_retry_after_is_honoured_by_the_next_run(hostile):
    first, second = hostile["hits_first"], hostile["hits_second"]
    for path in ("/status-429", "/status-503"):
        assert first[path] == 1 and second[path] == 1, f"{path} polled again before its Retry-After"
    assert second["/status-500"] == 2  # a plain error is asked again
    log = hostile["project"].log()
    assert "status-429  skipped: the server asked to wait" in log
    assert "status-503  skipped: the server asked to wait" in log


def test_a_gone_source_is_asked_again_only_hours_later(hostile):
    state = json.loads((hostile["project"].staging / "state.json").read_text())
    gone, failed = state["status-410"], state["status-500"]
    assert gone["next_due"] - time.time() > 3 * 3600
    assert failed["next_due"] - time.time() < 3 * 3600


def test_a_truncated_feed_keeps_its_whole_entries_only(hostile):
    links = sorted(r["link"] for r in hostile["project"].rows() if "truncated.example" in r["link"])
    assert links == [f"http://truncated.example/item/{n}" for n in range(101, 106)]


def test_bad_bytes_and_disagreeing_charsets_keep_the_right_characters(hostile):
    titles = {r["link"]: r["title"] for r in hostile["project"].rows()}
    assert titles["http://badutf8.example/1"] == "Привет, мир"
    assert titles["http://badutf8.example/2"] == "Bad \ufffd\ufffd bytes здесь"
    assert titles["http://charset.example/1"] == "Заголовок"


def test_a_permanent_redirect_is_logged_and_a_temporary_one_is_not(server, project):
    server.route("/old", status=302, headers={"Location": "/new"})
    server.route("/new", body=rss(numbered_items(1, 1, host="temp.example")))
    project.write_params(SOURCES=[{"name": "temp", "url": server.url("/old")}])
    assert project.run("--once").returncode == 0
    assert [r["link"] for r in project.rows()] == ["http://temp.example/item/1"]
    assert project.log("errors.log") == ""
    assert "moved" not in project.log()
