"""What this process is doing with one two-pass job now (JobRun): pass 1's progress in this run, pass 2's
links between the link file and the scheduler, and pass 2's counts since its last summary. Each change is
a method of JobRun; the passes (parser/jobs/pass1.py, parser/jobs/pass2.py) and what they share
(parser/jobs/job_context.py) read the rest through its properties. Main thread only.
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Iterator

from linkgen.frontier import HostFrontier
from linkgen.linkfile import Links

from .outcomes import Held, ObjectOutcome

REREAD_EVERY = 1.0         # seconds: the link file is asked again this often for retries that came due
PULL_MAX = 10_000          # links pulled at most per look for one on a host not held

Link = tuple[int, str]     # a pass-2 link as the frontier queues it: (line in the link file, URL)


class JobRun:
    """What this process does with one job now (main thread)."""

    def __init__(self, name: str, frontier: HostFrontier):
        self.name = name
        self._frontier = frontier              # links pulled from the file, a held host's apart
        self._links: Iterator[Link] | None = None  # the link file's pending links, read as needed
        self._pulled: set[int] = set()         # lines pulled and not marked: queued, running or parked
        self._ready: list[ObjectOutcome] = []  # finished objects, staged at the next turn
        self._tally: Counter[str] = Counter()  # pass 2's counts since its last summary
        self._empty: Counter[str] = Counter()  # the fields found empty, by name, since then
        self._started = 0.0                    # time.monotonic() of the first fetch since the last summary
        self._summary_at = 0.0                 # time.monotonic() the counts of the next summary began
        self._sent = 0                         # objects sent to the scheduler (counted against max_objects)
        self._seen_links = -1                  # len(link file) when its pending links were last asked for
        self._asked_at = 0.0
        self._drained = False                  # the last look found no link to send now
        self._tried_since_extend = 0           # an open template range goes on after links were tried
        self._pass1_ran = False                # --once: pass 1 ran (or was given up) in this run
        self._harvest_at = 0.0                 # time.monotonic() the harvest started or resumed here
        self._wait_until = 0.0                 # --once: waiting for a hold until then (time.monotonic())
        self._given_up = False                 # --once: the rest waits for a held host: next run

    @property
    def pages(self) -> tuple[str, str]:
        """The scheduler's owner of this job's harvest pages."""
        return (self.name, "page")

    @property
    def objects(self) -> tuple[str, str]:
        """The scheduler's owner of this job's objects."""
        return (self.name, "object")

    # -- pass 1 -----------------------------------------------------------------------------------
    @property
    def pass1_ran(self) -> bool:
        return self._pass1_ran

    def pass1_done(self) -> None:
        self._pass1_ran = True

    @property
    def harvest_timed(self) -> bool:
        """The harvest's time is being taken in this process (it started or resumed here)."""
        return bool(self._harvest_at)

    def harvest_began(self, now: float) -> None:
        self._harvest_at = now

    def harvest_ended(self, now: float) -> float:
        """Seconds the harvest ran in this process (0 when it was not timed here)."""
        seconds = now - (self._harvest_at or now)
        self._harvest_at = 0.0
        return seconds

    # -- --once: waiting for held hosts ----------------------------------------------------------
    @property
    def given_up(self) -> bool:
        return self._given_up

    def give_up(self) -> None:
        """The rest waits for a held host longer than --once may: left for the next run."""
        self._given_up = True

    def waiting(self, now: float) -> bool:
        return now < self._wait_until

    def wait_till(self, until: float) -> None:
        self._wait_until = until

    # -- pass 2: links from the file to the scheduler --------------------------------------------
    @property
    def sent(self) -> int:
        return self._sent

    @property
    def drained(self) -> bool:
        return self._drained

    @property
    def has_ready(self) -> bool:
        return bool(self._ready)

    @property
    def parked_count(self) -> int:
        return self._frontier.parked_count

    def parked_urls(self) -> list[str]:
        """One link's URL for each held host that has links parked."""
        return [url for _, url in self._frontier.parked_hosts().values()]

    def sent_out(self, now: float) -> None:
        """A link went to the scheduler: the summary's time starts with the first one since the last."""
        if not self._started:
            self._started = self._summary_at = now
        self._sent += 1

    def offered(self, *, drained: bool) -> None:
        """A turn's offer ended: `drained`, it found no link to send now (else the window was full)."""
        self._drained = drained

    def links_added(self) -> None:
        """Links were added to the file (an open range went on): the next turn looks again."""
        self._drained = False

    def next_link(self, links: Links, *, retries_at_once: bool) -> Link | None:
        """The next link whose host is not held: from the frontier, else pulled from the link file.
        `retries_at_once` (--once: parser/jobs/job_pace.py): the first look takes earlier runs' retries now."""
        for _ in range(PULL_MAX):
            item = self._frontier.pop()
            if item is not None:
                return item
            item = self._pull(links, retries_at_once)
            if item is None:
                return None
            self._frontier.append(item)
        return None

    def _pull(self, links: Links, retries_at_once: bool) -> Link | None:
        """One pending link from the file that is not already ours. The file is asked again when links
        were added (a harvest going on) or, for retries come due, every REREAD_EVERY seconds."""
        while True:
            if self._links is None:
                if len(links) == self._seen_links and time.monotonic() - self._asked_at < REREAD_EVERY:
                    return None
                # --once asks again at once for the retries of earlier runs, only on its first look: a link
                # that fails in this run waits for its backoff like any other.
                self._links = links.pending(ignore_backoff=retries_at_once and self._seen_links < 0)
                self._seen_links, self._asked_at = len(links), time.monotonic()
                fresh = True
            else:
                fresh = False
            for index, url in self._links:
                if index not in self._pulled:
                    self._pulled.add(index)
                    return index, url
            self._links = None
            if fresh:
                return None

    def back(self, outcome: ObjectOutcome) -> None:
        """An object back from its worker: staged at the next turn; one not sent (its host held) waits
        apart, asked when the hold ends."""
        if isinstance(outcome.result, Held):
            self._frontier.park((outcome.index, outcome.url))
        else:
            self._ready.append(outcome)

    def take_ready(self) -> list[ObjectOutcome]:
        """The objects back since the last turn, to be staged now."""
        ready, self._ready = self._ready, []
        return ready

    def settled(self, ready: list[ObjectOutcome], again: Iterable[tuple[int | None, str]]) -> None:
        """`ready` was staged and marked: the refused links `again` stay ours, parked until their host's hold
        ends; the others are no longer (marked, or abandoned so the file gives them again)."""
        kept = set()
        for item in again:
            self._frontier.park(item)
            kept.add(item[0])
        for outcome in ready:
            if outcome.index not in kept:
                self._pulled.discard(outcome.index)
        self._tried_since_extend += len(ready)

    def take_tried(self) -> int:
        """Links tried since an open template range last went on; counted again from 0."""
        tried, self._tried_since_extend = self._tried_since_extend, 0
        return tried

    # -- pass 2's counts ---------------------------------------------------------------------------
    def count(self, what: str, n: int = 1) -> None:
        self._tally[what] += n

    def count_empty(self, fields: Iterable[str]) -> None:
        self._empty.update(fields)

    @property
    def has_counts(self) -> bool:
        return bool(self._tally)

    def summary_due(self, now: float, every: float) -> bool:
        return bool(self._tally) and now - self._summary_at >= every

    def take_counts(self) -> tuple[Counter[str], Counter[str], float]:
        """The counts since the last summary (tally, empty fields, when the first fetch went out), handed
        over for the summary; counted again from nothing."""
        taken = self._tally, self._empty, self._started
        self._tally, self._empty, self._started = Counter(), Counter(), 0.0
        return taken
