"""Retention (RETAIN, a source's or a job's `retain`): what each pass prunes, and when the daemon runs one.

tasks() turns the settings into db/retention.py's tasks: the feeds' rows aged by `published` (else
`fetched`), a job's by `fetched`, versions by `replaced`, runs by `started`; a source with its own `retain`
gets tasks of its own, the others RETAIN's. The daemon runs a pass at start and every day in a thread of
its own beside the loop (each batch a short transaction, so its flushes wait one at most), and at the end
of --once; `parser-daemon retain` runs one now. What the feeds stage is held to the same ages
(parser/pipeline/filters.py's over_age: an entry older than `items` when seen is not staged), so a deleted entry its
feed still lists never comes back.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial

from db import retention
from db.retention import DELETE, EMPTY, Done, Task
from db.schema import FEEDS_TABLE
from db.store import Database

from .core.errors import StorageError
from .operate.check import histories
from .settings.params import Settings, Source
from .settings.retain import Retain

log = logging.getLogger("parser")
EVERY = 86400.0  # seconds between two passes of a running daemon
ENTRY_AGE = "COALESCE(published, fetched)"
BODIES = ("content", "summary")
NAMES_SAID = 3  # sources named in a log line before "and N more"


def tasks(settings: Settings) -> list[Task]:
    """Every pruning the settings ask for, the tables that exist or not (db/retention.existing sorts them)."""
    items = f"{FEEDS_TABLE}_versions"
    found = _by_source(settings.retain, settings.sources, "items", FEEDS_TABLE, ENTRY_AGE)
    found += _by_source(settings.retain, settings.sources, "content", FEEDS_TABLE, ENTRY_AGE, action=EMPTY)
    found += _by_source(settings.retain, settings.sources, "versions", items, "replaced", key="version")
    for job in settings.link_jobs:
        if job.retain.items is not None:
            found.append(Task(job.name, job.retain.items, "fetched"))
        if job.retain.versions is not None:
            found.append(Task(f"{job.name}_versions", job.retain.versions, "replaced", key="version"))
    if settings.retain.runs is not None:
        found.append(Task("runs", settings.retain.runs, "started"))
    return found


def _by_source(default: Retain, sources: Sequence[Source], kind: str, table: str, age_sql: str, *,
               action: str = DELETE, key: str = "id") -> list[Task]:
    """The tasks of one kind on a feeds' table: RETAIN's for the rows of every source without an age of its
    own (a source no longer in params.py among them), then one per age the sources set themselves."""
    emptied = BODIES if action == EMPTY else ()
    own: dict[str, float | None] = {s.name: getattr(s.retain, kind) for s in sources
                                    if s.retain is not None and getattr(s.retain, kind) != getattr(default, kind)}
    found = []
    if (age := getattr(default, kind)) is not None:
        rows = f"source NOT IN ({_listed(own)})" if own else "TRUE"
        found.append(Task(table, age, age_sql, action, rows, emptied, key))
    for age in sorted({a for a in own.values() if a is not None}):
        names = [name for name, a in own.items() if a == age]
        found.append(Task(table, age, age_sql, action, f"source IN ({_listed(names)})", emptied, key,
                          whose=_whose(names)))
    return found


def _listed(names: Iterable[str]) -> str:
    """Source names as SQL literals ('' for a quote; a name holds no control character: parser/settings)."""
    return ", ".join("'" + name.replace("'", "''") + "'" for name in names)


def _whose(names: Sequence[str]) -> str:
    shown = ", ".join(names[:NAMES_SAID])
    more = f" and {len(names) - NAMES_SAID} more" if len(names) > NAMES_SAID else ""
    return f"{'source' if len(names) == 1 else 'sources'} {shown}{more}"


def run_pass(db: Database, settings: Settings, now: float, *, dry_run: bool = False,
             stop: threading.Event | None = None,
             marks: Callable[[str], Sequence[str]] = lambda table: ()) -> list[Done]:
    """One pass of every task whose table exists; the free pages given back after (SQLite with auto_vacuum
    INCREMENTAL). `marks(table)`: the hashes a pass never deletes (parser/pipeline/history.py's marks)."""
    done = []
    for task in retention.existing(db, tasks(settings)):
        if stop is not None and stop.is_set():
            break
        rows = retention.prune(db, task, now, dry_run=dry_run, stop=stop, spared=partial(marks, task.table))
        done.append(Done(task, rows))
    if not dry_run and any(d.rows and d.task.action == DELETE for d in done):
        retention.release_space(db, stop)
    return done


def marks_of(settings: Settings) -> Callable[[str], list[str]]:
    """table -> the hashes marking it in its hash file's hashes.json (parser/pipeline/history.py), read anew."""
    found = dict(histories(settings, read_only=True))
    return lambda table: found[table].marked() if table in found else []


class Retention:
    """The daemon's passes: one at start and every EVERY seconds, in a thread beside the loop."""

    def __init__(self, settings: Settings, db: Database, *, stop: threading.Event, wall: Callable[[], float],
                 marks: Callable[[str], Sequence[str]]):
        self.settings, self.db, self.stop, self.wall, self.marks = settings, db, stop, wall, marks
        self.thread: threading.Thread | None = None
        self.next = 0.0  # time.monotonic() of the next pass

    def tick(self) -> None:
        """From the loop: start a pass when one is due and none runs."""
        if time.monotonic() < self.next or (self.thread is not None and self.thread.is_alive()):
            return
        self.next = time.monotonic() + EVERY
        self.thread = threading.Thread(target=self.run, name="retain", daemon=True)
        self.thread.start()

    def run(self) -> list[Done]:
        """One pass now, said in parser.log; a database that fails is said, and tried again at the next pass."""
        started = time.monotonic()
        try:
            done = run_pass(self.db, self.settings, self.wall(), stop=self.stop, marks=self.marks)
        except StorageError as exc:
            log.error("%s", exc)
            return []
        if done:  # none: no table to prune (the default's `runs` before the table is made)
            log.info("retain: %s in %.1f s", retention.said(done), time.monotonic() - started)
        return done

    def close(self) -> None:
        """Wait for a pass running (the stop event set: it ends after its batch)."""
        if self.thread is not None:
            self.thread.join()
