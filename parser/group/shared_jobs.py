"""SHARED = True for two-pass jobs: the link frontier, pass 1's turn and per-host politeness live in
the shared PostgreSQL (SQL in db/coord.py), so N daemons fetch each link once and space their
requests to a host as one.

- SharedLinkFile stands in for linkgen.linkfile.LinkFile (the same methods the job runner calls): a
  link is known by its row id instead of its line; pass 2's pending() claims links in leased batches
  (SKIP LOCKED), mark() writes their status and ends the lease. Links claimed and not marked (a stop,
  a kill) come back to the group when the lease ends.
- SharedJobFiles runs pass 1 only while it holds the job's advisory lock (session-level, so a dead
  daemon's lock goes with its connection), and keeps pass 1's last run in the database.
- Per-host politeness (a job's delay, Retry-After holds) is the group's in SharedHostSlots
  (parser/group/shared_hosts.py), the fetcher's own, which every request asks.
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from db.coord import Coordinator
from db.coord_jobs import JobTables
from linkgen.linkfile import MAX_ATTEMPTS, Link, LinkState, Mark, backoff

from ..core.errors import StorageError
from ..jobs.job_files import JobFiles
from ..settings.params import Settings

COUNTS_TTL = 0.5        # seconds counts() may be old at least (pass 2 asks after every batch)


class SharedLinkFile:
    def __init__(self, job: str, settings: Settings, clock: Callable[[], float]):
        self.job = job
        self.clock = clock
        self.lease = settings.shared_lease
        # Claimed a window at a time, as the frontier pulls: a daemon holds no more links than it
        # can have in flight, so the others find the rest.
        self.claim = settings.concurrency
        self.coord = Coordinator(settings.db_url)
        self.coord.create_schema()
        self.tables = JobTables(self.coord)
        self._out: dict[int, str] = {}  # claimed by this daemon, not marked yet
        self._extended = time.monotonic()
        self._count = self.tables.link_count(job)
        self._counts: tuple[float, Counter] = (float("-inf"), Counter())
        self._counts_ttl = COUNTS_TTL

    def close(self) -> None:
        try:
            self.tables.release_links(self.job)  # claimed and not fetched: the others' at once
        except StorageError:
            pass  # the leases end by themselves
        self.coord.close()

    # -- pass 1 -------------------------------------------------------------------------------
    where = " in the shared table"  # for pass 1's summary line, as LinkFile's " in the file"

    def __len__(self) -> int:
        return self._count

    def __contains__(self, url: str) -> bool:
        return self.index_of(url) is not None

    def add(self, links: Iterable[Link]) -> list[Link]:
        batch = {link.url: link for link in links}
        new = set(self.tables.add_links(self.job, [(k.url, k.depth, k.origin) for k in batch.values()]))
        self._count += len(new)
        return [link for url, link in batch.items() if url in new]

    def add_template(self, urls: Iterable[str], *, chunk: int = 10_000,
                     enough: Callable[[int], bool] | None = None) -> int:
        added, batch = 0, []
        for url in urls:
            batch.append(Link(url, None, "template"))
            if len(batch) >= chunk:
                added += len(self.add(batch))
                batch = []
        return added + len(self.add(batch))

    def index_of(self, url: str) -> int | None:
        rows = self.tables.link_rows(self.job, urls=[url])
        return rows[0][0] if rows else None

    def find(self, urls: set[str]) -> dict[str, int]:
        return {url: id_ for id_, url, _ in self.tables.link_rows(self.job, urls=sorted(urls))}

    def status(self, url: str) -> str:
        rows = self.tables.link_rows(self.job, urls=[url])
        return rows[0][2] if rows else "pending"

    def status_at(self, index: int) -> str:
        rows = self.tables.link_rows(self.job, ids=[index])
        return rows[0][2] if rows else "pending"

    # -- pass 2 -------------------------------------------------------------------------------
    def pending(self, *, ignore_backoff: bool = False, hand_out: bool = True) -> Iterator[tuple[int, str]]:
        """Links this daemon claimed and has not marked yet, then new claims, a batch at a time as
        the caller pulls. hand_out=False: a look at some open links, nothing claimed."""
        if not hand_out:
            yield from self.tables.open_links(self.job, 1_000)
            return
        if self._out:  # claimed in an earlier pass and not marked: still ours, unless a lease ended
            still_leased = self.tables.extend_link_leases(list(self._out), self.lease)
            self._out = {i: u for i, u in self._out.items() if i in still_leased}
            self._extended = time.monotonic()
        yield from sorted(self._out.items())
        while True:
            claimed = self.tables.claim_links(self.job, self.claim, self.lease, any_time=ignore_backoff)
            if not claimed:
                return
            self._out.update(claimed)
            yield from claimed

    def mark(self, marks: Iterable[Mark]) -> list[tuple[Mark, LinkState]]:
        """As LinkFile.mark: done, gone, failed (retry or dead), refused (or dead), reopen."""
        marks = list(marks)
        unindexed = {m.url for m in marks if m.index is None}  # pass 1's reopen marks: one query for all
        by_url = self.find(unindexed) if unindexed else {}
        ids = {m: (m.index if m.index is not None else by_url.get(m.url)) for m in marks}
        attempts_now = self.tables.link_attempts([i for i in ids.values() if i is not None])
        now = float(int(self.clock()))
        rows, out = [], []
        for m in marks:
            index = ids[m]
            if index is None or index not in attempts_now:
                continue
            attempts, status, wait = attempts_now[index], m.status, 0.0
            if status in ("done", "gone", "failed", "refused"):
                attempts += 1
            if status in ("failed", "refused"):
                status = "dead" if attempts >= MAX_ATTEMPTS else "retry" if status == "failed" else "refused"
            if status == "retry":
                wait = backoff(attempts)
            if status == "reopen":
                status, attempts = "pending", 0
            rows.append((index, status, attempts, m.detail, wait))
            self._out.pop(index, None)
            out.append((m, LinkState(status, attempts, now)))
        self.tables.mark_links(rows)
        _, counts = self._counts  # kept close between two reads (another daemon's marks show at the next)
        for _m, state in out:
            counts["pending"] -= 1
            counts[state.status] += 1
        if self._out and time.monotonic() - self._extended > self.lease / 3:
            # Claimed links waiting for their host's turn: still this daemon's.
            self.tables.extend_link_leases(list(self._out), self.lease)
            self._extended = time.monotonic()
        return out

    def revisit(self, index: int) -> None:
        """A job's `refresh` is not kept in the group's link table yet: no link is fetched again."""
        return None

    def counts(self) -> Counter[str]:
        """The group's counts, kept up to date with this daemon's marks between two reads. A read
        costs a scan of the job's links, so reads are spaced by 50 times what the last one took
        (at least COUNTS_TTL): a few milliseconds' table is read twice a second, a million links'
        every few seconds."""
        at, counts = self._counts
        if time.monotonic() - at > self._counts_ttl:
            started = time.monotonic()
            counts = Counter({"pending": 0, **self.tables.link_counts(self.job)})
            self._counts = (time.monotonic(), counts)
            self._counts_ttl = max(COUNTS_TTL, 50 * (time.monotonic() - started))
        return Counter(counts)


class SharedJobFiles(JobFiles):
    """A job whose links and pass 1 turn are the group's (its sink, harvest log and holds stay local)."""
    revisits = False  # the group's link table keeps no revisit times yet: each object is fetched once
    links: SharedLinkFile

    def _open_links(self, settings: Settings, clock: Callable[[], float]) -> SharedLinkFile:
        self.clock = clock
        self._locked = False
        return SharedLinkFile(self.job.name, settings, clock)

    @property
    def coord(self) -> JobTables:
        return self.links.tables

    def pass1_due(self, now: float) -> bool:
        """Due by the group's last pass 1 (or a harvest half done here), and this daemon's turn: the
        job's lock is free. Checked again under the lock: another daemon may just have run it."""
        if self._locked:
            return True
        if not (self.harvest and self.harvest.active or self._group_due()):
            return False
        self._locked = self.coord.try_job_lock(self.job.name)
        if self._locked and not (self.harvest and self.harvest.active or self._group_due()):
            self.coord.release_job_lock(self.job.name)
            self._locked = False
        return self._locked

    def _group_due(self) -> bool:
        since = self.coord.seconds_since_pass1(self.job.name)
        return since is None or since >= self.job.interval

    @property
    def pass1_at(self) -> float:
        since = self.coord.seconds_since_pass1(self.job.name)
        if since is None:
            return 0.0
        now = self.clock()
        if not self._locked and since >= self.job.interval:  # another daemon's turn: ask again soon
            return now + 1.0 - self.job.interval
        return now - since

    @pass1_at.setter
    def pass1_at(self, value: float) -> None:
        pass  # JobFiles.__init__ sets the local file's value; the group's is in the database

    def pass1_finished(self, at: float) -> None:
        super().pass1_finished(at)
        self.coord.pass1_finished(self.job.name)
        if self._locked:
            self.coord.release_job_lock(self.job.name)
            self._locked = False
