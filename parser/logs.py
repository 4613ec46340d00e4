"""The three files a person reads, and the lines that go into them.

- parser.log: a line per source per poll (outcome, new records, duplicates) and a line per flush.
- errors.log: time, source, address and a one-line description of what went wrong.
- critical.log: what stopped the daemon, with the traceback.
Every file rotates by size. Addresses pass through redact_url, so no credential or token reaches
a log; request headers are never logged at all.
"""
from __future__ import annotations

import logging
import logging.handlers
import sys
import time
from pathlib import Path

from .urls import redact_url

log = logging.getLogger("parser")
errors = logging.getLogger("parser.errors")
critical = logging.getLogger("parser.critical")


class _UTCFormatter(logging.Formatter):
    converter = time.gmtime

    def formatTime(self, record, datefmt=None):  # noqa: N802 (logging's name)
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", self.converter(record.created))


def setup(log_dir: Path | None, *, max_bytes: int = 10 << 20, backups: int = 5, console: bool = True) -> None:
    """Route the three loggers to their files under log_dir (None: console only, for --dry-run)."""
    fmt = _UTCFormatter("%(asctime)s  %(message)s")
    for logger in (log, errors, critical):
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            handler.close()
        logger.setLevel(logging.INFO)
        logger.propagate = False
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        for logger, name in ((log, "parser.log"), (errors, "errors.log"), (critical, "critical.log")):
            handler = logging.handlers.RotatingFileHandler(log_dir / name, maxBytes=max_bytes,
                                                           backupCount=backups, encoding="utf-8")
            handler.setFormatter(fmt)
            logger.addHandler(handler)
    if console:
        stream = logging.StreamHandler(sys.stderr)
        stream.setFormatter(fmt)
        # On a terminal show the poll lines too; under nohup or systemd only what needs a look.
        stream.setLevel(logging.INFO if sys.stderr.isatty() else logging.WARNING)
        for logger in (log, errors, critical):
            logger.addHandler(stream)


def error_line(source: str, url: str, description: str) -> None:
    errors.error("%s  %s  %s", source, redact_url(url), _one_line(description))


def critical_line(message: str, exc: BaseException | None = None) -> None:
    critical.critical(_one_line(message), exc_info=exc)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
