"""One tree of error types, so callers catch what they mean and messages read as sentences; and
`printable`, the one rule for text a server sent on its way to a terminal or a log."""
from __future__ import annotations

import errno
import re

# C0 controls but tab and line feed, DEL, and the C1 controls (U+009B is a terminal's CSI too): a
# server's ESC in a Content-Type would otherwise recolour or rewrite the operator's terminal.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with every control character but tab and line feed shown as its escape (`\\x1b`).
    Idempotent: an escape holds no control character, so text escaped twice reads the same."""
    if _UNPRINTABLE.search(text) is None:  # nearly every message: one scan, nothing built
        return text
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class ParserError(Exception):
    """Base of every error this project raises on purpose. Its message is made printable here, so
    whatever a server put in it (a Content-Type, a reason phrase, an address) reaches errors.log,
    parser.log, state.json, `status` and a `reset` reply escaped, by whichever path it goes."""

    def __init__(self, message: object = "", *args: object):
        super().__init__(printable(str(message)), *args)


class SettingsError(ParserError):
    """params.py is missing, does not import, or holds a bad value; raised before anything is created."""


class HistoryMismatchError(SettingsError):
    """The staging folder's hashes do not fit the settings (parser/pipeline/history.py): they were taken by
    another identity rule (HASH, UNIQUE_FIELDS), or flushed into a database DB_URL no longer names.
    Found at start, after the lock and logs are open; exit 2 like any settings problem."""


class FetchError(ParserError):
    """A source could not be fetched. `str(err)` is the one-line description for errors.log.

    `status` is the HTTP status when there was one; `retry_after` is seconds the server asked us
    to wait (429/503); `permanent` marks answers that will not get better by retrying (404, 410).
    """

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None,
                 permanent: bool = False):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.permanent = permanent


class ParseError(ParserError):
    """A body was fetched but is not what the source promised (not a feed, broken JSON, ...)."""


class ParseProcessError(ParseError):
    """The process parsing a body died (parser/core/cpu_pool.py): the body's fault, or the stop's."""


class StorageError(ParserError):
    """The database refused or could not be reached; the staged records are kept."""


class SchemaRefusedError(StorageError):
    """The database refused to bring a table made by an older version to this one's shape (db/migrate.py):
    a value that does not convert, no privilege to alter it. Nothing was changed; exit 2 at start, with
    what to do; met at a flush instead, the rows stay staged as for any StorageError."""


class RecordRefusedError(StorageError):
    """The database refused a value of a record (not the connection): the other records can go on."""


class LockHeldError(ParserError):
    """Another daemon already works on this staging folder."""


def cannot_write(path: object, exc: OSError) -> str:
    """A failed write of `path` in the operator's words: a full disk (or quota) is called so, with what
    to do, rather than OSError(28)."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (f"disk full: cannot write {path} ({exc.strerror}); free space on that disk, then start "
                "the daemon again: nothing staged is lost")
    return f"cannot write {path}: {exc.strerror or exc}"
