"""The status view as values: what `status`, `status --json`, the status page and `/metrics` all read.

status.collect() builds one StatusView; each reader takes the attributes it shows, so a field renamed or
dropped is an error the type checker finds in every reader, not a KeyError on a page at run time.
as_json() is the `status --json` and `/status.json` document: the fields in this order, nested as here.
What daemon.json holds (the last flush, the counters) arrives as JSON and is typed as the dicts it is.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict


class LastFlush(TypedDict):
    """daemon.json's last flush (core/runinfo.RunInfo.flushed)."""
    at: str
    why: str
    ok: bool
    rows: int
    already: int
    seconds: float
    error: str | None


@dataclass(frozen=True)
class DaemonStatus:
    running: bool
    pid: int | None
    started: str | None          # ISO 8601 UTC, as every time in the view
    uptime_seconds: int | None   # while it runs
    updated: str | None          # when it last wrote daemon.json
    status_page: str | None      # the page's address while it runs


@dataclass(frozen=True)
class TableStaged:
    """Rows waiting for one table: its staging CSV and the batches of flushes not yet committed."""
    table: str
    rows: int
    batches: int


@dataclass(frozen=True)
class HashFile:
    table: str
    file: str
    bytes: int
    hashes: int
    since: str | None            # the oldest mark: the oldest line was written then, at the latest
    span_seconds: int | None


@dataclass(frozen=True)
class HashesStatus:
    window: str | None           # UNIQUE_WINDOW as a person writes it; None: no window
    window_seconds: float | None
    files: list[HashFile]        # none unless DEDUP = "hashfile"


@dataclass(frozen=True)
class StateDamage:
    source: str | None           # None: the file as a whole
    what: str


@dataclass(frozen=True)
class StateFileStatus:
    """state.json's damage (a hand edit, a disk error) and what the daemon does about it."""
    path: str
    whole: bool
    damage: list[StateDamage]
    action: str


@dataclass(frozen=True)
class SourceStatus:
    name: str
    protocol: str
    tags: list[str]
    url: str                     # credentials redacted
    state: str                   # what a person reads: "failing 3", "ok, 304"
    state_kind: str              # what sorts and colours: a key of status.RANK
    failures: int
    dead: bool
    last_status: int | None
    last_outcome: str | None
    last_poll: str | None
    last_success: str | None
    last_new: str | None
    new_24h: int
    next_poll: str | None
    held_until: str | None
    hourly: Sequence[Sequence[Any]]  # [hour, new, errors], oldest first (sources/state.py)
    totals: Mapping[str, int]


@dataclass(frozen=True)
class JobStatus:
    name: str
    enabled: bool
    links: dict[str, int]        # a count for each of status.LINK_STATUSES


@dataclass(frozen=True)
class FieldCoverage:
    """A feed's or a job's field coverage at its last pass (parser/core/coverage.py), from daemon.json."""
    kind: str                    # "source" or "job"
    name: str
    records: int                 # the records of its last pass
    shares: dict[str, float]     # field -> the share of them that had it
    usual: dict[str, float | None]  # field -> the median of its recent passes (None: too few yet)
    low: list[str]               # fields said in errors.log as fallen below half their usual share


@dataclass(frozen=True)
class StatusView:
    now: str
    params: str
    daemon: DaemonStatus
    last_flush: LastFlush | None
    flushes: list[list[Any]]     # [at, rows, seconds, ok], oldest first (core/runinfo.py)
    totals: dict[str, float]
    staged: list[TableStaged]
    hashes: HashesStatus
    state_file: StateFileStatus | None
    sources: list[SourceStatus]  # worst first
    jobs: list[JobStatus]
    coverage: list[FieldCoverage] = field(default_factory=list)  # the sources' then the jobs'

    def as_json(self) -> dict[str, Any]:
        return asdict(self)
