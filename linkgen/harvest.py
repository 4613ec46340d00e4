"""The recursive harvest: from a root page, follow links level by level and collect object links.

Depth counts link hops from the root (root = 0). Levels are done one after the other, so a link's
depth is always its shortest distance from the root. A link more than `depth` hops away is neither
fetched nor collected. Object links are leaves: collected, never expanded. Only pages matching
`follow` inside the allowed domains are expanded, at most `max_pages` of them per run; robots.txt
is obeyed for both. Schemes other than http(s) (mailto:, javascript:, tel: ...) never get this far.

`fetch_harvest_page` runs in a worker thread (fetch + parse); `Harvest` runs in the main thread and keeps
the run's progress in harvest.log (append-only, rewritten when a new run starts), so a run killed
half-way resumes where it stopped: pages already expanded are not fetched again. A page its server
refused with Retry-After stays queued and is asked again once the host's hold ends, at most
MAX_ATTEMPTS times; a page not sent because its host is held costs nothing. A read-only Harvest
(for --dry-run) starts a fresh run in memory and writes nothing.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from parser.core.dates import iso
from parser.core.durable import AppendFile
from parser.core.errors import FetchError, ParseError
from parser.core.urls import canonical_url
from parser.fetch.http import Fetcher
from parser.fetch.pages import page_links, parse_html

from .frontier import HostFrontier
from .linkfile import MAX_ATTEMPTS, Link, append_lines, open_append, read_lines
from .politeness import HostHeldError, HostSlots, Robots, polite_get
from .spec import HarvestSpec

# Links to these are files, not pages: never worth expanding (Scrapy's LinkExtractor skips the same).
_NOT_PAGES = re.compile(
    r"\.(jpe?g|png|gif|webp|svg|ico|bmp|tiff?|css|js|json|xml|rss|atom|pdf|docx?|xlsx?|pptx?|odt|zip|gz|tgz|bz2|"
    r"xz|7z|rar|tar|exe|msi|dmg|apk|iso|mp3|mp4|m4a|ogg|wav|avi|mov|mkv|webm|woff2?|ttf|eot)$", re.IGNORECASE)


def in_domains(url: str, domains: tuple[str, ...]) -> bool:
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    return any(host == d or host.endswith("." + d) for d in domains)


@dataclass
class PageResult:
    """What a worker found on one page, already filtered: every link here may be written."""
    url: str
    depth: int
    objects: list[str] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)
    error: str | None = None
    skipped: Counter = field(default_factory=Counter)  # offsite, robots, too deep
    held: bool = False                 # not sent: the host is held (Retry-After); costs no attempt
    retry_after: float | None = None   # refused with 429/503 and Retry-After: the host is now held


def fetch_harvest_page(url: str, depth: int, spec: HarvestSpec, *, fetcher: Fetcher, host_slots: HostSlots,
                       robots: Robots, delay: float) -> PageResult:
    """Worker thread: fetch one page and sort its links into objects and pages to expand."""
    result = PageResult(url=url, depth=depth)
    try:
        response = polite_get(url, fetcher=fetcher, host_slots=host_slots, delay=delay, robots=robots,
                              may_follow=lambda target: in_domains(target, spec.allowed_domains))
        doc = parse_html(response.body, content_type=response.headers.get("content-type", ""))
    except HostHeldError as exc:
        result.error, result.held = str(exc), True
        return result
    except FetchError as exc:
        result.error, result.retry_after = str(exc), exc.retry_after
        return result
    except ParseError as exc:
        result.error = str(exc)
        return result
    objects_re = re.compile(spec.objects)
    follow_re = re.compile(spec.follow) if spec.follow else None
    next_depth = depth + 1
    for raw in page_links(doc, response.url):
        link = canonical_url(raw)
        if not in_domains(link, spec.allowed_domains):
            result.skipped["offsite"] += 1
            continue
        is_object = bool(objects_re.search(link))
        if next_depth > spec.depth or (not is_object and next_depth >= spec.depth):
            # An object one hop too far, or a page whose links would all be too far.
            result.skipped["too deep"] += 1
            continue
        if not is_object and (_NOT_PAGES.search(urlsplit(link).path)
                              or (follow_re is not None and not follow_re.search(link))):
            result.skipped["not followed"] += 1
            continue
        if not robots.allowed(link):
            result.skipped["robots"] += 1
            continue
        (result.objects if is_object else result.pages).append(link)
    return result


class Harvest:
    """One job's harvest runs, in harvest.log:

        run <n> <started> <links in the link file then>
        page <depth> <url> <found on>     (queued for expansion)
        refused <url> <attempts> <why>    (429/503 with Retry-After: still queued)
        done <url> <outcome>              (expanded, or failed)
        end <n> <finished> <summary>
    """

    def __init__(self, folder: Path, job: str, spec: HarvestSpec, *, clock: Callable[[], float],
                 read_only: bool = False):
        self.path = folder / "harvest.log"
        self.job = job
        self.spec = spec
        self.clock = clock
        self.run = 0
        self.links_before = 0
        self.queued: dict[str, tuple[int, str]] = {}   # url -> (depth, found on): every page of the run
        self.done: set[str] = set()
        self.failed = 0
        self.taken: set[str] = set()                   # in flight
        self.refusals: Counter = Counter()             # url -> times refused with Retry-After this run
        self.active = False
        self.stopped_at_max = False
        self.read_only = read_only
        # Kept up to date page by page, so that no step rescans the queue: the pages neither done nor
        # in flight, in queue order (which is level order), and how many pages of each level are open.
        self._frontier = HostFrontier(_never_held)
        self._open: Counter = Counter()                # depth -> pages queued and not done
        self._file: AppendFile | None = None
        if not read_only:
            self._load()

    def _load(self) -> None:
        for line in read_lines(self.path):
            parts = line.split("\t")
            kind = parts[0]
            if kind == "run" and len(parts) >= 4:
                self.run, self.links_before, self.active = int(parts[1]), int(parts[3]), True
                self.queued, self.done, self.failed, self.refusals = {}, set(), 0, Counter()
            elif kind == "page" and len(parts) >= 4:
                self.queued.setdefault(parts[2], (int(parts[1]), parts[3]))
            elif kind == "refused" and len(parts) >= 3 and parts[2].isdigit():
                self.refusals[parts[1]] = int(parts[2])
            elif kind == "done" and len(parts) >= 3:
                self.done.add(parts[1])
                self.failed += parts[2] != "ok"
            elif kind == "end":
                self.active = False
        for url, (depth, _) in self.queued.items():
            if url not in self.done:
                self._queue(url, depth)
        if self.active:
            self._file = open_append(self.path, "")

    def _queue(self, url: str, depth: int) -> None:
        self._frontier.append(url)
        self._open[depth] += 1

    @property
    def pages_done(self) -> int:
        return len(self.done)

    @property
    def waiting(self) -> int:
        """Pages queued, neither done nor in flight."""
        return len(self._frontier)

    def start(self, links_now: int) -> None:
        """Begin a new run from the root; the file is rewritten to hold this run alone."""
        self.run += 1
        self.links_before = links_now
        root = canonical_url(self.spec.root)
        self.queued = {root: (0, "-")}
        self.done, self.failed, self.taken, self.refusals = set(), 0, set(), Counter()
        self._frontier, self._open = HostFrontier(_never_held), Counter()
        self._queue(root, 0)
        self.active, self.stopped_at_max = True, False
        if self.read_only:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"# job {self.job}: harvest progress (pass 1); the current or last run\n"
                       f"run\t{self.run}\t{iso(self.clock())}\t{links_now}\n"
                       f"page\t0\t{root}\t-\n", encoding="utf-8")
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        if self._file is not None:
            self._file.close()
        self._file = open_append(self.path, "")

    def _level(self) -> int | None:
        """The shallowest level with a page not done (levels are few: a min over them is cheap)."""
        return min(self._open) if self._open else None

    def take(self, limit: int, held_for: Callable[[str], float] | None = None) -> list[tuple[str, int]]:
        """Up to `limit` pages to fetch next: the shallowest level not done, and only that level;
        pages whose host is held (`held_for(host key)` > 0) must wait: they still hold their level."""
        level = self._level()
        if level is None:
            return []
        budget = self.spec.max_pages - len(self.done) - len(self.taken)
        if budget <= 0:
            self.stopped_at_max = True
            return []
        self._frontier.held_for = held_for or _never_held
        out: list[tuple[str, int]] = []
        while len(out) < min(limit, budget):
            url = self._frontier.pop(eligible=lambda u: self.queued[u][0] == level)
            if url is None:
                break
            out.append((url, level))
            self.taken.add(url)
        return out

    def level_waiting(self, held_for: Callable[[str], float] | None = None) -> list[str]:
        """Pages of the current level not done and not in flight, one per host standing first in line
        (what take() would give first, and the first page of each held host)."""
        level = self._level()
        if level is None:
            return []
        self._frontier.held_for = held_for or _never_held
        return self._frontier.front(eligible=lambda u: self.queued[u][0] == level)

    def finished(self) -> bool:
        """Nothing in flight and nothing left to fetch (or max_pages reached)."""
        if self.taken:
            return False
        waiting = bool(self._open)
        if waiting and len(self.done) >= self.spec.max_pages:
            self.stopped_at_max = True
        return not waiting or self.stopped_at_max

    @staticmethod
    def links_of(result: PageResult) -> list[Link]:
        """The page's object links, for the link file (written before `record`)."""
        return [Link(url, result.depth + 1, result.url) for url in result.objects]

    def record(self, result: PageResult) -> None:
        """Main thread, once the page's object links are in the link file: queue its pages, mark it done."""
        self.taken.discard(result.url)
        lines = []
        for page in result.pages:
            if page not in self.queued:
                self.queued[page] = (result.depth + 1, result.url)
                self._queue(page, result.depth + 1)
                lines.append(f"page\t{result.depth + 1}\t{page}\t{result.url}\n")
        outcome = "ok" if result.error is None else " ".join(result.error.split())
        lines.append(f"done\t{result.url}\t{outcome}\n")
        if result.url not in self.done:
            self.done.add(result.url)
            depth = self.queued[result.url][0]
            self._open[depth] -= 1
            if self._open[depth] <= 0:
                del self._open[depth]
        self.failed += result.error is not None
        self._append("".join(lines))

    def refused(self, result: PageResult) -> int:
        """Main thread: the page was refused with Retry-After; it stays queued unless this was its last
        attempt (then the caller records it as failed). Return its attempts so far."""
        self.taken.discard(result.url)
        self.refusals[result.url] += 1
        attempts = self.refusals[result.url]
        if attempts < MAX_ATTEMPTS:  # else the caller records it as failed (done)
            self._frontier.appendleft(result.url)
        self._append(f"refused\t{result.url}\t{attempts}\t{' '.join((result.error or '').split())}\n")
        return attempts

    def out_of_attempts(self, url: str) -> bool:
        return self.refusals[url] >= MAX_ATTEMPTS

    def release(self, url: str) -> None:
        """A page abandoned in flight (the daemon is stopping, or its host is held): it stays queued."""
        if url in self.taken:
            self.taken.discard(url)
            self._frontier.appendleft(url)

    def end(self, summary: str) -> None:
        self._append(f"end\t{self.run}\t{iso(self.clock())}\t{summary}\n")
        self.active = False

    def _append(self, text: str) -> None:
        if not self.read_only:
            assert self._file is not None, "opened by start(), or at loading for a run under way"
            append_lines(self._file, text)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _never_held(_host: str) -> float:
    return 0.0
