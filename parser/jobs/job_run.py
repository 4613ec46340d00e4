"""What this process is doing with one two-pass job now (JobRun), and what a pass-2 worker hands
back for one link (ObjectOutcome). The passes (parser/jobs/pass1.py, parser/jobs/pass2.py) and what they share
(parser/jobs/job_context.py) all import these; this module imports none of them. Main thread only.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from linkgen.frontier import HostFrontier
from linkgen.linkfile import Revisit

from ..core.record import ObjectRecord


@dataclass
class ObjectOutcome:
    """What a worker hands back for one link of pass 2."""
    url: str
    index: int | None = None  # the link's line in the link file
    record: ObjectRecord | None = None
    empty: list[str] = field(default_factory=list)
    error: str | None = None
    final: bool = False  # 404/410 (or refused by robots.txt): never asked again
    abandoned: bool = False  # cut short because the daemon is stopping: still pending, no attempt spent
    held: bool = False  # not sent: its host is held (Retry-After); still pending, no attempt spent
    refused: bool = False  # 429/503 with Retry-After: one attempt, asked again when the hold ends
    unmatched: bool = False  # a page where no field matched: a miss, asked again like a 5xx
    revisit: Revisit | None = None  # a done link fetched again (`refresh`): what its last visit kept
    same: bool = False  # a revisit found it unchanged (304, or the same fields): not staged
    missed: bool = False  # a revisit was answered 404/410, or redirected off a harvest's object pages
    etag: str = ""  # the response's validators and the fields' digest, kept with the link
    modified: str = ""
    digest: str = ""
    warnings: list[str] = field(default_factory=list)  # typed fields whose text did not convert


@dataclass(eq=False)
class JobRun:
    """What this process does with one job now (main thread): pass 1's progress in this run, and
    pass 2 between the link file and the scheduler."""
    frontier: HostFrontier                     # links pulled from the file, a held host's apart
    name: str
    links: Iterator[tuple[int, str]] | None = None  # the link file's pending links, read as needed
    mine: set[int] = field(default_factory=set)     # lines pulled and not marked: queued, running or parked
    ready: list[ObjectOutcome] = field(default_factory=list)  # finished objects, staged at the next turn
    tally: Counter = field(default_factory=Counter)
    empty: Counter = field(default_factory=Counter)
    started: float = 0.0                       # time.monotonic() of the first fetch since the last summary
    said_at: float = 0.0
    handed: int = 0                            # objects handed out (counted against max_objects)
    seen_links: int = -1                       # len(link file) when its pending links were last asked for
    asked_at: float = 0.0
    drained: bool = False                      # the last look found no link to send now
    tried_since_extend: int = 0                # an open template range goes on after links were tried
    pass1_ran: bool = False                    # --once: pass 1 ran (or was given up) in this run
    harvest_at: float = 0.0                    # time.monotonic() the harvest started or resumed here
    wait_until: float = 0.0                    # --once: waiting for a hold until then (time.monotonic())
    given_up: bool = False                     # --once: the rest waits for a held host: next run

    @property
    def pages(self) -> tuple[str, str]:
        return (self.name, "page")

    @property
    def objects(self) -> tuple[str, str]:
        return (self.name, "object")
