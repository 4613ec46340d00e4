"""The read-only status page on STATUS_LISTEN: `/` (the status table and small plots, drawn here as
inline SVG: no script, no CDN), `/search` (the stored entries, as the `search` command finds them),
`/metrics` (Prometheus text format) and `/healthz`.

Every answer is built from the same files `run_daemon.py status` reads (parser/operate/status.py) plus the
main loop's Health value, so the page's threads never touch the daemon's working objects.
"""
from __future__ import annotations

import html
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from db.search_index import Found, Query

from ..core.errors import SettingsError, StorageError
from ..core.runinfo import Health
from ..settings.params import Settings
from ..sources.state import HISTORY_HOURS
from .search import OFF, find
from .status import LINK_STATUSES, PROTOCOL_SHORT, RowCounter, collect, epoch_of, format_text
from .status_view import StatusView

log = logging.getLogger("parser")
MAX_CLIENTS = 8              # connections served at once; one more is closed at once
MAX_SOURCE_SERIES = 1000     # per-source metrics only up to this many sources (Prometheus cardinality)
PLOT_HOURS = HISTORY_HOURS
SEARCH_LIMIT = 50            # entries /search shows


class _BoundedServer(ThreadingHTTPServer):
    """A thread per connection, but at most MAX_CLIENTS of them: a flood costs closed connections,
    not threads."""
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type) -> None:
        self.slots = threading.BoundedSemaphore(MAX_CLIENTS)
        super().__init__(address, handler)

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class StatusPage:
    def __init__(self, settings: Settings, health: Callable[[], Health], *, clock: Callable[[], float] = time.time):
        self.settings = settings
        self.health = health
        self.clock = clock
        self.counter = RowCounter()
        self._collect_lock = threading.Lock()  # one collect at a time: the row counter's cache is shared
        # A loop that has not gone round in this long is stuck: a cycle waits DEADLINE at most, and a
        # flush or a job slice is seconds.
        self.stale_after = 2 * settings.deadline + 60
        page = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "parser-status"
            sys_version = ""
            timeout = 10  # a client that stalls cannot hold a thread (StreamRequestHandler.setup applies it)

            def setup(self):
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 (http.server's name)
                page._serve(self)

            def do_HEAD(self):  # noqa: N802
                page._serve(self)

        assert settings.status_listen is not None, "the page is opened with STATUS_LISTEN only"
        host, port = settings.status_listen
        try:
            self.httpd = _BoundedServer((host, port), Handler)
        except OSError as exc:
            raise SettingsError(f"STATUS_LISTEN: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        bound = self.httpd.server_address  # as the socket says it: its host a str already (AF_INET, AF_INET6)
        self.host, self.port = str(bound[0]), bound[1]
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> StatusPage:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="status-page", daemon=True)
        self._thread.start()
        log.info("status page on %s (also /metrics and /healthz)", self.base_url)
        return self

    def close(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
        self.httpd.server_close()

    # -- answers --------------------------------------------------------------------------------
    def view(self) -> StatusView:
        with self._collect_lock:
            return collect(self.settings, self.clock(), self.counter)

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?", 1)[0]
        try:
            if path == "/":
                page = render_page(self.view(), search=self.settings.search)
                status, ctype, body = 200, "text/html; charset=utf-8", page.encode()
            elif path == "/search":
                status, text = self.search(h.path)
                ctype, body = "text/html; charset=utf-8", text.encode()
            elif path == "/metrics":
                status, ctype, body = 200, CONTENT_TYPE_LATEST, render_metrics(self.view())
            elif path == "/healthz":
                ok, reason = self.healthy()
                status, ctype, body = (200 if ok else 503), "text/plain; charset=utf-8", (reason + "\n").encode()
            elif path in ("/status.json", "/status.txt"):
                view = self.view()
                text = json.dumps(view.as_json(), indent=1) if path.endswith("json") else format_text(view)
                status, ctype = 200, "application/json" if path.endswith("json") else "text/plain; charset=utf-8"
                body = text.encode()
            else:
                status, ctype, body = 404, "text/plain; charset=utf-8", b"not here: try /, /metrics or /healthz\n"
        except Exception as exc:  # a bug here must not take the page down, nor the daemon
            log.exception("status page error at %s", path)
            status, ctype, body = 500, "text/plain; charset=utf-8", f"internal error: {exc!r}\n".encode()
        try:
            h.send_response(status)
            h.send_header("Content-Type", ctype)
            h.send_header("Content-Length", str(len(body)))
            h.send_header("Cache-Control", "no-store")
            h.end_headers()
            if h.command != "HEAD":
                h.wfile.write(body)
        except OSError:
            h.close_connection = True

    def search(self, target: str) -> tuple[int, str]:
        """/search?q=WORDS[&source=NAME]: the entries the `search` command finds, as a page."""
        asked = parse_qs(urlsplit(target).query)
        words = (asked.get("q") or [""])[0].strip()
        sources = tuple(name for name in asked.get("source", []) if name)
        if not self.settings.search:
            return 404, render_search(words, None, OFF)
        if not words:
            return 200, render_search("", None, None)
        try:
            return 200, render_search(words, find(self.settings.db_url, Query(words, sources, limit=SEARCH_LIMIT)),
                                      None)
        except ValueError as exc:
            return 400, render_search(words, None, str(exc))
        except StorageError as exc:
            return 503, render_search(words, None, str(exc))

    def healthy(self) -> tuple[bool, str]:
        health = self.health()
        quiet = time.monotonic() - health.tick
        if quiet > self.stale_after:
            return False, f"the main loop has not gone round for {quiet:.0f} s"
        if not health.flush_ok:
            return False, health.reason or "the last flush failed"
        return True, "ok: the loop runs and the last flush succeeded"


def open_status_page(settings: Settings, health: Callable[[], Health]) -> StatusPage:
    return StatusPage(settings, health).start()


# -- /metrics --------------------------------------------------------------------------------------
# The counters /metrics shows: (metric, whose totals: the daemon's or each source's, key there, help text).
COUNTERS = (
    ("parser_polls", "daemon", "polls", "Source polls since the daemon started"),
    ("parser_poll_errors", "daemon", "errors", "Polls that failed since the daemon started"),
    ("parser_not_modified", "daemon", "not_modified", "Polls answered 304 Not Modified"),
    ("parser_new_entries", "daemon", "new", "New records staged from polls"),
    ("parser_duplicates", "daemon", "duplicates", "Records dropped as already seen"),
    ("parser_fetch_bytes", "daemon", "fetch_bytes", "Bytes of the answers to polls (after decompression)"),
    ("parser_flushes", "daemon", "flushes", "Flushes of the staging CSVs into the database"),
    ("parser_flush_failures", "daemon", "flush_failures", "Flushes that failed (the rows stay staged)"),
    ("parser_flush_duration_seconds", "daemon", "flush_seconds", "Time spent flushing"),
    ("parser_rows_written", "daemon", "rows_written", "Rows written into the items table by flushes"),
    ("parser_rows_updated", "daemon", "rows_updated", "Stored rows updated by flushes (edited at their source)"),
    ("parser_versions_written", "daemon", "versions_written",
     "Earlier versions of updated rows kept in <table>_versions by flushes (UPDATES history)"),
    ("parser_source_polls", "source", "polls", "Polls of a source (kept across restarts in state.json)"),
    ("parser_source_errors", "source", "errors", "Failed polls of a source"),
    ("parser_source_new_entries", "source", "new", "New records staged from a source"),
    ("parser_source_duplicates", "source", "duplicates", "Records of a source dropped as already seen"),
    ("parser_source_blocked", "source", "blocked", "Records of a source dropped by its keep/block rules"),
    ("parser_source_fetch_bytes", "source", "bytes", "Bytes fetched from a source"),
)


def _counters(whose: str) -> list[tuple[str, str, str]]:
    return [(name, key, doc) for name, owner, key, doc in COUNTERS if owner == whose]


class _ViewCollector:
    """prometheus_client asks collect() for metric families; we build them from one status view."""

    def __init__(self, view: StatusView):
        self.view = view

    def collect(self) -> Iterable:
        v = self.view
        for name, key, doc in _counters("daemon"):
            yield CounterMetricFamily(name, doc, value=float(v.totals.get(key, 0)))
        yield GaugeMetricFamily("parser_up", "1 while the daemon runs", value=1.0 if v.daemon.running else 0.0)
        started = epoch_of(v.daemon.started)
        if started:
            yield GaugeMetricFamily("parser_start_time_seconds", "When the daemon started (epoch)", value=started)
        flush = v.last_flush
        if flush:
            yield GaugeMetricFamily("parser_last_flush_success", "1 if the last flush succeeded",
                                    value=1.0 if flush["ok"] else 0.0)
            yield GaugeMetricFamily("parser_last_flush_duration_seconds", "Duration of the last flush",
                                    value=float(flush["seconds"]))
            yield GaugeMetricFamily("parser_last_flush_timestamp_seconds", "When the last flush ended (epoch)",
                                    value=epoch_of(flush["at"]) or 0.0)
        staged = GaugeMetricFamily("parser_staged_rows", "Rows staged and not yet in the database", labels=["table"])
        for t in v.staged:
            staged.add_metric([t.table], float(t.rows))
        yield staged
        sources = v.sources[:MAX_SOURCE_SERIES]
        for name, key, doc in _counters("source"):
            family = CounterMetricFamily(name, doc, labels=["source"])
            for s in sources:
                family.add_metric([s.name], float(s.totals.get(key, 0)))
            yield family
        failures = GaugeMetricFamily("parser_source_failures", "Failures in a row", labels=["source"])
        dead = GaugeMetricFamily("parser_source_dead", "1 when the source is dead or gone", labels=["source"])
        last_ok = GaugeMetricFamily("parser_source_last_success_timestamp_seconds", "Last successful poll (epoch)",
                                    labels=["source"])
        for s in sources:
            failures.add_metric([s.name], float(s.failures))
            dead.add_metric([s.name], 1.0 if s.dead else 0.0)
            if s.last_success:
                last_ok.add_metric([s.name], epoch_of(s.last_success) or 0.0)
        yield from (failures, dead, last_ok)
        links = GaugeMetricFamily("parser_job_links", "Links of a two-pass job by status", labels=["job", "status"])
        for job in v.jobs:
            for status in LINK_STATUSES:
                links.add_metric([job.name, status], float(job.links[status]))
        yield links
        yield from _coverage_families(v)


def _coverage_families(v: StatusView) -> Iterable:
    """Each field's share of a feed's or a job's last pass, and its usual share (parser/core/coverage.py)."""
    families = {kind: (GaugeMetricFamily(f"parser{infix}_field_coverage",
                                         f"Share of the {what}'s records in its last pass that had the field",
                                         labels=[kind, "field"]),
                       GaugeMetricFamily(f"parser{infix}_field_coverage_usual",
                                         f"Median share of the field over the {what}'s recent passes",
                                         labels=[kind, "field"]))
                for kind, infix, what in (("source", "", "feed"), ("job", "_job", "job"))}
    for c in v.coverage[:MAX_SOURCE_SERIES]:
        now, usual = families[c.kind]
        for name, share in c.shares.items():
            now.add_metric([c.name, name], float(share))
            if c.usual.get(name) is not None:
                usual.add_metric([c.name, name], float(c.usual[name] or 0))
    for pair in families.values():
        yield from pair


def render_metrics(view: StatusView) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_ViewCollector(view))
    return generate_latest(registry)


# -- / ---------------------------------------------------------------------------------------------
STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;max-width:1100px}
h1{font-size:1.3em;margin:0 0 .3em} h2{font-size:1.05em;margin:1.4em 0 .4em}
table{border-collapse:collapse;width:100%} th,td{padding:3px 6px;text-align:left;border-bottom:1px solid #e4e4e4}
th{background:#f4f4f4;font-weight:600} td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.dead td,tr.gone td{background:#fde2e2} tr.failing td,tr.held td{background:#fff3d6}
tr.disabled td{color:#999} .meta{color:#555} .err{color:#a00;font-size:.9em}
form.search{margin:.6em 0} form.search input{width:24em;padding:3px} ol.found li{margin:0 0 .8em}
ol.found p{margin:.2em 0} mark{background:#fff0a8}
.plots{display:flex;flex-wrap:wrap;gap:1.2em} figure{margin:0} figcaption{font-size:.9em;color:#555}
"""


def search_form(words: str = "") -> str:
    return ("<form class=search action=/search method=get role=search><input type=search name=q "
            f"value=\"{html.escape(words)}\" placeholder='words in the stored entries' aria-label=search> "
            "<button type=submit>Search</button></form>")


def render_search(words: str, found: Sequence[Found] | None, problem: str | None) -> str:
    """The /search page: the form, then what was found (or why nothing could be): every stored value
    escaped, as a feed writes titles and links; a link only when it is http(s)."""
    e = html.escape
    items = []
    for row in found or ():
        title = e(row.title or "(no title)")
        heading = f"<a href=\"{e(row.link)}\">{title}</a>" if row.link and _web_link(row.link) else title
        snippet = "".join(f"<mark>{e(text)}</mark>" if matched else e(text) for text, matched in row.pieces())
        items.append(f"<li>{heading} <span class=meta>{e(row.source or '-')} · {e(row.published or '-')}</span>"
                     f"<p>{snippet}</p></li>")
    if problem is not None:
        said = f"<p class=err>{e(problem)}</p>"
    elif found is None:
        said = ""
    else:
        said = f"<p class=meta>{len(items)} found{', best first' if items else ''}</p>"
    title = f"parser search: {words}" if words else "parser search"
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width,initial-scale=1'>"
            f"<title>{e(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{e(title)}</h1>{search_form(words)}{said}"
            + (f"<ol class=found id=found>{''.join(items)}</ol>" if items else "")
            + "<p class=meta><a href=/>the status page</a></p></body></html>")


def _web_link(link: str) -> bool:
    """An address a page may link to: http(s) only (a feed may write `javascript:` or `data:` anywhere)."""
    try:
        return urlsplit(link.strip()).scheme.lower() in ("http", "https")
    except ValueError:
        return False


def render_page(view: StatusView, *, search: bool = False) -> str:
    e = html.escape
    d = view.daemon
    now = epoch_of(view.now) or 0.0
    # The text view's summary lines (daemon, last flush, staged rows): the same words as the terminal.
    summary = format_text(view).split("\n\n", 1)[0].split("\n")
    head = [f"<p class=meta>{e(line)}</p>" for line in summary]
    rows = []
    hours = _hour_index(now, PLOT_HOURS)
    series = {s.name: _hourly_series(s.hourly, hours) for s in view.sources}
    for s in view.sources:
        spark = sparkline([n for n, _ in series[s.name][-72:]], 120, 18)
        rows.append(
            f"<tr class='{e(s.state_kind.replace(' ', '-'))}'><td>{e(s.name)}</td>"
            f"<td>{e(PROTOCOL_SHORT.get(s.protocol, s.protocol))}</td><td>{e(s.state)}</td>"
            f"<td>{_when(s.last_poll)}</td><td>{_when(s.last_success)}</td><td>{_when(s.last_new)}</td>"
            f"<td class=n>{s.new_24h}</td><td>{_when(s.next_poll)}</td><td>{spark}</td></tr>")
        if s.failures and s.last_outcome:
            rows.append(f"<tr class='{e(s.state_kind)} detail'><td></td><td colspan=8 class=err>"
                        f"{e(s.last_outcome)}</td></tr>")
    jobs = "".join(f"<tr><td>{e(j.name)}</td>" + "".join(f"<td class=n>{j.links[k]}</td>" for k in LINK_STATUSES)
                   + "</tr>" for j in view.jobs)
    new_total = [0] * PLOT_HOURS
    err_total = [0] * PLOT_HOURS
    for s in view.sources:
        for i, (n, errs) in enumerate(series[s.name]):
            new_total[i] += n
            err_total[i] += errs
    flushes = view.flushes[-100:]
    plots = [
        ("New entries per hour, all sources, last 7 days", bar_chart(new_total, "#2a7ab8")),
        ("Errors per hour, last 7 days", bar_chart(err_total, "#c0392b")),
        ("Rows per flush, last 100 flushes (red: failed)",
         bar_chart([f[1] for f in flushes], "#3a9d5d", marks=[not f[3] for f in flushes], slots=100)),
    ]
    title = "parser status" + (f" — pid {d.pid}" if d.running else " — daemon not running")
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        "<meta name=viewport content='width=device-width,initial-scale=1'>"
        f"<meta http-equiv=refresh content=60><title>{e(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{e(title)}</h1>{''.join(head)}<p class=meta>params: {e(view.params)}; as of {e(view.now)}</p>"
        + (search_form() if search else "") +
        "<h2>Sources (worst first)</h2><table id=sources><thead><tr><th>source</th><th>proto</th><th>state</th>"
        "<th>polled</th><th>last ok</th><th>last new</th><th>24 h</th><th>next poll</th>"
        "<th>new/hour, 3 days</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
        + ("<h2>Two-pass jobs: links</h2><table id=jobs><thead><tr><th>job</th>"
           + "".join(f"<th>{k}</th>" for k in LINK_STATUSES) + "</tr></thead><tbody>" + jobs + "</tbody></table>"
           if view.jobs else "")
        + _coverage_table(view)
        + "<h2>History</h2><div class=plots>"
        + "".join(f"<figure>{svg}<figcaption>{e(cap)}</figcaption></figure>" for cap, svg in plots)
        + "</div><p class=meta>Also: <a href=/metrics>/metrics</a>, <a href=/healthz>/healthz</a>, "
          "<a href=/status.json>/status.json</a>. This page reloads every minute.</p></body></html>")


def _coverage_table(view: StatusView) -> str:
    """Each feed's and job's field coverage at its last pass; a field fallen below half its usual share in red."""
    if not view.coverage:
        return ""
    e = html.escape
    rows = []
    for c in view.coverage:
        cells = []
        for name, share in c.shares.items():
            usual = c.usual.get(name)
            said = f"{e(name)} {share:.0%}" + (f" <span class=meta>(usually {usual:.0%})</span>"
                                               if usual is not None else "")
            cells.append(f"<span class=err>{said}</span>" if name in c.low else said)
        rows.append(f"<tr><td>{e(c.kind)}</td><td>{e(c.name)}</td><td class=n>{c.records}</td>"
                    f"<td>{' · '.join(cells)}</td></tr>")
    return ("<h2>Field coverage, last pass</h2><table id=coverage><thead><tr><th>kind</th><th>name</th>"
            "<th>records</th><th>share of records with each field</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def _hour_index(now: float, hours: int) -> dict[str, int]:
    """The last `hours` hours as state.json writes them ("YYYY-MM-DDTHH"), oldest first -> position."""
    last = int(now // 3600) * 3600
    return {datetime.fromtimestamp(last - k * 3600, UTC).strftime("%Y-%m-%dT%H"): hours - 1 - k for k in range(hours)}


def _hourly_series(hourly: Sequence[Sequence], index: dict[str, int]) -> list[tuple[int, int]]:
    """(new, errors) for each hour of `index`, oldest first, from a source's sparse [hour, new, errors]."""
    series = [(0, 0)] * len(index)
    for hour, new, errors in hourly:
        i = index.get(hour)
        if i is not None:
            series[i] = (series[i][0] + int(new), series[i][1] + int(errors))
    return series


def bar_chart(values: Sequence[float], color: str, *, width: int = 300, height: int = 110,
              marks: list[bool] | None = None, slots: int = 0) -> str:
    """An SVG bar chart with its maximum written on the axis; marked bars are drawn red. With `slots`,
    fewer values keep their width and sit at the right (the newest end)."""
    top = max(values, default=0) or 1
    plot_h = height - 16
    count = max(len(values), slots, 1)
    offset = count - len(values)
    step = (width - 30) / count
    bars = []
    for i, value in enumerate(values):
        if not value and not (marks and marks[i]):
            continue
        h = max(plot_h * value / top, 1.5)
        fill = "#c0392b" if marks and marks[i] else color
        bars.append(f"<rect x='{30 + (offset + i) * step:.1f}' y='{plot_h - h + 4:.1f}' "
                    f"width='{max(step - 0.6, 0.8):.1f}' height='{h:.1f}' fill='{fill}'/>")
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
            f"viewBox='0 0 {width} {height}' role=img>"
            f"<line x1='29' y1='4' x2='29' y2='{plot_h + 4}' stroke='#999'/>"
            f"<line x1='29' y1='{plot_h + 4}' x2='{width}' y2='{plot_h + 4}' stroke='#999'/>"
            f"<text x='26' y='12' font-size='10' text-anchor='end' fill='#555'>{_short(top)}</text>"
            f"<text x='26' y='{plot_h + 4}' font-size='10' text-anchor='end' fill='#555'>0</text>"
            + "".join(bars) + "</svg>")


def sparkline(values: list[float], width: int, height: int) -> str:
    top = max(values, default=0)
    if not top:
        return f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' class=spark></svg>"
    step = width / max(len(values) - 1, 1)
    points = " ".join(f"{i * step:.1f},{height - 1 - (height - 2) * v / top:.1f}" for i, v in enumerate(values))
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' class=spark>"
            f"<polyline points='{points}' fill='none' stroke='#2a7ab8' stroke-width='1.2'/></svg>")


def _short(n: float) -> str:
    return f"{n / 1000:.1f}k" if n >= 10000 else f"{n:g}"


def _when(value: str | None) -> str:
    if not value:
        return "-"
    return f"<time datetime='{html.escape(value)}'>{html.escape(value[5:16].replace('T', ' '))}</time>"
