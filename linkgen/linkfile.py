"""A job's link file: the links pass 1 found and what pass 2 did with each, safe across kill -9.

Two append-only text files in the job's folder under STAGING_DIR:
- links.txt: one link a line, `URL <tab> depth <tab> where it came from` (depth '-' for templates);
- links.status: `time <tab> status <tab> attempts <tab> URL <tab> detail`, the last line for a URL
  wins: done (fetched and staged), gone (404/410: final), retry (failed, asked again after a
  backoff), refused (429/503 with Retry-After: asked again as soon as the host's hold ends, which
  the job keeps in its state.json), dead (failed or refused MAX_ATTEMPTS times: final), reopen
  (pending again).
A link with no status line is pending. Appends are whole lines followed by fsync; a line torn by
a crash is cut at start. A status is written only after the record it covers is staged, so a
kill loses at most the status of records staged a moment before; the job runner recovers those
from the staging CSV (see parser/jobs.py). A read-only LinkFile (for --dry-run) reads both files
as they are and keeps every change in memory.
"""
from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from parser.errors import StorageError

log = logging.getLogger("parser")

MAX_ATTEMPTS = 4            # a link that failed or was refused this many times (not 404/410) is given up: dead
RETRY_BASE = 600.0          # seconds before the first retry; each further retry waits 3 times longer
RETRY_MAX = 24 * 3600.0
FINAL = ("done", "gone", "dead")


@dataclass
class LinkState:
    status: str
    attempts: int
    at: float  # epoch seconds of the status line

    @property
    def retry_at(self) -> float:
        return self.at + backoff(self.attempts)


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
    status: str   # done, gone, failed (becomes retry or dead), refused (becomes refused or dead), reopen
    detail: str = ""


class LinkFile:
    def __init__(self, folder: Path, job: str, *, clock: Callable[[], float] = time.time, read_only: bool = False):
        self.folder = folder
        self.job = job
        self.clock = clock
        self.read_only = read_only
        self.links_path = folder / "links.txt"
        self.status_path = folder / "links.status"
        self.links: dict[str, None] = {}       # insertion-ordered set: the file's order
        self.states: dict[str, LinkState] = {}
        self._links_fd = self._status_fd = None
        if read_only:
            self._load()
            return
        folder.mkdir(parents=True, exist_ok=True)
        self._load()
        self._links_fd = open_append(self.links_path, f"# job {job}: object links found by pass 1, one a line: "
                                                       "URL, depth (link hops from the root), found on\n")
        self._status_fd = open_append(self.status_path, f"# job {job}: what pass 2 did with each link; the "
                                                         "last line for a URL wins\n")

    # -- loading --------------------------------------------------------------------------------
    def _load(self) -> None:
        repair = not self.read_only
        for line in read_lines(self.links_path, repair=repair):
            url = line.split("\t", 1)[0]
            if url:
                self.links[url] = None
        for line in read_lines(self.status_path, repair=repair):
            parts = line.split("\t", 4)
            if len(parts) < 4 or parts[3] not in self.links:
                continue
            stamp, status, attempts, url = parts[:4]
            try:
                at = datetime.fromisoformat(stamp).timestamp()
                self.states[url] = LinkState(status, int(attempts), at)
            except ValueError:
                continue
            if status == "reopen":
                del self.states[url]

    def close(self) -> None:
        for fd in (self._links_fd, self._status_fd):
            if fd is None:
                continue
            try:
                os.close(fd)
            except OSError:
                pass

    # -- pass 1 -----------------------------------------------------------------------------------
    def __contains__(self, url: str) -> bool:
        return url in self.links

    def __len__(self) -> int:
        return len(self.links)

    def add(self, links: Iterable[Link]) -> list[Link]:
        """Append the links not in the file yet (one write, one fsync); return those."""
        new: list[Link] = []
        for link in links:
            if link.url not in self.links:
                self.links[link.url] = None
                new.append(link)
        if new and not self.read_only:
            append_lines(self._links_fd, "".join(
                f"{link.url}\t{'-' if link.depth is None else link.depth}\t{_one_line(link.origin) or '-'}\n"
                for link in new))
        return new

    # -- pass 2 -----------------------------------------------------------------------------------
    def status(self, url: str) -> str:
        state = self.states.get(url)
        return state.status if state else "pending"

    def pending(self, *, ignore_backoff: bool = False) -> list[str]:
        """Links pass 2 should fetch now, in file order: never tried, reopened, refused (the caller keeps
        them back while their host is held), or due for a retry."""
        now = self.clock()
        out = []
        for url in self.links:
            state = self.states.get(url)
            if state is None or state.status == "refused" \
                    or (state.status == "retry" and (ignore_backoff or state.retry_at <= now)):
                out.append(url)
        return out

    def next_retry(self) -> float | None:
        times = [s.retry_at for s in self.states.values() if s.status == "retry"]
        return min(times) if times else None

    def mark(self, marks: Iterable[Mark]) -> list[tuple[Mark, LinkState]]:
        """Record what happened to links (one write, one fsync); return each with its new state."""
        now = self.clock()
        stamp = datetime.fromtimestamp(int(now), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        lines, out = [], []
        for m in marks:
            if m.url not in self.links:
                continue
            before = self.states.get(m.url)
            attempts = before.attempts if before else 0
            status = m.status
            if status in ("done", "gone", "failed", "refused"):
                attempts += 1
            if status in ("failed", "refused"):
                status = "dead" if attempts >= MAX_ATTEMPTS else "retry" if status == "failed" else "refused"
            if status == "reopen":
                attempts = 0
            state = LinkState(status, attempts, float(int(now)))
            lines.append(f"{stamp}\t{status}\t{attempts}\t{m.url}\t{_one_line(m.detail)}\n")
            if status == "reopen":
                self.states.pop(m.url, None)
            else:
                self.states[m.url] = state
            out.append((m, state))
        if lines and not self.read_only:
            append_lines(self._status_fd, "".join(lines))
        return out

    def counts(self) -> Counter:
        """How many links are in each status ('pending' for those without one)."""
        counts = Counter(state.status for state in self.states.values())
        counts["pending"] = len(self.links) - sum(counts.values())
        return counts


def read_lines(path: Path, *, repair: bool = True) -> list[str]:
    """The file's whole lines, without comments; a torn last line (a crash mid-append) is cut off
    (from the file too, unless repair is False)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    end = data.rfind(b"\n") + 1
    if end != len(data) and not repair:
        data = data[:end]
    elif end != len(data):
        with open(path, "r+b") as f:
            f.truncate(end)
            f.flush()
            os.fsync(f.fileno())
        log.warning("repaired %s: dropped a torn last line (%d bytes)", path, len(data) - end)
        data = data[:end]
    return [line for line in data.decode("utf-8", "replace").split("\n") if line and not line.startswith("#")]


def open_append(path: Path, header: str) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    if os.fstat(fd).st_size == 0:
        append_lines(fd, header)
    return fd


def append_lines(fd: int, text: str) -> None:
    """Write whole lines then fsync; a disk that fills up is the daemon's StorageError (critical)."""
    view = memoryview(text.encode("utf-8"))
    try:
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except OSError as exc:
        raise StorageError(f"cannot append to a link file: {exc.strerror or exc}") from None


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
