"""A job's link file: the links pass 1 found and what pass 2 did with each, safe across kill -9.

Two append-only text files in the job's folder under STAGING_DIR:
- links.txt: one link a line, `URL <tab> depth <tab> where it came from` (depth '-' for templates);
  a link is known by its line number (the first link line is 0);
- links.status: `time <tab> status <tab> attempts <tab> URL <tab> detail <tab> line number`, the last
  line for a link wins: done (fetched and staged), gone (404/410: final), retry (failed, asked again
  after a backoff), refused (429/503 with Retry-After: asked again as soon as the host's hold ends,
  which the job keeps in its state.json), dead (failed or refused MAX_ATTEMPTS times: final), reopen
  (pending again). Lines without the line number (written by earlier versions) are matched by URL.
  A `done` line goes on with what a revisit needs: `etag <tab> last-modified <tab> digest <tab> wait
  <tab> misses` (the response's validators, a digest of the object's fields, the multiple of `refresh`
  the next visit waits: 1, 2, 4 or 8, and 1 after a 404/410 at the last visit). Readers of 0.5 take
  the first six fields and leave the rest; lines without them are read as wait 1, nothing known.
A link with no status line is pending. Appends are whole lines followed by fsync, and one that fails
half-way (a full disk) is taken back (parser/core/durable.py); a line torn by a crash is cut at start. A
status is written only after the record it covers is staged, so a kill loses at most the status of
records staged a moment before; the job runner recovers those from the staging CSV (see
parser/jobs/runner.py). A read-only LinkFile (for --dry-run) reads both files as they are and keeps every
change in memory.

Memory and time are O(1) per link, so a template of ten million links fits in a few tens of MiB:
links.txt is read as a stream and never held; each link costs two bytes in memory (its status and
its attempts); counters are kept up to date as statuses change; pass 2 reads the pending links from
a cursor that only moves forward, plus the few links tried before and pending again, whose URLs are
kept. A map from URL to line is built only for what must look links up by URL (a harvest's links,
an open template range), and a template's links are checked against the file by walking the file's
template lines alongside the template, in the order both have.

With a job's `refresh`, a done link is due again `refresh` times its wait after its last visit (Revisits):
per link, its due time (4 bytes), its wait and misses (1 byte) and where its last status line starts (8
bytes: the URL and validators are read from there when it is due, never held); and one queue a wait
(1, 2, 4, 8 times `refresh`) of (due time, line), in the order of the visits, so the links due now are
taken from the queues' heads without a look at the others.
"""
from __future__ import annotations

import os
import time
from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from parser.core import durable
from parser.core.dates import iso
from parser.core.durable import AppendFile

MAX_ATTEMPTS = 4            # a link that failed or was refused this many times (not 404/410) is given up: dead
RETRY_BASE = 600.0          # seconds before the first retry; each further retry waits 3 times longer
RETRY_MAX = 24 * 3600.0
STATUS_FILE = "links.status"  # beside links.txt: each link's status, a byte each
STATUSES = ("pending", "done", "gone", "dead", "retry", "refused")  # the code of each is its position
_CODE = {name: code for code, name in enumerate(STATUSES)}
PENDING, DONE, RETRY, REFUSED = _CODE["pending"], _CODE["done"], _CODE["retry"], _CODE["refused"]
MAX_WAIT_SHIFT = 3          # an unchanged object waits twice as long at each visit, up to 2**3 = 8 times refresh
TEMPLATE_WINDOW = 100_000   # a template's links already given, kept to drop a link the template repeats
READ_BLOCK = 1 << 20


@dataclass
class LinkState:
    status: str
    attempts: int
    at: float  # epoch seconds of the status line


def backoff(attempts: int) -> float:
    return min(RETRY_BASE * 3 ** max(attempts - 1, 0), RETRY_MAX)


@dataclass(frozen=True)
class Link:
    url: str
    depth: int | None = None
    origin: str = ""


@dataclass(frozen=True)
class Mark:
    url: str
    # done, gone, failed (becomes retry or dead), refused (becomes refused or dead), reopen; and at a
    # revisit of a done link: revisited (changed: waits `refresh` again), same (unchanged: waits twice as
    # long), missed (404/410: gone at the second in a row), kept (failed otherwise: done still, asked again
    # after its wait).
    status: str
    detail: str = ""
    index: int | None = None  # the link's line number, when the caller knows it (else found by URL)
    etag: str = ""            # done, same, missed, kept: the validators and digest the next visit uses
    modified: str = ""
    digest: str = ""


@dataclass(frozen=True)
class Revisit:
    """What a done link's last status line keeps for its next visit."""
    etag: str
    modified: str
    digest: str
    wait: int     # the multiple of refresh it waited: 1, 2, 4 or 8
    missed: bool  # a 404/410 at the last visit: one more is gone


REVISIT_STATUSES = ("revisited", "same", "missed", "kept")


class Links(Protocol):
    """What a two-pass job asks of its links: a LinkFile, or with SHARED the group's table
    (parser/group/shared_jobs.py's SharedLinkFile), which keeps the same calls."""

    @property
    def where(self) -> str: ...

    def close(self) -> None: ...

    def __len__(self) -> int: ...

    def __contains__(self, url: str) -> bool: ...

    def add(self, links: Iterable[Link]) -> list[Link]: ...

    def add_template(self, urls: Iterable[str], *, chunk: int = 10_000,
                     enough: Callable[[int], bool] | None = None) -> int: ...

    def index_of(self, url: str) -> int | None: ...

    def find(self, urls: set[str]) -> dict[str, int]: ...

    def status(self, url: str) -> str: ...

    def status_at(self, index: int) -> str: ...

    def pending(self, *, ignore_backoff: bool = False, hand_out: bool = True) -> Iterator[tuple[int, str]]: ...

    def mark(self, marks: Iterable[Mark]) -> list[tuple[Mark, LinkState]]: ...

    def revisit(self, index: int) -> Revisit | None: ...

    def counts(self) -> Counter[str]: ...


class LinkFile:
    def __init__(self, folder: Path, job: str, *, clock: Callable[[], float] = time.time, read_only: bool = False,
                 refresh: float | None = None):
        """refresh: seconds after which a done link is due again (None: never)."""
        self.folder = folder
        self.job = job
        self.clock = clock
        self.read_only = read_only
        self.links_path = folder / "links.txt"
        self.status_path = folder / STATUS_FILE
        self._count = 0                          # link lines (in the file, plus the read-only extras)
        self._on_disk = 0                        # link lines in links.txt
        self._disk_end = 0                       # bytes of links.txt that hold whole lines
        self._extra: list[str] = []              # read-only: links "appended" in memory
        self._status = bytearray()               # line number -> status code
        self._attempts = bytearray()             # line number -> attempts (capped at 255)
        self._counts: Counter = Counter()        # status -> links (pending included), kept up to date
        self._again: dict[int, str] = {}         # tried before and pending again (retry, refused, reopened)
        self._retry_at: dict[int, float] = {}    # line -> when a retry is due
        self._out: dict[int, str] = {}           # handed to pass 2 by pending() and not marked yet
        self._cursor: tuple[int, int | None] = (0, None)  # (line, byte offset or None) where untried links start
        self._index: dict[str, int] | None = None  # URL -> line, built on first need
        self._links: AppendFile | None = None
        self._statuses: AppendFile | None = None
        self.revisits = Revisits(refresh) if refresh else None
        self._reader: int | None = None          # a read-only descriptor of links.status (revisits)
        if not read_only:
            folder.mkdir(parents=True, exist_ok=True)
        self._load()
        if read_only:
            return
        self._links = open_append(self.links_path, f"# job {job}: object links found by pass 1, one a line: "
                                                    "URL, depth (link hops from the root), found on\n")
        self._disk_end = self._links.size()  # the header, when the file is new
        self._statuses = open_append(self.status_path, f"# job {job}: what pass 2 did with each link; the "
                                                        "last line for a link wins\n")

    # -- loading: one pass over each file ---------------------------------------------------------
    def _load(self) -> None:
        repair = not self.read_only
        self._disk_end = whole_lines_end(self.links_path, repair=repair)
        self._on_disk = self._count = count_lines(self.links_path, self._disk_end)
        self._status = bytearray(self._count)
        self._attempts = bytearray(self._count)
        self._counts["pending"] = self._count
        seen = bytearray(self._count)  # has a status line with its line number
        legacy: dict[str, tuple[str, int, float, int, tuple[int, int]]] = {}
        if self.revisits is not None:
            self.revisits.grow(self._count)
        for offset, line in iter_lines_at(self.status_path, whole_lines_end(self.status_path, repair=repair)):
            parts = line.split("\t")
            if len(parts) < 4:
                continue
            stamp, status, attempts, url = parts[:4]
            if status not in _CODE and status != "reopen":
                continue
            try:
                at = datetime.fromisoformat(stamp).timestamp()
                tries = int(attempts)
            except ValueError:
                continue
            if len(parts) >= 6 and parts[5].isdigit():
                index = int(parts[5])
                if index < self._count:
                    self._set(index, status, tries, at, url)
                    seen[index] = 1
                    if self.revisits is not None:
                        self.revisits.visited(index, status, at, offset, _wait(parts))
            else:
                legacy[url] = (status, tries, at, offset, _wait(parts))
        if legacy:  # status lines of an earlier version: matched by URL, in one more pass over links.txt
            for index, url in self._stream(0, 0):
                state = legacy.get(url)
                if state is not None and not seen[index]:
                    self._set(index, state[0], state[1], state[2], url)
                    if self.revisits is not None:
                        self.revisits.visited(index, state[0], state[2], state[3], state[4])
        first = self._status.find(PENDING)
        self._cursor = (self._count if first < 0 else first, None)

    def _set(self, index: int, status: str, attempts: int, at: float, url: str) -> None:
        """Give link `index` a status (`reopen`: pending again), keeping counters and queues up to date."""
        old = self._status[index]
        code = PENDING if status == "reopen" else _CODE[status]
        self._counts[STATUSES[old]] -= 1
        self._counts[STATUSES[code]] += 1
        self._status[index] = code
        self._attempts[index] = min(0 if status == "reopen" else attempts, 255)
        self._retry_at.pop(index, None)
        if code == RETRY:
            due = at + backoff(attempts)
            self._retry_at[index] = due
        if code in (RETRY, REFUSED) or status == "reopen":
            self._again[index] = url
        else:
            self._again.pop(index, None)

    def close(self) -> None:
        for file in (self._links, self._statuses):
            if file is not None:
                file.close()
        if self._reader is not None:
            os.close(self._reader)
            self._reader = None

    # -- reading links.txt as a stream --------------------------------------------------------------
    def _stream(self, index: int, offset: int | None) -> Iterator[tuple[int, str]]:
        """(line number, URL) of every link from line `index` on (at byte `offset`, when known)."""
        for number, raw, _end in self._stream_raw(index, offset):
            yield number, _url(raw)

    def _stream_lines(self, index: int, offset: int | None) -> Iterator[tuple[int, str, str, int]]:
        """(line number, URL, origin, byte offset after the line) from line `index` on."""
        for number, raw, end in self._stream_raw(index, offset):
            if isinstance(raw, str):  # a read-only extra, a URL only: where it came from is not kept
                yield number, raw, "", end
                continue
            fields = raw.rstrip(b"\n").decode("utf-8", "replace").split("\t")
            yield number, fields[0], fields[2] if len(fields) > 2 else "", end

    def _stream_raw(self, index: int, offset: int | None) -> Iterator[tuple[int, bytes | str, int]]:
        """(line number, the line's bytes, byte offset after it) from line `index` on; the read-only
        extras come last, as (line number, URL, -1)."""
        if index < self._on_disk:
            try:
                f = open(self.links_path, "rb")
            except FileNotFoundError:
                f = None
            if f is not None:
                with f:
                    number, position = 0, 0
                    if offset is not None:
                        f.seek(offset)
                        number, position = index, offset
                    end = self._disk_end
                    for raw in f:
                        position += len(raw)
                        if position > end:
                            break
                        if raw.startswith(b"#"):
                            continue
                        if number >= index:
                            yield number, raw, position
                        number += 1
        for k in range(max(index - self._on_disk, 0), len(self._extra)):
            yield self._on_disk + k, self._extra[k], -1

    def _url_index(self) -> dict[str, int]:
        """URL -> line number (the first line, should a URL be there twice): built once, on first need."""
        if self._index is None:
            self._index = {}
            for index, url in self._stream(0, 0):
                self._index.setdefault(url, index)
        return self._index

    def find(self, urls: set[str]) -> dict[str, int]:
        """The line numbers of these URLs (those in the file), in one pass, without the whole map."""
        if self._index is not None:
            return {u: self._index[u] for u in urls if u in self._index}
        found: dict[str, int] = {}
        for index, url in self._stream(0, 0):
            if url in urls:
                found.setdefault(url, index)
        return found

    # -- pass 1 -----------------------------------------------------------------------------------
    def __contains__(self, url: str) -> bool:
        return url in self._url_index()

    def __len__(self) -> int:
        return self._count

    @property
    def where(self) -> str:
        """Where the links are kept, for a summary line: ' in the file', or '' when in memory (read-only)."""
        return "" if self.read_only else " in the file"

    def add(self, links: Iterable[Link]) -> list[Link]:
        """Append the links not in the file yet (one write, one fsync); return those."""
        index = self._url_index()
        new: list[Link] = []
        for link in links:
            if link.url not in index:
                index[link.url] = self._count + len(new)
                new.append(link)
        self._append(new)
        return new

    def add_template(self, urls: Iterable[str], *, chunk: int = 10_000,
                     enough: Callable[[int], bool] | None = None) -> int:
        """Append a template's links that are not in the file yet, in chunks (one write, one fsync
        each); return how many. A template gives its links in the same order each time, so the
        file's template lines are walked alongside: nothing is held but a window of recent links (a
        link the template repeats within it is dropped). Should the file differ (the template or its
        values changed, or a date range inside another grew), the rest is checked against the map
        of URLs. `enough(pending)` (for --dry-run) stops once that many pending links are known."""
        known = ((n, url) for n, url, origin, _e in self._stream_lines(0, 0) if origin == "template") \
            if self._index is None else None
        index = self._index
        recent: set[str] = set()
        order: deque[str] = deque()
        batch: list[Link] = []
        added = pending = 0
        for url in urls:
            if url in recent:
                continue
            recent.add(url)
            order.append(url)
            if len(order) > TEMPLATE_WINDOW:
                recent.discard(order.popleft())
            if known is not None:
                line = next(known, None)
                if line is not None and line[1] == url:  # already in the file, at its place
                    if enough is not None:
                        pending += self._status[line[0]] == PENDING
                        if enough(pending):
                            break
                    continue
                if line is not None:  # the file differs from here on: check by URL
                    known = None
                    index = self._url_index()
            if index is not None and url in index:
                continue
            if index is not None:
                index[url] = self._count + len(batch)
            batch.append(Link(url, None, "template"))
            if len(batch) >= chunk:
                self._append(batch)
                added += len(batch)
                pending += len(batch)
                batch = []
            if enough is not None and enough(pending + len(batch)):
                break
        self._append(batch)
        return added + len(batch)

    def _append(self, new: list[Link]) -> None:
        if not new:
            return
        if self._links is None:  # read-only
            self._extra.extend(link.url for link in new)
        else:
            text = "".join(f"{link.url}\t{'-' if link.depth is None else link.depth}\t{_one_line(link.origin) or '-'}\n"
                           for link in new)
            append_lines(self._links, text)
            self._disk_end += len(text.encode("utf-8"))
            self._on_disk += len(new)
        self._count += len(new)
        self._status.extend(bytes(len(new)))
        self._attempts.extend(bytes(len(new)))
        self._counts["pending"] += len(new)
        if self.revisits is not None:
            self.revisits.grow(self._count)

    # -- pass 2 -----------------------------------------------------------------------------------
    def index_of(self, url: str) -> int | None:
        return self._url_index().get(url)

    def status(self, url: str) -> str:
        index = self.index_of(url)
        return "pending" if index is None else STATUSES[self._status[index]]

    def status_at(self, index: int) -> str:
        return STATUSES[self._status[index]]

    def pending(self, *, ignore_backoff: bool = False, hand_out: bool = True) -> Iterator[tuple[int, str]]:
        """(line, URL) of the links pass 2 should fetch now: first those tried before and pending
        again (reopened, refused, due for a retry; the caller keeps refused ones back while their host
        is held) and those handed out before and not marked, then the untried ones in file order, read
        from the file as the caller goes. With hand_out, the untried ones given are remembered until
        marked and the cursor moves past them, so the next call does not read them again."""
        now = self.clock()
        again = sorted({**self._out, **{i: u for i, u in self._again.items()
                                       if self._status[i] != RETRY or ignore_backoff
                                       or self._retry_at.get(i, 0.0) <= now}}.items())
        for index, url in again:
            code = self._status[index]
            if code == PENDING or code == REFUSED or code == RETRY or index in self._out:  # a revisit's: DONE
                yield index, url
        if self.revisits is not None:
            yield from self._due(self.revisits, now, hand_out)
        index, offset = self._cursor
        status, to_retry, out = self._status, self._again, self._out
        for number, raw, end in self._stream_raw(index, offset):
            if hand_out:
                self._cursor = (number + 1, end if end >= 0 else None)
            elif number == index and end >= 0 and self._cursor == (index, None):
                self._cursor = (index, end - len(raw))  # found once: later calls seek to it
            if status[number] != PENDING or number in to_retry or number in out:
                continue
            url = _url(raw)
            if not url:
                continue
            if hand_out:
                out[number] = url
            yield number, url

    def _due(self, revisits: Revisits, now: float, hand_out: bool) -> Iterator[tuple[int, str]]:
        """The done links due for a revisit now (`revisits`: the job has a refresh), oldest first; with
        hand_out, taken off their queues and remembered until marked."""
        for index in (revisits.take(now) if hand_out else revisits.peek(now)):
            if self._status[index] != DONE or index in self._out:
                continue
            url = self._status_fields(index)[3] if revisits.line_at[index] else ""
            if not url:
                continue
            if hand_out:
                self._out[index] = url
            yield index, url

    def revisit(self, index: int) -> Revisit | None:
        """A done link's validators, digest and wait, read from its last status line; None for a link
        that is not done (its first fetch), or when the job has no refresh."""
        if self.revisits is None or index >= self._count or self._status[index] != DONE \
                or not self.revisits.line_at[index]:
            return None
        parts = self._status_fields(index)
        flags = self.revisits.flags[index]
        return Revisit(etag=_part(parts, 6), modified=_part(parts, 7), digest=_part(parts, 8),
                       wait=1 << (flags & 3), missed=bool(flags & MISSED))

    def _status_fields(self, index: int) -> list[str]:
        """The fields of link `index`'s last status line, read from the file where it starts."""
        assert self.revisits is not None, "where a status line starts is kept for a refresh only"
        if self._reader is None:
            self._reader = os.open(self.status_path, os.O_RDONLY)
        offset = self.revisits.line_at[index]
        block = os.pread(self._reader, 4096, offset)
        while b"\n" not in block and len(block) % 4096 == 0 and block:  # a very long line (a long URL)
            block += os.pread(self._reader, 65536, offset + len(block))
        return block.split(b"\n", 1)[0].decode("utf-8", "replace").split("\t")

    def mark(self, marks: Iterable[Mark]) -> list[tuple[Mark, LinkState]]:
        """Record what happened to links (one write, one fsync); return each with its new state."""
        now = self.clock()
        stamp = iso(now)
        lines, out, visited = [], [], []
        for m in marks:
            index = m.index if m.index is not None and m.index < self._count else self.index_of(m.url)
            if index is None:
                continue
            revisit = m.status in REVISIT_STATUSES
            attempts = self._attempts[index]
            status, wait = m.status, ""
            if status in ("done", "gone", "failed", "refused") and not revisit:
                attempts += 1
            if status in ("failed", "refused"):
                status = "dead" if attempts >= MAX_ATTEMPTS else "retry" if status == "failed" else "refused"
            if status == "reopen":
                attempts = 0
            if status == "done" or status in REVISIT_STATUSES:
                shift, missed = self._next_wait(index, status)
                status = "gone" if missed > 1 else "done"
                wait = f"\t{_one_line(m.etag)}\t{_one_line(m.modified)}\t{m.digest}\t{1 << shift}\t{missed}"
            lines.append(f"{stamp}\t{status}\t{attempts}\t{m.url}\t{_one_line(m.detail)}\t{index}{wait}\n")
            self._set(index, status, attempts, float(int(now)), m.url)
            self._out.pop(index, None)
            visited.append((index, status, lines[-1]))
            out.append((m, LinkState(status, attempts, float(int(now)))))
        if lines and self._statuses is not None:  # not read-only
            start = self._statuses.size()
            append_lines(self._statuses, "".join(lines))
            if self.revisits is not None:
                for index, status, line in visited:
                    self.revisits.visited(index, status, float(int(now)), start, _wait(line.rstrip("\n").split("\t")))
                    start += len(line.encode("utf-8"))
        elif self.revisits is not None:  # read-only: nothing on disk to read a revisit from; not asked again
            for index, _status, _line in visited:
                self.revisits.forget(index)
        return out

    def _next_wait(self, index: int, status: str) -> tuple[int, int]:
        """(log2 of the wait, misses in a row) after a visit of link `index` ended in `status`."""
        flags = self.revisits.flags[index] if self.revisits is not None else 0
        shift, missed = flags & 3, (flags & MISSED) >> 2
        if status in ("done", "revisited"):  # fetched for the first time, or changed since the last visit
            return 0, 0
        if status == "same":
            return min(shift + 1, MAX_WAIT_SHIFT), 0
        if status == "missed":
            return shift, missed + 1
        return shift, missed  # kept: a failure tells neither

    def counts(self) -> Counter[str]:
        """How many links are in each status ('pending' for those without one)."""
        return Counter(self._counts)


MISSED = 4  # Revisits.flags: bit 2, a 404/410 at the last visit; bits 0-1: log2 of the wait


class Revisits:
    """When each done link is due again: `refresh` times its wait after its last visit. Per link a due time
    (epoch seconds, 0: none), flags (wait, missed) and the offset of its last status line; a FIFO queue per
    wait of (due, line), appended in visit order, so each queue's head is its earliest. An entry whose
    link was visited again since (its due time differs) is dropped when it reaches the head."""

    def __init__(self, refresh: float):
        self.refresh = refresh
        self.due = array("I")
        self.flags = bytearray()
        self.line_at = array("Q")
        self._queues = [(array("I"), array("I"), [0]) for _ in range(MAX_WAIT_SHIFT + 1)]  # dues, lines, head

    def grow(self, count: int) -> None:
        more = count - len(self.due)
        if more > 0:
            self.due.frombytes(bytes(self.due.itemsize * more))
            self.flags.extend(bytes(more))
            self.line_at.frombytes(bytes(self.line_at.itemsize * more))

    def visited(self, index: int, status: str, at: float, offset: int, wait: tuple[int, int]) -> None:
        """Link `index` got a status line at byte `offset`, time `at`: a done one is due again after its wait
        (after a 404/410, after `refresh`: the next visit tells), any other is not revisited."""
        if status != "done":
            self.forget(index)
            return
        shift, missed = wait
        queue = 0 if missed else shift
        due = min(int(at + self.refresh * (1 << queue)) + 1, 0xFFFFFFFF)
        self.due[index], self.flags[index], self.line_at[index] = due, shift | (MISSED if missed else 0), offset
        dues, lines, _head = self._queues[queue]
        dues.append(due)
        lines.append(index)

    def forget(self, index: int) -> None:
        self.due[index] = 0
        self.line_at[index] = 0
        self.flags[index] = 0

    def take(self, now: float) -> Iterator[int]:
        """The lines due by `now`, each taken off its queue as it is given, the earliest first."""
        while True:
            best, earliest = None, now
            for queue in self._queues:
                due = self._head(queue)
                if due is not None and due <= earliest:
                    best, earliest = queue, due
            if best is None:
                return
            dues, lines, head = best
            index = lines[head[0]]
            head[0] += 1
            if head[0] > 65536 and head[0] * 2 > len(dues):  # let the queue's taken part go
                del dues[:head[0]], lines[:head[0]]
                head[0] = 0
            yield index

    def _head(self, queue: tuple[array, array, list[int]]) -> int | None:
        """The due time of the queue's first entry still standing (those replaced since are dropped)."""
        dues, lines, head = queue
        while head[0] < len(dues) and self.due[lines[head[0]]] != dues[head[0]]:
            head[0] += 1  # visited again since: its later entry is in a queue too
        return dues[head[0]] if head[0] < len(dues) else None

    def peek(self, now: float) -> Iterator[int]:
        """The lines due by `now`, left on their queues."""
        for dues, lines, head in self._queues:
            for k in range(head[0], len(dues)):
                if dues[k] > now:
                    break
                if self.due[lines[k]] == dues[k]:
                    yield lines[k]

    def next_due(self) -> float | None:
        """The earliest time a link is due again (a queue head may be an entry since replaced: early, not late)."""
        heads = [due for due in map(self._head, self._queues) if due is not None]
        return float(min(heads)) if heads else None


def _wait(parts: list[str]) -> tuple[int, int]:
    """(log2 of the wait, misses) of a status line's fields; (0, 0) for a line of an earlier version."""
    wait, missed = _part(parts, 9), _part(parts, 10)
    shift = {"1": 0, "2": 1, "4": 2, "8": 3}.get(wait, 0)
    return shift, int(missed) if missed.isdigit() else 0


def _part(parts: list[str], k: int) -> str:
    return parts[k] if len(parts) > k else ""


def whole_lines_end(path: Path, *, repair: bool = True) -> int:
    """The size of the file's whole lines; a torn last line (a crash mid-append) is cut off the file
    too, unless repair is False. Reads only the file's tail."""
    if repair:
        durable.repair_tail(path, durable.whole_lines, what="line", shown=f"{path.parent.name}/{path.name}")
    return durable.whole_length_of(path, durable.whole_lines)


def count_lines(path: Path, end: int) -> int:
    """Lines in the first `end` bytes that are not comments, counted in blocks."""
    if end == 0:
        return 0
    lines = comments = 0
    previous = b"\n"
    with open(path, "rb") as f:
        left = end
        while left > 0:
            block = f.read(min(READ_BLOCK, left))
            if not block:
                break
            left -= len(block)
            lines += block.count(b"\n")
            comments += block.count(b"\n#") + (previous == b"\n" and block[:1] == b"#")
            previous = block[-1:]
    return lines - comments


def iter_lines(path: Path, end: int) -> Iterator[str]:
    """The file's whole lines up to byte `end`, without comments, as a stream."""
    for _offset, line in iter_lines_at(path, end):
        yield line


def iter_lines_at(path: Path, end: int) -> Iterator[tuple[int, str]]:
    """(byte offset where it starts, line) of the file's whole lines up to byte `end`, without comments."""
    if end == 0:
        return
    with open(path, "rb") as f:
        position = 0
        for raw in f:
            start = position
            position += len(raw)
            if position > end:
                break
            if raw.startswith(b"#") or raw == b"\n":  # comments; a blank line is no status either
                continue
            yield start, raw.rstrip(b"\n").decode("utf-8", "replace")


def read_lines(path: Path, *, repair: bool = True) -> list[str]:
    """The file's whole lines, without comments; a torn last line (a crash mid-append) is cut off
    (from the file too, unless repair is False)."""
    return list(iter_lines(path, whole_lines_end(path, repair=repair)))


def open_append(path: Path, header: str) -> AppendFile:
    """A link file (or harvest.log) open for appending; `header` is written when the file is new."""
    return AppendFile(path, header=header.encode("utf-8"))


def append_lines(file: AppendFile, text: str) -> None:
    """Write whole lines then fsync; a write that fails half-way is taken back, and the full disk is
    the daemon's StorageError (critical)."""
    file.append(text.encode("utf-8"))


def _url(raw: bytes | str) -> str:
    """The URL of a links.txt line (bytes), or a read-only extra (already a URL)."""
    if isinstance(raw, str):
        return raw
    tab = raw.find(b"\t")
    return raw[:tab if tab >= 0 else len(raw.rstrip(b"\n"))].decode("utf-8", "replace")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
