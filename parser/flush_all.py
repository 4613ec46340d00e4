"""One flush of the daemon: every collector's sink into its table (the feeds' first, then each job's),
with one error path: a table that cannot be written keeps its rows staged for the next flush, and the
others go on. Its outcome goes to the operator: daemon.json's flushes and the status page's health.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from db import runs_table
from db.sources_table import NAME as SOURCES_TABLE
from db.sources_table import SourcesTable
from db.store import Database

from .adapters.parsed import FeedInfo
from .core import logs
from .core.dates import iso
from .core.errors import SchemaRefusedError, StorageError
from .core.runinfo import Flushed, Health, RunInfo
from .core.runs import RunLog
from .core.urls import redact_url
from .feeds.feed_pass import FeedPass
from .pipeline.sink import RecordSink
from .settings.params import Source
from .sources.state import SourceState

log = logging.getLogger("parser")


def flush_sinks(sinks: list[RecordSink], db: Database | None, why: str, *, db_url: str,
                feeds_idle: bool = False, sources: SourcesWriter | None = None, runs: RunLog | None = None) -> Flushed:
    """`sinks[0]` is the feeds': its errors name no table, and its line is always written by the last
    flush (`why` "stop" or "once") unless `feeds_idle` (no source ran: `--job` alone); an interval
    with nothing to write says nothing. Then the `sources` table (`sources`) and the `runs` table (the
    polls and passes since the last flush), after the records."""
    written = updated = already = versions = 0
    errors: list[str] = []
    for sink in sinks:
        # The Bloom filter is saved here, not per poll: it can be megabytes, and a restart catches
        # up from the hash file anyway.
        sink.save()
        feeds = sink is sinks[0]
        try:
            count = sink.flush(db)
        except StorageError as exc:
            pending = sink.pending_rows()
            logs.error_line("flush", redact_url(db_url), f"{exc}; {pending} records kept in staging for the next "
                            "flush" + ("" if feeds else f" (table {sink.table})"))
            log.info("flush (%s) of %s failed: %s", why, sink.table, exc, extra=logs.ALSO_IN_ERRORS)
            errors.append(str(exc) if feeds else f"{sink.table}: {exc}")
            continue
        rows, changed, stored_before = count.written, count.updated, count.already
        written, updated, already = written + rows, updated + changed, already + stored_before
        versions += count.versions
        if why != "stop":  # a quiet moment, no poll under way; a stop is not kept waiting by a rewrite
            compact_hashes(sink, feeds)
        if rows or stored_before or changed or (feeds and why in ("stop", "once") and not feeds_idle):
            log.info("flush (%s): %d rows written to %s%s%s", why, rows, sink.table,
                     f", {changed} updated" if changed else "",
                     f", {stored_before} already stored" if stored_before else "")
    if sources is not None and db is not None:
        try:
            sources(db)
        except StorageError as exc:
            logs.error_line("flush", redact_url(db_url), str(exc))
            log.info("flush (%s) of table %s failed: %s", why, SOURCES_TABLE, exc, extra=logs.ALSO_IN_ERRORS)
            errors.append(f"{SOURCES_TABLE}: {exc}")
    if runs is not None and db is not None:
        taken = runs.take()
        try:
            runs_table.write(db, taken)
        except StorageError as exc:
            runs.give_back(taken)
            logs.error_line("flush", redact_url(db_url), str(exc))
            log.info("flush (%s) of table %s failed: %s", why, runs_table.NAME, exc, extra=logs.ALSO_IN_ERRORS)
            errors.append(f"{runs_table.NAME}: {exc}")
    return Flushed(ok=not errors, rows=written, updated=updated, already=already, error="; ".join(errors) or None,
                   versions=versions)


def prepare_tables(db: Database, sinks: list[RecordSink]) -> None:
    """At start, before the first flush: the chain of schema steps this database lacks (db/migrations.py),
    then each sink's table made from its settings, or brought from an older version's shape to this
    one's, with its `<table>_versions` when its UPDATES is "history"; a flush then only writes rows. A
    refusal stops the start (SchemaRefusedError: a newer version's database, a table the database will
    not change: exit 2, saying what to do); a database away or locked is said, and the first flush does
    this instead."""
    try:
        db.migrate()
        for sink in sinks:
            # A job's typed fields (JobSink's kinds); the feeds' table is the chain's, its shape the same.
            db.make_table(sink.table_spec())
    except SchemaRefusedError:
        raise
    except StorageError as exc:
        log.warning("%s; tried again at the first flush", exc)


class SourcesWriter:
    """The `sources` table written at each flush (db/sources_table.py) from what the feed pass knows: each
    source's settings and state, and its feed's own title, site, description and language as its last
    answer said them (PollRecorder.feed_info; unknown after a restart until its next answer)."""

    def __init__(self, feeds: FeedPass):
        self.feeds, self.table = feeds, SourcesTable()

    def __call__(self, db: Database) -> int:
        return self.table.write(db, [self.row(*known) for known in self.feeds.known_sources()])

    @staticmethod
    def row(source: Source, state: SourceState, feed: FeedInfo | None) -> dict:
        # Addresses as the logs and state.json show them (redact_url): no password or token in the table.
        row = {"name": source.name, "url": redact_url(source.url), "protocol": source.protocol,
               "tags": list(source.tags),
               "address": redact_url(state.address()) if state.address() != source.url else None,
               "title": feed.title if feed else None, "site": feed.link if feed else None,
               "description": feed.description if feed else None, "language": feed.language if feed else None}
        if state.last_poll is None:  # never polled, as far as this daemon knows: its state is not known
            return row
        return {**row, "last_poll": state.last_poll, "last_success": state.last_success, "last_new": state.last_new,
                "last_status": state.last_status, "failures": state.failures, "dead": state.dead}


def compact_hashes(sink: RecordSink, feeds: bool) -> None:
    """UNIQUE_WINDOW: the hashes older than the window out of the sink's hash file (at most once a day:
    parser/pipeline/hash_window.py). One that fails (a full disk) leaves the file whole, tried again later."""
    try:
        done = sink.compact_hashes()
    except StorageError as exc:
        log.warning("hashes%s: not compacted: %s", "" if feeds else f" of {sink.table}", exc)
        return
    if done:
        log.info("hashes%s: %s", "" if feeds else f" of {sink.table}", done.said())


class FlushRecord:
    """The flushes' outcomes for the operator: daemon.json's (RunInfo.flushed), and the Health the status
    page reads (replaced whole, as the page's threads read it), which names the first failed flush in a row."""

    def __init__(self, run_info: RunInfo, wall: Callable[[], float]):
        self.run_info, self.wall = run_info, wall
        self.health = Health(tick=time.monotonic(), flush_ok=True, reason="starting")
        self.failing_since: str | None = None  # ISO time of the first of the failed flushes in a row

    def beat(self) -> None:
        """The main loop went round (or waited): /healthz sees it alive."""
        self.health = replace(self.health, tick=time.monotonic())

    def record(self, why: str, flushed: Flushed, seconds: float) -> None:
        self.run_info.flushed(flushed, at=iso(self.wall()), why=why, seconds=seconds)
        if flushed.ok:
            self.failing_since = None
        elif self.failing_since is None:
            self.failing_since = iso(self.wall())
        self.health = Health(tick=time.monotonic(), flush_ok=flushed.ok, reason="ok" if flushed.ok else
                             f"the last flush failed (failing since {self.failing_since}): {flushed.error}")
