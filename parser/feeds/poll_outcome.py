"""What one poll's outcome does in the main thread, once its records are staged: the source's state
(each transition a method of SourceState, parser/sources/state.py), the counters (the "polled:" summary,
daemon.json, the state's history) and the log lines. The feed pass (parser/feeds/feed_pass.py) hands each
outcome here.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from ..adapters import Parsed
from ..adapters.json_api import without_auth_params
from ..adapters.parsed import FeedInfo
from ..core import logs
from ..core.coverage import FEED_FIELDS
from ..core.dates import iso
from ..core.errors import FetchError
from ..core.runinfo import RunInfo
from ..core.runs import Run
from ..core.urls import redact_url
from ..fetch.host_slots import HostHeldError
from ..fetch.http import FetchResult
from ..pipeline.first_read import Keyed
from ..pipeline.sink import RecordSink, Staged
from ..settings.params import Source
from ..sources.state import MAX_BACKOFF, RETRY_AFTER_MAX, SourceState
from .poll_stats import PollStats

log = logging.getLogger("parser")
SUMMARY_EVERY = 60.0  # seconds between the "polled:" summary lines in parser.log


def plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"


def blocked_text(blocked: int, too_old: int = 0) -> str:
    """The `blocked N` of a poll's or push's line, when its keep/block rules dropped any; `too old N`, when
    records older than its retention were not staged."""
    return (f"  blocked {blocked}" if blocked else "") + (f"  too old {too_old}" if too_old else "")


@dataclass(frozen=True)
class PollOutcome:
    """What a worker hands back to the main thread for one source: a value, made once in the worker
    (parser/feeds/feed_pass.py's _poll) and read, never changed, by the main thread."""
    source: Source
    seconds: float
    result: FetchResult | None = None
    parsed: Parsed | None = None
    keyed: Keyed | None = None  # the records' keys, where the body was parsed (parser/pipeline/first_read.py)
    error: str | None = None
    fetch_error: FetchError | None = None
    abandoned: bool = False  # cut short because the daemon is stopping: not the source's failure
    blocked: int = 0  # records its keep/block rules dropped before staging (parser/pipeline/filters.py)
    too_old: int = 0  # records older than its RETAIN items when seen: not staged (parser/retention.py)

    @property
    def answer(self) -> FetchResult:
        """The server's answer, which every poll without an error has."""
        assert self.result is not None, f"{self.source.name}: a poll without an error has an answer"
        return self.result

    @property
    def parsed_body(self) -> Parsed:
        """What the body was read as, which every answer but a 304 has."""
        assert self.parsed is not None, f"{self.source.name}: an answer with a body was parsed"
        return self.parsed


def poll_fields(outcome: PollOutcome, staged: Staged | None) -> dict[str, dict[str, Any]]:
    """extra= for a poll's line: its values as keys of a JSON log line (LOG_FORMAT "json"), built here
    alone so that a new count is one line; the text line says them in its message."""
    error = outcome.fetch_error
    return logs.fields(source=outcome.source.name,
                       status=outcome.result.status if outcome.result is not None else getattr(error, "status", None),
                       new=len(staged.new) if staged is not None else 0,
                       duplicates=staged.duplicates if staged is not None else 0,
                       blocked=outcome.blocked,
                       seconds=round(outcome.seconds, 3),
                       verdicts=verdict_counts(staged))


def verdict_counts(staged: Staged | None) -> dict[str, int]:
    """The intake's verdict on each entry, counted (parser/pipeline/intake.py): why each was staged or not."""
    return {v.name.lower(): n for v, n in staged.verdicts.items() if n} if staged is not None else {}


def entries_read(outcome: PollOutcome) -> int:
    """The entries an answer held: those read, those left unread as the source's last poll had them
    (REPEATED, counted with the duplicates), those its keep/block rules dropped."""
    repeated = len(outcome.keyed.repeated) if outcome.keyed is not None else 0
    return len(outcome.parsed_body.records) + repeated + outcome.blocked


def run_row(outcome: PollOutcome, staged: Staged | None, now: float) -> Run:
    """The poll as a row of the `runs` table (core/runs.py)."""
    started = iso(now - outcome.seconds)
    seconds = round(outcome.seconds, 3)
    name = outcome.source.name
    if outcome.error is not None:
        status = outcome.fetch_error.status if outcome.fetch_error is not None else None
        return Run(name, started, seconds, "error", status=status, error=outcome.error)
    result = outcome.answer
    if result.not_modified or staged is None:
        return Run(name, started, seconds, "not modified", status=result.status)
    new, changed = len(staged.new), staged.changed
    return Run(name, started, seconds, "new" if new or changed else "unchanged", status=result.status,
               entries=entries_read(outcome), new=new, changed=changed)


class PollRecorder:
    """What each poll taken does to its source: its state, its log lines, its counts, its row of the runs table."""

    def __init__(self, sink: RecordSink, run_info: RunInfo, *, dead_after: int):
        """`sink` says what a --dry-run would stage (a real one writes nothing here); `dead_after`
        (DEAD_AFTER) changes with a SIGHUP."""
        self.sink, self.dead_after = sink, dead_after
        self.stats = PollStats(run_info)  # every count of a poll goes through it
        self.coverage = run_info.stats.coverage  # each poll's field coverage (parser/core/coverage.py)
        self.runs = run_info.runs  # a row per poll for the `runs` table, written by the next flush
        self.notes_logged: set[tuple[str, str]] = set()  # (source, note) already said in parser.log this run
        # source -> what its feed last said of itself this run, for the `sources` table (parser/flush_all.py)
        self.feed_info: dict[str, FeedInfo] = {}

    def record(self, outcome: PollOutcome, staged: Staged | None, state: SourceState, now: float) -> bool:
        """One source's outcome into its state, counters and log lines; its records (`staged`) are
        staged already. Returns whether the poll succeeded."""
        source = outcome.source
        if not isinstance(outcome.fetch_error, HostHeldError):  # a poll held back was not made
            self.runs.add(run_row(outcome, staged, now))
        if outcome.error is not None:
            self._take_failure(outcome, outcome.error, state, now)
            return False
        result = outcome.answer
        self.stats.answered(state, now, source.name, body_bytes=len(result.body), not_modified=result.not_modified)
        self._follow_address(source, state, result, outcome.parsed)
        if result.not_modified:
            self.sink.say(f"{source.name}: not modified")
            log.info("%s  304 not modified  %.2f s", source.name, outcome.seconds, extra=poll_fields(outcome, None))
            state.not_modified()
        else:
            assert staged is not None, "an answer with a body has its records staged first"
            self._take_records(outcome, staged, state, now)
        ended = state.succeeded(now, interval=source.interval, status=result.status)
        if ended >= self.dead_after:
            log.info("%s  back after %d failures", source.name, ended)
        return True

    def _take_records(self, outcome: PollOutcome, staged: Staged, state: SourceState, now: float) -> None:
        """A body's records (staged already): the parse's warnings and notes, the counts, the log line;
        the validators are kept only now that the records they cover are staged."""
        source, parsed, result = outcome.source, outcome.parsed_body, outcome.answer
        for warning in parsed.warnings:  # the body was read and its records staged: a warning, not an error
            logs.error_line(source.name, source.url, warning, level=logging.WARNING)
        for note in parsed.notes:
            if (source.name, note) not in self.notes_logged:
                self.notes_logged.add((source.name, note))
                log.info("%s  %s", source.name, note)
        blocked = outcome.blocked  # dropped from parsed.records in the worker
        self.sink.say(f"{source.name}: {entries_read(outcome)} records, "
                      + (f"{blocked} blocked, " if blocked else "") + f"{len(staged.new)} new would be staged"
                      + (f", {len(staged.updates)} as updates of stored rows ({staged.changed} changed since the "
                         "last poll)" if staged.updates else ""))
        self.sink.show(staged.new, staged.updates)  # --dry-run prints them; a real sink has staged them
        log.info("%s  new %d%s  duplicates %d%s  %.2f s  %s", source.name, len(staged.new),
                 f"  changed {staged.changed}" if staged.changed else "", staged.duplicates,
                 blocked_text(blocked, outcome.too_old), outcome.seconds,
                 parsed.kind,  # kind: what the body was found to be
                 extra=poll_fields(outcome, staged))
        self.stats.staged(state, now, new=len(staged.new), duplicates=staged.duplicates, blocked=blocked)
        # The records as read, duplicates too: a feed whose entries are all stored already still shows its coverage.
        for drop in self.coverage.passed(f"source/{source.name}", parsed.records, FEED_FIELDS):
            logs.error_line(source.name, source.url, drop.text())
        state.answered(result.etag, result.last_modified, new=len(staged.new))
        self.feed_info[source.name] = parsed.feed
        if result.future_last_modified:
            self._future_last_modified(source, result)

    def _take_failure(self, outcome: PollOutcome, error: str, state: SourceState, now: float) -> None:
        """A failed poll (`error`, outcome.error): its error said, the source backed off (SourceState.failed),
        and a server's Retry-After held (hold)."""
        source, exc = outcome.source, outcome.fetch_error
        self.sink.say(f"{source.name}: error: {error}")
        if isinstance(exc, HostHeldError):  # not sent: the host's hold (a job's 429) is no failure of the source
            logs.error_line(source.name, state.address(), error)
            state.held(now, exc.seconds, error=error)
            return
        marked = state.failed(now, interval=source.interval, dead_after=self.dead_after, error=error,
                              status=exc.status if exc is not None else None)
        said = error
        if exc is not None and exc.retry_after is not None:  # until when, in the line itself
            wait = min(exc.retry_after, RETRY_AFTER_MAX)
            said = f"{said}; held until {iso(time.time() + wait)} (Retry-After {wait:.0f} s)"
        logs.error_line(source.name, state.address(), said)
        # WARNING at least, as errors.log has it as an ERROR: a level filter on parser.log must not hide it
        log.warning("%s  error  %s  %.2f s", source.name, error, outcome.seconds,
                    extra={**logs.ALSO_IN_ERRORS, **poll_fields(outcome, None)})
        if marked:
            log.warning("%s  marked %s after %d failures in a row; polled with backoff", source.name, marked,
                        state.failures, extra=logs.ALSO_IN_ERRORS)
            logs.error_line(source.name, source.url, f"marked {marked} after {state.failures} failures in a "
                            f"row; next polls back off up to every {MAX_BACKOFF / 3600:.0f} h")
        if exc is not None and exc.retry_after is not None:
            state.hold_for(now, exc.retry_after)
        self.stats.failed(state, now, source.name)

    def _follow_address(self, source: Source, state: SourceState, result: FetchResult,
                        parsed: Parsed | None) -> None:
        """A 301/308 seen on two polls in a row moves the source for good (SourceState.redirected); a
        feed found on the source's HTML page is polled from then on."""
        if parsed is not None and parsed.feed_url:
            state.discovered(parsed.feed_url)
            log.info("%s  the address is an HTML page; it links to the feed %s, polled from now on", source.name,
                     redact_url(parsed.feed_url))
        # The request's auth param (json_api) is no part of the address: no token is kept in the state.
        moved_to = without_auth_params(result.moved_to or "", source)
        step = state.redirected(moved_to)  # "" (not moved) is neither step
        if step == "once":
            logs.error_line(source.name, state.address(), f"moved permanently to {redact_url(moved_to)};"
                            " polled there from now on if the next poll says so too")
        elif step == "moved":
            logs.error_line(source.name, source.url, f"moved permanently to {redact_url(moved_to)} (twice "
                            "in a row): polled there from now on; update its url in params.py")

    def _future_last_modified(self, source: Source, result: FetchResult) -> None:
        """parser/fetch/http.py dropped the answer's Last-Modified: said once per source and run, as the server
        will not mend it by the next poll."""
        if (source.name, "future Last-Modified") in self.notes_logged:
            return
        self.notes_logged.add((source.name, "future Last-Modified"))
        logs.error_line(source.name, result.url, f"Last-Modified {result.future_last_modified} is in the future "
                        "(later than the server's own Date, or ours without one): not kept nor sent back as "
                        "If-Modified-Since, which a server comparing dates would answer 304 until that day; polls "
                        "go on without it. The server's clock or its files' dates are wrong: tell the site's "
                        "owner if it lasts (said once per run)")

    def summary(self, *, due_only: bool = False) -> None:
        """The "polled:" line of the polls since the last one; `due_only`: only when SUMMARY_EVERY has
        passed since."""
        if due_only and self.stats.seconds_since_last() < SUMMARY_EVERY:
            return
        t = self.stats.since_last()
        if t.polls:
            log.info("polled: %d %s of %d %s in %.0f s: %d new records, %d duplicates, %d not modified, %d errors",
                     t.polls, plural(t.polls, "poll"), t.sources, plural(t.sources, "source"),
                     t.seconds, t.new, t.duplicates, t.not_modified, t.errors)
        self.stats.mark()
