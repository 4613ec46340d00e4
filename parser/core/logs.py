"""The three files a person reads, and the lines that go into them.

- parser.log: a line per source per poll (outcome, new records, duplicates) and a line per flush.
- errors.log: time, source, address and a one-line description of what went wrong.
- critical.log: what stopped the daemon, with the traceback.
Every line carries its level; LOG_FORMAT "json" writes one JSON object a line instead, for log
shippers. Every file rotates by size. Addresses pass through redact_url, so no credential or token
reaches a log; request headers are never logged at all.

The console (stderr) shows each event once: on a terminal the poll lines and the errors, under
nohup or systemd only what needs a look. A progress line (ProgressLine) is drawn only on a terminal
and is wiped before a log line is written, then drawn again below it.
"""
from __future__ import annotations

import json
import logging
import logging.handlers
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from .errors import printable
from .urls import redact_url

log = logging.getLogger("parser")
errors = logging.getLogger("parser.errors")
critical = logging.getLogger("parser.critical")

LOG_FORMATS = ("text", "json")
# extra= for a parser.log line whose event errors.log already holds: the console shows it once.
ALSO_IN_ERRORS = {"also_in_errors": True}


def fields(**values: Any) -> dict[str, dict[str, Any]]:
    """extra= for a line whose values a JSON line carries as keys of their own ({"new": 3}), for a log
    shipper to count without reading the message; a text line is the message alone, as before."""
    return {"fields": values}
_FILE_NAMES = {"parser": "parser", "parser.errors": "errors", "parser.critical": "critical"}


def _utc(created: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))


class _TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        # The level is joined to the time by one space, so the columns after it (split on two
        # spaces: time, source, address, description) stay where they were.
        super().__init__("%(asctime)s %(levelname)s  %(message)s")

    def formatTime(self, record, datefmt=None):  # noqa: N802 (logging's name)
        return _utc(record.created)

    def format(self, record: logging.LogRecord) -> str:
        # Whatever a line quotes (a server's header, an address, a library's message) reaches the
        # files and the terminal escaped (errors.printable), as in a JSON line.
        return printable(super().format(record))


class _JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, log (parser, errors, critical), message, and for an
    errors.log line its source and url apart, for a poll's line its counts (`fields`); a traceback as
    one string."""

    def format(self, record: logging.LogRecord) -> str:
        line = {"time": _utc(record.created), "level": record.levelname,
                "log": _FILE_NAMES.get(record.name, record.name), "message": record.getMessage()}
        for key in ("source", "url", "description"):
            if hasattr(record, key):
                line[key] = getattr(record, key)
        for key, value in getattr(record, "fields", {}).items():
            line.setdefault(key, value)  # never in place of the time, level or message
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        # printable: as a text line would be (json.dumps would leave the C1 controls raw)
        return json.dumps({k: printable(v) if isinstance(v, str) else v for k, v in line.items()},
                          ensure_ascii=False)


class _Console(logging.StreamHandler):
    """stderr, shared with the progress line: a log line first wipes the progress line, and the
    progress line is drawn again after it, so the two never run into each other."""

    def __init__(self, stream: TextIO):
        super().__init__(stream)
        self.progress = ""
        self.wipe = stream.isatty()

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "also_in_errors", False):
            return  # errors.log's line for this event reaches the console already
        with _console_lock:
            if self.wipe and self.progress:
                self.stream.write("\r\x1b[K")
            super().emit(record)
            if self.wipe and self.progress:
                self.stream.write(self.progress)
                self.stream.flush()


_console_lock = threading.RLock()
_console: _Console | None = None


class _LogFile(logging.handlers.RotatingFileHandler):
    """A log file that, when it cannot be written (a full disk, a file-size limit, its permissions),
    says so once on stderr and sends its lines there until a write succeeds again: a message is
    never lost without a word, and the daemon goes on collecting (staging is what matters).
    logging's own handleError would print a traceback per line and drop the line itself."""

    def __init__(self, path: Path, **kwargs):
        super().__init__(path, encoding="utf-8", delay=True, **kwargs)  # opened at the first line
        self.failing = False
        self._failed_now = False

    def emit(self, record: logging.LogRecord) -> None:
        self._failed_now = False
        self._let_go_if_moved()
        super().emit(record)  # calls handleError on any error, under the handler's lock
        if self.failing and not self._failed_now:
            self.failing = False
            _to_stderr(f"{self.baseFilename} can be written again; its lines go there from now on")

    def _let_go_if_moved(self) -> None:
        """logrotate (its default `create`) renames the file and makes a new one, or removes it: a line
        written on would go to parser.log.1, or to a deleted file, for as long as the daemon runs. So the
        file at the path is compared with ours (device and inode, as logging's WatchedFileHandler does)
        before each line, and when they differ ours is let go: the line opens the file at the path."""
        stream = self.stream
        if stream is None:
            return
        try:
            ours = os.fstat(stream.fileno())
            there = os.stat(self.baseFilename)
            moved = (ours.st_dev, ours.st_ino) != (there.st_dev, there.st_ino)
        except (OSError, ValueError):  # no file at the path any more (or ours closed): open it anew
            moved = True
        if moved:
            self.let_go()

    def let_go(self) -> None:
        """Close the file; the next line opens it again at its path (SIGHUP, a rotation by another tool)."""
        stream, self.stream = self.stream, None
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass  # its last bytes could not be flushed: said by the next line's failure, if that fails too

    def open_now(self) -> None:
        """Create the file at start, as an operator tailing it expects; a failure is said as for a line."""
        try:
            self.stream = self._open()
        except OSError as exc:
            self._failed(exc)

    def _failed(self, exc: BaseException | None) -> None:
        self._failed_now = True
        if not self.failing:
            self.failing = True
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            _to_stderr(f"cannot write {self.baseFilename}: {reason}; its messages go to stderr until it can "
                       "(free space in the log folder or fix its permissions)")

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        self._failed(sys.exc_info()[1])
        if self.stream is not None:  # opened again at the next line: a fresh buffer, not this one's bytes
            try:
                self.stream.close()
            except OSError:
                pass  # the flush in close() fails the same way; the file is closed all the same
            self.stream = None
        if not _shown_on_console(record):
            try:
                _to_stderr(self.format(record))
            except Exception:  # noqa: BLE001 -- a record that does not format: the line above said enough
                pass


def _shown_on_console(record: logging.LogRecord) -> bool:
    """Whether the console handler prints this record anyway (or errors.log's line for its event)."""
    console = _console
    if console is None or getattr(record, "also_in_errors", False):
        return console is not None
    return console in logging.getLogger(record.name).handlers and record.levelno >= console.level


def _to_stderr(line: str) -> None:
    with _console_lock:
        try:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # no stderr left either (closed): nothing more can be done
            pass


class ProgressLine:
    """A one-line status on a terminal (a harvest's counts), redrawn in place; None off a terminal."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def show(self, text: str) -> None:
        with _console_lock:
            if _console is not None and _console.stream is self.stream:
                _console.progress = text
            self.stream.write(f"\r\x1b[K{text}")
            self.stream.flush()

    def clear(self) -> None:
        with _console_lock:
            if _console is not None and _console.stream is self.stream:
                _console.progress = ""
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def progress_line(stream: TextIO | None = None) -> ProgressLine | None:
    """A ProgressLine on stderr when it is a terminal; None (no progress at all) otherwise."""
    stream = stream or sys.stderr
    return ProgressLine(stream) if stream.isatty() else None


def setup(log_dir: Path | None, *, max_bytes: int = 10 << 20, backups: int = 5, console: bool = True,
          log_format: str = "text", errors_on_console: bool = True) -> None:
    """Route the three loggers to their files under log_dir (None: console only, for --dry-run).
    errors_on_console False (--dry-run): errors.log's lines go nowhere; the dry run prints them as
    comment lines among its records instead."""
    global _console
    fmt = _JsonFormatter() if log_format == "json" else _TextFormatter()
    for logger in (log, errors, critical):
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            handler.close()
        logger.setLevel(logging.INFO)
        logger.propagate = False
    if log_dir is not None:
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # each file says on stderr that it cannot be written, and why
        for logger, name in ((log, "parser.log"), (errors, "errors.log"), (critical, "critical.log")):
            handler = _LogFile(log_dir / name, maxBytes=max_bytes, backupCount=backups)
            handler.setFormatter(fmt)
            handler.open_now()
            logger.addHandler(handler)
    _console = None
    if console:
        stream = _console = _Console(sys.stderr)
        stream.setFormatter(fmt)
        # On a terminal show the poll lines too; under nohup or systemd only what needs a look.
        stream.setLevel(logging.INFO if sys.stderr.isatty() else logging.WARNING)
        for logger in (log, errors, critical):
            if logger is not errors or errors_on_console:
                logger.addHandler(stream)
    if not errors_on_console and not errors.handlers:
        errors.addHandler(logging.NullHandler())  # not logging's last resort, which prints to stderr


def reopen() -> None:
    """SIGHUP: each log file is closed and opened again at its path at its next line, so a rotation by
    another tool (logrotate) lets go of the old file even in a log that rarely gets a line."""
    for logger in (log, errors, critical):
        for handler in logger.handlers:
            if isinstance(handler, _LogFile):
                handler.acquire()  # the handler's own lock, as emit() takes it
                try:
                    handler.let_go()
                finally:
                    handler.release()


def error_line(source: str, url: str, description: str, *, level: int = logging.ERROR) -> None:
    """An errors.log line. `level` WARNING: something went wrong in a poll that stored what it read (a
    charset the bytes did not fit, a malformed tail, a full text kept as its summary); ERROR: what
    failed (a poll, a flush)."""
    url, description = redact_url(url), _one_line(description)
    errors.log(level, "%s  %s  %s", source, url, description,
               extra={"source": source, "url": url, "description": description})


def critical_line(message: str, exc: BaseException | None = None) -> None:
    critical.critical(_one_line(message), exc_info=exc)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
