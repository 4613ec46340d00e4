"""SIGHUP: the params file read again between two turns of the loop, off the main thread
(parser/settings/read.py). A good file applies at once: sources added, removed or changed (a changed
url starts that source afresh), intervals, FLUSH_INTERVAL, DEAD_AFTER, MAX_ITEMS; one parser.log line
says what changed (the sources by name, each other setting as old -> new, a secret never shown) and names
what needs a restart. A bad file, or one still reading after
READ_LIMIT, is refused with an errors.log line, and the running settings stay. The log files are let go
and opened again at their paths (after a logrotate).
"""
from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ..core import logs
from ..core.errors import SettingsError
from ..core.urls import redact_url
from ..settings.params import Settings, Source
from ..settings.read import SettingsRead
from ..settings.run_options import RunOptions, select_sources
from ..sources.protocols import polled, pushed
from ..sources.source_schedule import Schedule

log = logging.getLogger("parser")
# The settings a running daemon takes over from a re-read params file; the others were built into
# the database, staging, fetcher, jobs or listener and wait for a restart.
RELOADABLE = ("sources", "poll_interval", "flush_interval", "dead_after", "max_items", "notes")
RESTART_TO_APPLY = tuple(f.name for f in fields(Settings) if f.name not in (*RELOADABLE, "params_path"))
NOT_SETTINGS = ("params_path", "sources", "notes")  # the sources are said by name; notes are logged apart
_SECRET_NAME = re.compile(r"password|secret|token|key", re.IGNORECASE)  # a setting never shown as it is


def setting_changes(old: Settings, new: Settings) -> list[str]:
    """Each setting that differs, as `NAME old -> new`: what the operator changed, said back."""
    changes = []
    for name in (f.name for f in fields(Settings) if f.name not in NOT_SETTINGS):
        before, after = getattr(old, name), getattr(new, name)
        if before != after:
            shown = shown_value(name, before), shown_value(name, after)
            changes.append(f"{name.upper()} {shown[0]} -> {shown[1]}" if shown[0] != shown[1]
                           else f"{name.upper()} changed")  # two link jobs alike in name
    return changes


def shown_value(name: str, value: Any) -> str:
    """A setting's value for a log line, as params.py spells it; credentials in a URL (DB_URL) hidden."""
    if _SECRET_NAME.search(name):
        return "***"
    if isinstance(value, str):
        return redact_url(value) if "://" in value else repr(value)
    if isinstance(value, float):
        return f"{value:g}"  # 30.0 read from FLUSH_INTERVAL = 30
    if isinstance(value, Path):
        return str(value)
    if name.endswith("_listen") and isinstance(value, tuple):
        return f"{value[0]}:{value[1]}"
    if isinstance(value, tuple):  # UNIQUE_FIELDS, LINK_JOBS (by name)
        return f"[{', '.join(getattr(item, 'name', None) or repr(item) for item in value)}]"
    return repr(value)


@dataclass(frozen=True)
class Running:
    """What a reload changes, as the daemon runs it."""
    settings: Settings
    listened: list[Source]   # webhook and WebSub sources: the listener's, a change needs a restart
    sources: list[Source]    # the polled ones
    full_text: bool          # the poller was built with full text (a source's full_text needs it)


class Reload:
    def __init__(self, options: RunOptions, *, clock: Callable[[], float]):
        self.options, self.clock = options, clock
        self.requested = threading.Event()  # SIGHUP; acted on by the main thread between two turns
        self.reading: SettingsRead | None = None  # the read going on in its thread
        self.at_start = False  # a SIGHUP came during start-up, not yet said

    def request(self, *, at_start: bool = False) -> None:
        """From the SIGHUP handler: only a flag, the main thread reloads. `at_start`: a SIGHUP that came
        before the daemon was built, so the file may have changed after the start read it."""
        self.at_start = self.at_start or at_start
        self.requested.set()

    def pending(self) -> bool:
        return self.requested.is_set() or self.reading is not None

    def step(self, running: Running, schedule: Schedule[Source]) -> Running | None:
        """Start the read, or look at the one going on, never waiting. The settings and sources to run
        from now on when a good file has been read; None while the read goes on, or when the file was
        refused. A SIGHUP during a read is kept for the next one, which reads the file as it is then."""
        old = running.settings
        if self.reading is None:
            self.requested.clear()
            logs.reopen()  # after logrotate: this SIGHUP's lines, and all after, in the new files
            if self.at_start:
                self.at_start = False
                log.info("params: SIGHUP during start-up: %s is read again now", old.params_path)
            self.reading = SettingsRead(old.params_path)
        try:
            new = self.reading.result()
            if new is None:
                return None
            self.reading = None
            sources = select_sources(new, self.options)
        except (SettingsError, ValueError) as exc:
            self.reading = None
            logs.error_line("params", str(old.params_path), f"SIGHUP: refused, the running settings stay: {exc}")
            log.info("params: SIGHUP: %s refused, the running settings stay", old.params_path,
                     extra=logs.ALSO_IN_ERRORS)
            return None
        return self._apply(running, new, sources, schedule)

    def _apply(self, running: Running, new: Settings, sources: list[Source], schedule: Schedule[Source]) -> Running:
        old = running.settings
        restart = [name.upper() for name in RESTART_TO_APPLY if getattr(new, name) != getattr(old, name)]
        listened, now_polled = pushed(sources), polled(sources)
        if listened != running.listened:
            restart.append("webhook and websub sources (the listener's)")
        if any(src.full_text for src in now_polled) and not running.full_text:
            restart.append("full_text")
        before = {src.name: src for src in running.listened + running.sources}
        after = {src.name: src for src in listened + now_polled}
        added = [n for n in after if n not in before]
        removed = [n for n in before if n not in after]
        changed = [n for n in after if n in before and after[n] != before[n]]
        for name in changed:
            # A new url drops the old address's validators and redirects (state_of).
            schedule.state(after[name]).rescheduled(self.clock(), after[name].interval)
        schedule.set_sources(now_polled)
        log.info("params: SIGHUP: %s read again: %d sources (added: %s; removed: %s; changed: %s); settings "
                 "changed: %s%s", old.params_path, len(after), ", ".join(added) or "none",
                 ", ".join(removed) or "none", ", ".join(changed) or "none",
                 ", ".join(setting_changes(old, new)) or "none",
                 f"; a restart is needed for {', '.join(restart)}" if restart else "")
        for note in (n for n in new.notes if n not in old.notes):  # the unchanged ones were said at start
            log.info("params: %s", note)
        return replace(running, settings=replace(old, **{name: getattr(new, name) for name in RELOADABLE}),
                       sources=now_polled)
