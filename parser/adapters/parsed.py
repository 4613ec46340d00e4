"""What an adapter returns for one body (Parsed), and which of its records a poll keeps (newest).
Its own module so the adapters and their dispatch (adapters/__init__.py) import it without a circle."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from ..core.record import Record

Item = TypeVar("Item")
# Identity first (parser/pipeline/first_read.py): given each kept entry's ids ({source, guid, link} as the
# adapter reads them, before sanitize.finish_record) and the feed's home page, which entries to read whole.
Select = Callable[[list[dict[str, str]], str], list[bool]]


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
    """Frozen: what an adapter read is handed on as it is; a step after it (identity first, the poll's
    max_items, full text) makes a new one with dataclasses.replace, so no reader sees it change."""
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
    # Identity first (parser/pipeline/first_read.py): each record's key, given when it was taken where the
    # body was parsed (None: the sink takes them), and the keys of the entries left unread because the
    # source's last poll saw them already (duplicates, counted as such).
    keys: list[str] | None = None
    known: list[str] = field(default_factory=list)
    said: list[tuple[bool, str]] = field(default_factory=list)  # identity's lines (once per source?, line)
    # Identity first: key -> digest of every entry, read or left unread (parser/pipeline/known.py).
    digests: dict[str, str] = field(default_factory=dict)
    feed: FeedInfo = field(default_factory=FeedInfo)  # the feed's own title, site, description, language


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
