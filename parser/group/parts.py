"""What differs between a daemon alone and one of a group (SHARED = True), chosen once, where the daemon
is put together (parser/daemon.py's _open): the host slots, the feeds' schedule and rate budgets, the push
inbox and WebSub subscriber, the jobs' files. Every other module is handed the part it uses and never
asks which it got; each Shared twin is checked against its single-daemon type by the type checker (a
subclass, or the Schedule protocol of parser/sources/source_schedule.py).

A dry run is never the group's: it opens its own files, in memory.
"""
from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Protocol

from ..fetch.host_slots import HostSlots
from ..fetch.ratelimit import RateLimits
from ..jobs.job_files import JobFiles
from ..pipeline.inbox import Inbox
from ..push.websub import WebSub
from ..settings.params import Settings, Source
from ..sources.source_schedule import Schedule, SourceSchedule

Subscriber = Callable[..., WebSub]  # builds the WebSub subscriber in place of WebSub (parser/push/endpoints.py)


class Parts(Protocol):
    shared: bool  # for the few choices that are no object: --once's claims, a job's refresh
    job_files: type[JobFiles]

    def host_slots(self, stop: threading.Event) -> HostSlots:
        """The fetcher's host slots (the scheduler's too): this daemon's, or the group's."""

    def schedule(self, clock: Callable[[], float], *, every: Callable[[], Sequence[Source]], named: bool,
                 state_path: Path | None) -> Schedule[Source]:
        """The sources' schedule and states; `state_path` None: in memory (a dry run)."""

    def rate_limits(self) -> RateLimits: ...

    def inbox(self, staging_dir: Path) -> Inbox: ...

    def subscriber(self) -> Subscriber | None:
        """None: WebSub itself."""

    def daemon_name(self) -> str | None:
        """What the `runs` table calls this daemon: None alone, its host and pid in a group."""


class Alone:
    """One daemon, its states in state.json and its budgets in memory."""
    shared = False
    job_files: type[JobFiles] = JobFiles

    def __init__(self, settings: Settings):
        self.settings = settings

    def host_slots(self, stop: threading.Event) -> HostSlots:
        return HostSlots(self.settings.per_host, stop=stop)

    def schedule(self, clock: Callable[[], float], *, every: Callable[[], Sequence[Source]], named: bool,
                 state_path: Path | None) -> Schedule[Source]:
        return SourceSchedule(state_path, clock, workers=self.settings.concurrency)

    def rate_limits(self) -> RateLimits:
        return RateLimits()

    def inbox(self, staging_dir: Path) -> Inbox:
        return Inbox(staging_dir)

    def subscriber(self) -> Subscriber | None:
        return None

    def daemon_name(self) -> str | None:
        return None


class InGroup(Alone):
    """One of the daemons sharing SHARED_DB_URL's database: its schedule, budgets, host slots, pushes and
    job links are the group's (parser/group/shared*.py). The modules are imported here, on first use:
    they need psycopg, which a daemon alone never loads."""
    shared = True

    def __init__(self, settings: Settings):
        super().__init__(settings)
        from .shared_jobs import SharedJobFiles  # imported on first use: SHARED only (psycopg)
        self.job_files = SharedJobFiles

    def daemon_name(self) -> str | None:
        return f"{socket.gethostname()}:{os.getpid()}"

    def host_slots(self, stop: threading.Event) -> HostSlots:
        from .shared_hosts import SharedHostSlots  # imported on first use: SHARED only (psycopg)
        s = self.settings
        return SharedHostSlots(s.db_url, s.per_host, s.deadline, stop)

    def schedule(self, clock: Callable[[], float], *, every: Callable[[], Sequence[Source]], named: bool,
                 state_path: Path | None) -> Schedule[Source]:
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


def parts_for(settings: Settings, *, dry_run: bool) -> Parts:
    """The one place SHARED is read for a running daemon."""
    return InGroup(settings) if settings.shared and not dry_run else Alone(settings)
