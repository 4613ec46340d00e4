"""What differs between a daemon alone, one of a group (SHARED = True) and a dry run, and between a run
forever and --once, chosen once, where the daemon is put together (parts_for, called by parser/daemon.py):
which sources each turn offers (parser/sources/offering.py), the host slots, the feeds' schedule and rate
budgets, the push inbox and WebSub subscriber, the jobs' files, and what the run writes (its sinks, states,
logs, database, daemon.json). Every other module is handed the part it uses and never asks which it got;
each Shared twin is checked against its single-daemon type by the type checker (a subclass, or the Schedule
protocol of parser/sources/source_schedule.py).

A dry run is never the group's: it reads its own files and writes none (DryRunParts).
"""
from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Protocol, TextIO

from db.store import Database

from ..core import logs
from ..core.coverage import Coverage
from ..core.lock import FolderLock
from ..core.record import RECORD_FIELDS
from ..core.runinfo import daemon_status_path, kept_coverage
from ..fetch.host_slots import HostSlots
from ..fetch.ratelimit import RateLimits
from ..jobs.job_context import DRY_RUN_LINKS
from ..jobs.job_files import InMemoryJobFiles, JobFiles
from ..jobs.job_pace import Continuous, JobPace, OneShot, OneShotInGroup
from ..jobs.runner import OpenFiles
from ..pipeline.fulltext import remember_path
from ..pipeline.inbox import Inbox
from ..pipeline.last_polls import LastPolls
from ..pipeline.sink import RecordSink, open_print_sink, open_sink
from ..push.websub import WebSub
from ..settings.params import Settings, Source
from ..sources.offering import Offering, offering_for
from ..sources.source_schedule import Schedule, SourceSchedule

NOTES_FILE = "notes.json"  # in STAGING_DIR: the settings' notes said at the last start (Daemon._say_notes)
Subscriber = Callable[..., WebSub]  # builds the WebSub subscriber in place of WebSub (parser/push/endpoints.py)


class Parts(Protocol):
    job_files: OpenFiles
    max_objects: int | None  # a job's objects fetched at most (None: every pending link)

    def offering(self) -> Offering:
        """Which sources each turn of the loop offers: the due ones (forever), or each selected one once."""

    def job_pace(self) -> JobPace:
        """How the jobs' passes pace the run: forever, --once, or --once in a group (parser/jobs/job_pace.py)."""

    def host_slots(self, stop: threading.Event) -> HostSlots:
        """The fetcher's host slots (the scheduler's too): this daemon's, or the group's."""

    def schedule(self, clock: Callable[[], float], *, every: Callable[[], Sequence[Source]],
                 named: bool) -> Schedule[Source]:
        """The sources' schedule and states: state.json's, the group's, or a dry run's in memory."""

    def items_sink(self, settings: Settings, *, last_polls: LastPolls | None) -> RecordSink:
        """The feeds' sink (table `items`): a Sink, or a dry run's PrintSink."""

    def full_text_memory(self) -> Path | None:
        """Where the pages fetched for full text are remembered (None: not at all)."""

    def setup_logs(self, settings: Settings) -> None: ...

    def folder_lock(self) -> FolderLock: ...

    def notes_path(self) -> Path | None:
        """Where the settings' notes said at the last start are kept (None: nowhere, each said)."""

    def kept_coverage(self) -> Coverage | None:
        """The fields' coverage history this run goes on from (None: none)."""

    def database(self) -> Database | None:
        """The database the run flushes to (None: none, nothing is flushed or retained)."""

    def daemon_json(self) -> Path | None:
        """Where the daemon's status is saved (None: nowhere)."""

    def rate_limits(self) -> RateLimits: ...

    def inbox(self, staging_dir: Path) -> Inbox: ...

    def subscriber(self) -> Subscriber | None:
        """None: WebSub itself."""

    def daemon_name(self) -> str | None:
        """What the `runs` table calls this daemon: None alone, its host and pid in a group."""


class AloneParts:
    """One daemon, its states in state.json and its budgets in memory."""
    max_objects: int | None = None

    def __init__(self, settings: Settings, *, once: bool = False):
        self.settings, self.once = settings, once
        self.job_files: OpenFiles = JobFiles

    def offering(self) -> Offering:
        return offering_for(self.once)

    def job_pace(self) -> JobPace:
        return OneShot() if self.once else Continuous()

    def host_slots(self, stop: threading.Event) -> HostSlots:
        return HostSlots(self.settings.per_host, stop=stop)

    def schedule(self, clock: Callable[[], float], *, every: Callable[[], Sequence[Source]],
                 named: bool) -> Schedule[Source]:
        return SourceSchedule(self.settings.staging_dir / "state.json", clock, workers=self.settings.concurrency)

    def items_sink(self, settings: Settings, *, last_polls: LastPolls | None) -> RecordSink:
        return open_sink(settings, table="items", columns=RECORD_FIELDS, unique_fields=settings.unique_fields,
                         staging_dir=settings.staging_dir, updates=settings.items_updates, last_polls=last_polls)

    def full_text_memory(self) -> Path | None:
        return remember_path(self.settings.staging_dir)

    def setup_logs(self, settings: Settings) -> None:
        logs.setup(settings.log_dir, max_bytes=settings.log_max_bytes, backups=settings.log_backups,
                   log_format=settings.log_format)

    def folder_lock(self) -> FolderLock:
        return FolderLock(self.settings.staging_dir)

    def notes_path(self) -> Path | None:
        return self.settings.staging_dir / NOTES_FILE

    def kept_coverage(self) -> Coverage | None:
        return kept_coverage(daemon_status_path(self.settings.staging_dir))

    def database(self) -> Database | None:
        s = self.settings
        return Database(s.db_url, timeout=s.db_timeout, search=s.search)

    def daemon_json(self) -> Path | None:
        return daemon_status_path(self.settings.staging_dir)

    def rate_limits(self) -> RateLimits:
        return RateLimits()

    def inbox(self, staging_dir: Path) -> Inbox:
        return Inbox(staging_dir)

    def subscriber(self) -> Subscriber | None:
        return None

    def daemon_name(self) -> str | None:
        return None


class GroupParts(AloneParts):
    """One of the daemons sharing SHARED_DB_URL's database: its schedule, budgets, host slots, pushes and
    job links are the group's (parser/group/shared*.py). The modules are imported here, on first use:
    they need psycopg, which a daemon alone never loads."""

    def __init__(self, settings: Settings, *, once: bool = False):
        super().__init__(settings, once=once)
        from .shared_jobs import SharedJobFiles  # imported on first use: SHARED only (psycopg)
        self.job_files = SharedJobFiles

    def daemon_name(self) -> str | None:
        return f"{socket.gethostname()}:{os.getpid()}"

    def job_pace(self) -> JobPace:
        return OneShotInGroup() if self.once else Continuous()

    def host_slots(self, stop: threading.Event) -> HostSlots:
        from .shared_hosts import SharedHostSlots  # imported on first use: SHARED only (psycopg)
        s = self.settings
        return SharedHostSlots(s.db_url, s.per_host, s.deadline, stop)

    def schedule(self, clock: Callable[[], float], *, every: Callable[[], Sequence[Source]],
                 named: bool) -> Schedule[Source]:
        from .shared import SharedSchedule  # imported on first use: SHARED only (psycopg)
        return SharedSchedule(self.settings, clock, every=every, named=named)

    def rate_limits(self) -> RateLimits:
        from .shared import SharedRateLimits  # imported on first use: SHARED only (psycopg)
        return SharedRateLimits(self.settings.db_url)

    def inbox(self, staging_dir: Path) -> Inbox:
        from .shared_push import SharedInbox  # imported on first use: SHARED only (psycopg)
        return SharedInbox(staging_dir, self.settings.db_url)

    def subscriber(self) -> Subscriber | None:
        from .shared_push import SharedWebSub  # imported on first use: SHARED only (psycopg)
        return partial(SharedWebSub, db_url=self.settings.db_url)


class DryRunParts(AloneParts):
    """--dry-run: a daemon alone that reads its files and writes none. The feeds' and the jobs' records are
    printed on `out` (PrintSink, JobPrintSink), the states kept in memory (state.json untouched), the jobs'
    files opened in memory (InMemoryJobFiles) with at most DRY_RUN_LINKS objects a job; no log files (the
    errors are comment lines among the records), no lock, no notes.json, no database (so no flush, no
    retention, no operator's requests), no daemon.json."""
    max_objects: int | None = DRY_RUN_LINKS

    def __init__(self, settings: Settings, out: TextIO):
        super().__init__(settings, once=True)  # a dry run is a one-shot
        self.out = out
        self.job_files = partial(InMemoryJobFiles, out=out)

    def schedule(self, clock: Callable[[], float], *, every: Callable[[], Sequence[Source]],
                 named: bool) -> Schedule[Source]:
        return SourceSchedule(None, clock, workers=self.settings.concurrency)

    def items_sink(self, settings: Settings, *, last_polls: LastPolls | None) -> RecordSink:
        """Digests read (an edit shows as the update a real run would stage), none saved."""
        return open_print_sink(settings, table="items", columns=RECORD_FIELDS, unique_fields=settings.unique_fields,
                               staging_dir=settings.staging_dir, out=self.out)

    def full_text_memory(self) -> Path | None:
        return None

    def setup_logs(self, settings: Settings) -> None:
        logs.setup(None, max_bytes=settings.log_max_bytes, backups=settings.log_backups,
                   log_format=settings.log_format, errors_on_console=False)

    def folder_lock(self) -> FolderLock:
        return Unlocked(self.settings.staging_dir)

    def notes_path(self) -> Path | None:
        return None

    def kept_coverage(self) -> Coverage | None:
        return None

    def database(self) -> Database | None:
        return None

    def daemon_json(self) -> Path | None:
        return None


class Unlocked(FolderLock):
    """A dry run's: it writes nothing, so it runs beside the folder's daemon."""

    def acquire(self) -> None:
        pass


def parts_for(settings: Settings, *, dry_run: bool, once: bool, out: TextIO) -> Parts:
    """The one place SHARED, --dry-run and --once are read for a running daemon's parts; a dry run prints on
    `out`."""
    if dry_run:
        return DryRunParts(settings, out)
    return GroupParts(settings, once=once) if settings.shared else AloneParts(settings, once=once)
