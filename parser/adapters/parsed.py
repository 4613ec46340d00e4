"""What an adapter returns for one body (Parsed), how far it read before the records (Scan), and which of
its records a poll keeps (newest). Its own module so the adapters and their dispatch (adapters/__init__.py)
import it without a circle."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from ..core.record import Record

Item = TypeVar("Item")


@dataclass(frozen=True)
class FeedInfo:
    """What a feed says about itself (RSS channel, Atom feed, JSON Feed top level): plain text, the link
    absolute; "" where it says nothing. The `sources` table stores it beside the source's name."""
    title: str = ""
    link: str = ""  # the site: RSS channel <link>, Atom alternate, JSON Feed home_page_url
    description: str = ""  # RSS channel <description>, Atom <subtitle>, JSON Feed description
    language: str = ""  # RSS <language> / dc:language, else the root's xml:lang; JSON Feed language


@dataclass(frozen=True)
class Parsed:
    """Frozen: what an adapter read is handed on as it is; a step after it (the intake's first look, keep
    and block rules, full text) makes a new one with dataclasses.replace, so no reader sees it change.
    Only what the body says: what the pipeline decides of its records is the intake's (parser/pipeline/intake.py)."""
    records: list[Record]
    # Problems that did not stop the parse (a truncated feed kept what parsed): one line each.
    warnings: list[str] = field(default_factory=list)
    kind: str = ""  # what was found, for the log: "rss20", "atom10", ...
    next_url: str | None = None  # json_api with a `next` path: the address of the following page
    # Facts about the source worth a line in parser.log once per run (not errors): "dates without a
    # time zone are taken as UTC".
    notes: list[str] = field(default_factory=list)
    home: str = ""  # the feed's own page (RSS channel link, Atom alternate, JSON Feed home_page_url)
    feed_url: str | None = None  # the source's address was an HTML page; this feed it links to was read
    feed: FeedInfo = field(default_factory=FeedInfo)  # the feed's own title, site, description, language


# Reads the chosen entries of a scanned body whole (one flag per entry of Scan.ids, in order): Scan.about with
# their records (and what reading them noted); None when this adapter cannot read them after all and hands
# the body to the next (parser/adapters/__init__.py).
ReadEntries = Callable[[Sequence[bool]], "Parsed | None"]


@dataclass(frozen=True)
class Scan:
    """One adapter's read of a body as far as its kept entries' ids (at most `limit`, the newest), before any
    entry is read whole: identity first (parser/pipeline/first_read.py) keys them, and only the entries the
    intake wants are read. `ids`: each kept entry's {source, guid, link, digest} as the adapter reads them
    (before sanitize.finish_record), given when asked for; `about`: a Parsed of the feed's own fields (kind,
    warnings, notes, home, feed) without records; `entries` reads the chosen ones."""
    ids: list[dict[str, str]]
    about: Parsed
    entries: ReadEntries

    @property
    def home(self) -> str:
        return self.about.home

    def read(self, wanted: Sequence[bool] | None = None) -> Parsed | None:
        """The wanted entries read (every one when None), as the adapter gives them (finish_record follows,
        adapters/__init__.py); None when this adapter hands the body on."""
        return self.entries([True] * len(self.ids) if wanted is None else wanted)


def scan_of(parsed: Parsed, limit: int | None, ids: Callable[[Record], dict[str, str]] | None) -> Scan:
    """The Scan of an adapter that reads every entry at once: its `limit` newest records, their ids taken
    from the records with `ids` when given."""
    records = newest(parsed.records, limit) if limit is not None else parsed.records

    def read(wanted: Sequence[bool]) -> Parsed:
        return replace(parsed, records=[r for r, want in zip(records, wanted, strict=True) if want])

    return Scan(ids=[ids(r) for r in records] if ids is not None else [{} for _ in records],
                about=replace(parsed, records=[]), entries=read)


FALLBACK = " via feedparser"  # the end of Parsed.kind when the fast path handed the body to feedparser


def newest(records: list[Record], limit: int) -> list[Record]:
    """The `limit` newest records: by date when every record has one, else in the source's order.
    Applied by parser/sources/poll.py to what a poll takes, never to pushed records."""
    return select_newest(records, [r["published"] for r in records], limit)


def select_newest(items: list[Item], dates: list[str], limit: int) -> list[Item]:
    """`newest` over anything with a UTC ISO date each (the fast path picks entries before reading them)."""
    if len(items) > limit and all(dates):
        order = sorted(range(len(items)), key=dates.__getitem__, reverse=True)
        return [items[i] for i in order[:limit]]
    return items[:limit]
