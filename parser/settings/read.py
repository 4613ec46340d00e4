"""Reads params.py off the main thread, within a time limit (at start and on SIGHUP).

params.py is Python: it may wait on the network, a lock or a slow import. Read on the main thread,
such a file would hold the loop (no polls) and a stop (SIGTERM not acted on) for as long as it
waits. Read here, the loop goes on; past READ_LIMIT the read is refused, and its thread, a daemon
thread, is left behind: nothing joins it and nothing it returns is used.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from ..core.errors import SettingsError
from .params import Settings, load_settings

READ_LIMIT = 10.0  # seconds; a params.py that only sets values reads in milliseconds


class SettingsRead:
    """One read of a params file in a thread of its own; `result()` asks how it went, without waiting."""

    def __init__(self, path: str | Path, *, limit: float = READ_LIMIT,
                 load: Callable[[Path], Settings] = load_settings, clock: Callable[[], float] = time.monotonic):
        self.path, self.limit, self.clock = Path(path), limit, clock
        self.started = clock()
        self.done = threading.Event()
        self._settings: Settings | None = None
        self._error: SettingsError | None = None
        threading.Thread(target=self._read, args=(load,), name="params-read", daemon=True).start()

    def _read(self, load: Callable[[Path], Settings]) -> None:
        try:
            self._settings = load(self.path)
        except SettingsError as exc:
            self._error = exc
        except BaseException as exc:  # noqa: BLE001 -- the last net: a thread's error would go nowhere
            self._error = SettingsError(f"{self.path}: could not be read: {type(exc).__name__}: {exc}")
        finally:
            self.done.set()

    def result(self, wait: float = 0.0) -> Settings | None:
        """The settings read; None while the read goes on within the limit. SettingsError when the file
        is bad, or when the read has taken longer than the limit (then whatever it returns later is
        dropped)."""
        if self.done.wait(wait):
            if self._error is not None:
                raise self._error
            return self._settings
        if self.clock() - self.started >= self.limit:
            raise SettingsError(f"{self.path}: took longer than {self.limit:g} s to read, so it was not used; "
                                "is it waiting on the network, a lock or a slow import? A params file should "
                                "only set values")
        return None


def read_settings(path: str | Path, *, limit: float = READ_LIMIT, secrets: bool = True) -> Settings:
    """At start: the settings, or SettingsError (a bad file, or one still reading after `limit` s).
    `secrets` False: for a command that never uses them, a secret not in the environment is a note."""
    read = SettingsRead(path, limit=limit, load=partial(load_settings, secrets=secrets))
    settings = read.result(wait=limit)
    while settings is None:  # the wait ended a hair before the limit by the clock: ask again
        settings = read.result(wait=0.05)
    return settings
