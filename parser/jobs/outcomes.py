"""What a pass-2 worker hands back for one link (ObjectOutcome): the link, and what became of it, one small
frozen value per case (a tagged union, decoded by one `match` in parser/jobs/pass2.py). A worker thread makes
them; the main thread reads them; nothing changes them on the way.

The cases, by what pass 2 does with the link (a first visit; a revisit of a done link, the job's `refresh`):
Fetched: staged (a revisit: as an update of its row); Unchanged (revisits only): not staged, waits longer;
Gone (404/410, or a harvest's link redirected off its object pages): never asked again (a revisit: missed);
Barred (robots.txt disallows it, a redirect that may not be followed): never asked again (a revisit: kept);
Refused (429/503 with Retry-After): asked again when its host's hold ends; Unmatched (no field matched)
and Failed (any other failure): asked again later; Held (not sent, its host is held) and Abandoned (cut
short because the daemon is stopping): still pending, no attempt spent, never staged or marked.
"""
from __future__ import annotations

from dataclasses import dataclass

from linkgen.linkfile import Revisit

from ..core.record import ObjectRecord


@dataclass(frozen=True)
class Fetched:
    """A page whose fields matched: its record, and what is kept with the link (the response's validators
    and the fields' digest)."""
    record: ObjectRecord
    etag: str
    modified: str
    digest: str
    empty: tuple[str, ...] = ()     # the fields that had nothing on the page
    warnings: tuple[str, ...] = ()  # typed fields whose text did not convert (stored as NULL)


@dataclass(frozen=True)
class Unchanged:
    """A revisit's page unchanged (304, or fields with the last visit's digest): not staged."""
    etag: str
    modified: str
    digest: str


@dataclass(frozen=True)
class _Failure:
    """An outcome that is an error (its text for errors.log); each kind below is its own type, so one match
    tells them apart (a dataclass's == compares the type too)."""
    error: str


class Gone(_Failure):
    """404/410, or a harvest's link redirected off its object pages: the object is not at its address."""


class Barred(_Failure):
    """An answer that asking again does not change, the object not known gone: robots.txt disallows the
    page, a redirect that may not be followed."""


class Refused(_Failure):
    """429/503 with Retry-After: one attempt spent, its host held; asked again when the hold ends."""


class Unmatched(_Failure):
    """A 200 where no field matched (an error or maintenance page): a miss, asked again like a 5xx."""


class Failed(_Failure):
    """Any other failure (the network, a 5xx, no HTML page, a bug in the worker): asked again later."""


@dataclass(frozen=True)
class Held:
    """Not sent: its host is held (Retry-After). Still pending, no attempt spent."""


@dataclass(frozen=True)
class Abandoned:
    """Cut short because the daemon is stopping: still pending, no attempt spent."""


Result = Fetched | Unchanged | Gone | Barred | Refused | Unmatched | Failed | Held | Abandoned


@dataclass(frozen=True)
class ObjectOutcome:
    """What a worker hands back for one link of pass 2."""
    url: str
    index: int  # the link's line in the link file
    revisit: Revisit | None  # a done link fetched again (`refresh`): what its last visit kept
    result: Result
