"""The operator's view of a project: `run_daemon.py status`, and the status page's table.

collect() reads what the daemon leaves in STAGING_DIR (state.json, daemon.json, daemon.lock, the
staging CSVs and the jobs' link files) and returns one StatusView (status_view.py); it never writes and
never takes the daemon's lock, so it runs beside a working daemon. format_text() lays that view out for
an 80-column terminal, worst sources first.
"""
from __future__ import annotations

import hashlib
import json
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from linkgen.linkfile import LinkFile

from ..core.coverage import numbers
from ..core.dates import iso
from ..core.errors import StorageError, printable
from ..core.runinfo import daemon_status_path, load_run_info
from ..core.setting_values import duration_text
from ..core.urls import redact_url
from ..jobs.job_files import job_folder
from ..pipeline.hash_window import marks_path, read_marks, size_text
from ..pipeline.staging import batch_files, count_rows
from ..settings.params import Settings, Source
from ..sources.protocols import PROTOCOLS, protocol_of
from ..sources.state import SourceState, for_source, read_states
from .control import daemon_pid
from .status_view import (
    DaemonStatus,
    FieldCoverage,
    HashesStatus,
    HashFile,
    JobStatus,
    LastFlush,
    SourceStatus,
    StateDamage,
    StateFileStatus,
    StatusView,
    TableStaged,
)

LINK_STATUSES = ("pending", "done", "retry", "refused", "gone", "dead")
# Worst first: the order of the table, and of the states a source can be in.
RANK = {"dead": 0, "gone": 0, "held": 1, "failing": 2, "never polled": 3, "304": 4, "ok": 5, "disabled": 6}
PROTOCOL_SHORT = {p.name: p.short for p in PROTOCOLS.values()}


class RowCounter:
    """Rows of staging CSVs, counted with the csv module (a field can hold newlines, so lines are no
    measure), and remembered per file size and time so the status page does not re-read a big CSV
    that did not change."""

    def __init__(self) -> None:
        self._cache: dict[Path, tuple[tuple[int, int, int], int]] = {}

    def rows(self, path: Path) -> int:
        try:
            st = path.stat()
        except OSError:
            return 0
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._cache.get(path)
        if cached and cached[0] == key:
            return cached[1]
        try:
            count = count_rows(path)
        except (OSError, ValueError):  # vanished mid-read (a flush renamed it) or unreadable: next time
            return 0
        self._cache[path] = (key, count)
        return count

    def table(self, table: str, staging_csv: Path) -> TableStaged:
        """Rows waiting for `table`: the staging CSV and the batches of flushes not yet committed."""
        batches, _ = batch_files(staging_csv)  # a look-alike (a pasted copy) is not loaded, so not waiting
        live = {staging_csv, *batches}
        for gone in [p for p in self._cache if p.parent == staging_csv.parent and p not in live]:
            del self._cache[gone]
        return TableStaged(table, sum(self.rows(p) for p in [*batches, staging_csv]), len(batches))


def collect(settings: Settings, now: float, counter: RowCounter | None = None) -> StatusView:
    """Everything the status view shows (times in ISO 8601 UTC)."""
    counter = counter or RowCounter()
    staging = settings.staging_dir
    states, damage, group_links = source_states(settings, now)
    info = load_run_info(daemon_status_path(staging)) or {}
    pid = daemon_pid(staging)
    running = pid is not None and info.get("pid") == pid and bool(info.get("running", True))
    started = epoch_of(info.get("started"))
    sources = [_source_view(s, states.get(s.name), settings, now) for s in settings.sources]
    sources.sort(key=lambda v: (RANK[v.state_kind], -v.failures, v.name))
    tables = [counter.table("items", staging / "staging.csv")]
    jobs = []
    for job in settings.link_jobs:
        folder = job_folder(staging, job.name)
        tables.append(counter.table(job.name, folder / "staging.csv"))
        counts = group_links[job.name] if group_links is not None else \
            LinkFile(folder, job.name, read_only=True).counts()
        jobs.append(JobStatus(job.name, job.enabled, {k: counts.get(k, 0) for k in LINK_STATUSES}))
    daemon = DaemonStatus(running=running, pid=pid if running else info.get("pid"), started=info.get("started"),
                          uptime_seconds=round(now - started) if running and started else None,
                          updated=info.get("updated"), status_page=info.get("status_listen") if running else None)
    last_flush: LastFlush | None = info.get("last_flush")
    return StatusView(now=iso(now), params=str(settings.params_path), daemon=daemon, last_flush=last_flush,
                      flushes=info.get("flushes", []), totals=info.get("totals", {}), staged=tables,
                      hashes=_hashes_view(settings, now),
                      state_file=_state_file_view(staging / "state.json", damage, running=running),
                      sources=sources, jobs=jobs, coverage=coverage_view(settings, info.get("coverage")))


def coverage_view(settings: Settings, saved: object) -> list[FieldCoverage]:
    """daemon.json's field coverage of the sources and jobs in the settings (one taken out is not shown)."""
    if not isinstance(saved, dict):
        return []
    keys = [("source", s.name) for s in settings.sources] + [("job", j.name) for j in settings.link_jobs]
    view = []
    for kind, name in keys:
        entry = saved.get(f"{kind}/{name}")
        if not isinstance(entry, dict) or not isinstance(entry.get("shares"), dict):
            continue
        shares, usual = numbers(entry["shares"]), numbers(entry.get("usual"))
        records, low = entry.get("records"), entry.get("low")
        view.append(FieldCoverage(kind, name, records if isinstance(records, int) else 0, shares,
                                  {f: usual.get(f) for f in shares},
                                  [f for f in low if isinstance(f, str)] if isinstance(low, list) else []))
    return view


def source_states(settings: Settings, now: float) -> tuple[dict[str, SourceState], list[tuple[str | None, str]],
                                                          dict[str, dict[str, int]] | None]:
    """The sources' states as the daemon keeps them, and what a hand edit damaged in state.json
    (read_states: (source, what), or (None, what) for a file read as empty); with SHARED = True the
    states are the group's, from the shared database when it answers, and the third item is each
    job's link counts from the group (None: read the link files)."""
    states, damage = read_states(settings.staging_dir / "state.json")
    if settings.shared:  # the group's view, from the shared database (parser/group/shared.py)
        from ..group.shared import group_view  # imported on first use: SHARED only (psycopg: 0.2 s of `status`)
        try:
            group_states, links = group_view(settings, now)
            return group_states, damage, links
        except StorageError:
            pass  # this machine's files, then
    return states, damage, None


def _state_file_view(path: Path, damage: list[tuple[str | None, str]], *, running: bool) -> StateFileStatus | None:
    """state.json's damage (a hand edit, a disk error), with what the daemon does about it; None when
    it is whole. Without this a damaged file shows every source as 'not polled yet' and says nothing."""
    if not damage:
        return None
    whole = any(name is None for name, _ in damage)
    if running:  # it read the file at its start and never again; its save replaces the file whole
        action = "the running daemon does not read it again: it writes the file anew, from what it holds, " \
                 "after its next poll and at its stop"
    elif whole:
        action = (f"the next start moves it aside to {path.name}.bad, and every source starts afresh "
                  "(validators, failures, history); to keep them, mend it before starting")
    else:
        action = "the next start resets what is damaged (a line each in errors.log) and keeps the rest"
    return StateFileStatus(str(path), whole, [StateDamage(name, what) for name, what in damage], action)


def _hashes_view(settings: Settings, now: float) -> HashesStatus:
    """Each table's hash file (DEDUP = "hashfile"): its size, hashes, and span, from the oldest mark
    (parser/pipeline/hash_window.py: when the oldest line was written, at the latest) to now; and the window."""
    window = settings.unique_window
    files: list[HashFile] = []
    if settings.dedup == "hashfile":
        files = [_hash_file(table, folder / "hashes.txt", settings.hash, now) for table, folder in
                 [("items", settings.staging_dir)] + [(j.name, job_folder(settings.staging_dir, j.name))
                                                      for j in settings.link_jobs]]
    return HashesStatus(duration_text(window) if window else None, window, files)


def _hash_file(table: str, path: Path, algorithm: str, now: float) -> HashFile:
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    marks = read_marks(marks_path(path)) if size else []
    since = marks[0].at if marks else None
    hashes = size // (hashlib.new(algorithm).digest_size * 2 + 1)
    return HashFile(table, str(path), size, hashes, iso(since) if since else None,
                    round(max(now - since, 0)) if since else None)


def _source_view(source: Source, state: SourceState | None, settings: Settings, now: float) -> SourceStatus:
    state = for_source(state, source.url)
    if state is None:
        state = SourceState(url=source.url)  # the daemon drops a state whose address changed, too
    kind, label = _state_of(source, state, settings, now)
    next_poll = None  # a webhook is never polled; a disabled source is not now
    if protocol_of(source).polled and kind != "disabled":
        next_poll = iso(max(state.next_due, state.not_before, 0.0)) if state.last_poll else None
    since = datetime.fromtimestamp(now - 24 * 3600, UTC).strftime("%Y-%m-%dT%H")
    return SourceStatus(
        name=source.name, protocol=source.protocol, tags=list(source.tags), url=redact_url(source.url),
        state=label, state_kind=kind, failures=state.failures, dead=kind in ("dead", "gone"),
        last_status=state.last_status, last_outcome=state.last_outcome, last_poll=state.last_poll,
        last_success=state.last_success, last_new=state.last_new,
        new_24h=sum(h[1] for h in state.hourly if h[0] >= since), next_poll=next_poll,
        held_until=iso(state.not_before) if state.not_before > now else None,
        hourly=state.hourly, totals=state.totals)


def _state_of(source: Source, state: SourceState, settings: Settings, now: float) -> tuple[str, str]:
    """(kind, label): the kind sorts and colours, the label is what a person reads."""
    if not source.enabled:
        return "disabled", "disabled"
    if state.failures and state.last_status == 410:
        return "gone", f"gone ({state.failures})"
    if state.dead or state.failures >= settings.dead_after:
        return "dead", f"dead ({state.failures})"
    if state.not_before > now:
        return "held", f"held to {iso(state.not_before)[11:16]}"
    if state.failures:
        return "failing", f"failing {state.failures}"
    if state.last_poll is None:
        return "never polled", "not polled yet" if protocol_of(source).polled else "push"
    if state.last_status == 304:
        return "304", "ok, 304"
    return "ok", "ok"


# -- text ------------------------------------------------------------------------------------------
def format_text(view: StatusView) -> str:
    now = epoch_of(view.now) or 0.0
    lines = [_daemon_line(view.daemon, now), *_state_file_lines(view.state_file),
             *_flush_line(view.last_flush, now).split("\n"), _staged_line(view.staged), *_hashes_lines(view.hashes), ""]
    head = f"{'SOURCE':<17} {'PROTO':<6} {'STATE':<15} {'POLLED':>6} {'OK':>6} {'NEW':>6} {'24H':>5} {'NEXT':>6}"
    lines.append(head)
    for s in view.sources:
        nxt = _until(s.next_poll, now) if s.next_poll else "-"
        lines.append(f"{_cut(s.name, 17):<17} {PROTOCOL_SHORT.get(s.protocol, s.protocol)[:6]:<6} "
                     f"{_cut(s.state, 15):<15} {_ago(s.last_poll, now):>6} {_ago(s.last_success, now):>6} "
                     f"{_ago(s.last_new, now):>6} {s.new_24h:>5} {nxt:>6}")
    if not view.sources:
        lines.append("(no sources)")
    problems = [(s.name, s.last_outcome) for s in view.sources if s.failures and s.last_outcome]
    if problems:
        lines += ["", "last errors:"]
        lines += [_cut(f"  {name}: {outcome.removeprefix('error: ')}", 80) for name, outcome in problems]
    lines += _tags_lines(view.sources)
    lines += _low_coverage_lines(view.coverage)
    if view.jobs:
        lines += ["", f"{'JOB':<23}" + "".join(f"{k.upper():>9}" for k in LINK_STATUSES)]
        for job in view.jobs:
            name = job.name + ("" if job.enabled else " (off)")
            lines.append(f"{_cut(name, 23):<23}" + "".join(f"{job.links[k]:>9}" for k in LINK_STATUSES))
    lines.append("")
    lines.append("POLLED, OK, NEW: time since the last poll, last success, last new entry;")
    lines.append("24H: entries staged in the last 24 h; NEXT: time until the next poll")
    # printable: an error kept in state.json by an older version (or typed in by hand) may hold a
    # server's raw control characters
    return "\n".join(_cut(printable(line), 80) for line in lines) + "\n"


def _tags_lines(sources: list[SourceStatus]) -> list[str]:
    """A line a tag, with its sources in the table's order: what `--tag NAME` would run."""
    tagged: dict[str, list[str]] = {}
    for s in sources:
        for tag in s.tags:
            tagged.setdefault(tag, []).append(s.name)
    if not tagged:
        return []
    return ["", "tags:", *(f"  {tag}: {', '.join(names)}" for tag, names in sorted(tagged.items()))]


def _low_coverage_lines(coverage: list[FieldCoverage]) -> list[str]:
    """The fields whose coverage fell below half their usual share (errors.log has said so): a line each."""
    low = [(c, f) for c in coverage for f in c.low if f in c.shares]
    if not low:
        return []
    return ["", "fields fallen below half their usual coverage (a rule or the site changed?):",
            *(f"  {c.kind} {c.name}: {f} {c.shares[f]:.0%}, usually {c.usual.get(f) or 0:.0%}" for c, f in low)]


def _daemon_line(d: DaemonStatus, now: float) -> str:
    if d.running:
        up = _duration(d.uptime_seconds) if d.uptime_seconds is not None else "?"
        page = f"; page {d.status_page}" if d.status_page else ""
        return f"daemon: running, pid {d.pid}, up {up}{page}"
    if d.pid:
        return f"daemon: NOT RUNNING (pid {d.pid} last wrote its status {_ago(d.updated, now)} ago)"
    return "daemon: NOT RUNNING (it has not run on this staging folder)"


def _state_file_lines(state_file: StateFileStatus | None, most: int = 5) -> list[str]:
    """What is wrong with state.json, and what the daemon does about it, in lines of 80 columns."""
    if not state_file:
        return []
    name = Path(state_file.path).name
    if state_file.whole:
        lines = [f"{name} in STAGING_DIR is DAMAGED, read as empty",
                 "  so every source below shows 'not polled yet', whatever it was"]
    else:
        lines = [f"{name} in STAGING_DIR is DAMAGED in places"]
    for entry in state_file.damage[:most]:
        lines.append(f"  {entry.source + ': ' if entry.source else ''}{entry.what}")
    if len(state_file.damage) > most:
        lines.append(f"  and {len(state_file.damage) - most} more (`status --json` lists them)")
    return lines + [*textwrap.wrap(state_file.action, 78, initial_indent="  ", subsequent_indent="  ")]


def _flush_line(f: LastFlush | None, now: float) -> str:
    if not f:
        return "last flush: none yet"
    if f["ok"]:
        what = f"ok, {f['rows']} row{'' if f['rows'] == 1 else 's'}" \
            + (f", {f['already']} already stored" if f.get("already") else "")
        return f"last flush: {_ago(f['at'], now)} ago ({f['why']}), {what}, {f['seconds']:.2f} s"
    return f"last flush: {_ago(f['at'], now)} ago ({f['why']}) FAILED:\n  {f.get('error') or '?'}"


def _staged_line(staged: list[TableStaged]) -> str:
    parts = []
    for t in staged:
        batches = f" ({t.batches} batch{'es' if t.batches != 1 else ''} from an unfinished flush)" \
            if t.batches else ""
        parts.append(f"{t.table} {t.rows}{batches}")
    return "staged rows waiting for the database: " + ", ".join(parts)


def _hashes_lines(hashes: HashesStatus) -> list[str]:
    """A line a hash file: 'hashes items: 12,345, 0.70 MB, span 12d03h since 2026-11-22, window 400d'."""
    window = f"window {hashes.window}" if hashes.window else "no window"
    lines = []
    for f in hashes.files:
        if not f.bytes:
            lines.append(f"hashes {f.table}: none yet, {window}")
            continue
        span = f"span {_duration(f.span_seconds or 0)} since {f.since[:10]}" if f.since \
            else "span unknown (no marks yet)"
        lines.append(f"hashes {f.table}: {f.hashes:,}, {size_text(f.bytes)}, {span}, {window}")
    return lines


def epoch_of(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _duration(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def _ago(when: str | None, now: float) -> str:
    at = epoch_of(when)
    return "-" if at is None else _duration(now - at)


def _until(when: str | None, now: float) -> str:
    at = epoch_of(when)
    if at is None:
        return "-"
    return "now" if at <= now else _duration(at - now)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def print_status(settings: Settings, *, as_json: bool, now: float, out: TextIO) -> int:
    """`run_daemon.py status [--json]`: print the view; exit code 0 (reading never fails the daemon)."""
    view = collect(settings, now)
    if as_json:
        json.dump(view.as_json(), out, indent=1)
        out.write("\n")
    else:
        out.write(format_text(view))
    return 0


