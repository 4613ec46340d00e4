"""One tree of error types, so callers catch what they mean and messages read as sentences."""


class ParserError(Exception):
    """Base of every error this project raises on purpose."""


class SettingsError(ParserError):
    """params.py is missing, does not import, or holds a bad value; raised before anything is created."""


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


class StorageError(ParserError):
    """The database refused or could not be reached; the staged records are kept."""


class RecordRefusedError(StorageError):
    """The database refused a value of a record (not the connection): the other records can go on."""


class LockHeldError(ParserError):
    """Another daemon already works on this staging folder."""
