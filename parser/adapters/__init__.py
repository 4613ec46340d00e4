"""Protocol adapters: each turns one kind of body into records of the one shape (record.Record).

An adapter is a function `parse(body, *, url, headers, source, fetched) -> Parsed` (Parsed in
adapters/parsed.py); `source` is the SourceView of parser/adapters/source_view.py. Nothing downstream of it
knows which protocol a record came from.

parse_body is the one dispatch point, and ADAPTERS its one table: by what the source's protocol says
its bodies are (SourceView.body_kind, from parser/sources/protocols.py), the adapters that may read them, tried
in order. "json" bodies (json_api, webhook) are JSON read by the source's `items` and `map`; "feed"
bodies (feed, websub) are feeds whose format is detected from the Content-Type and the body itself
(a JSON Feed `version` for JSON Feed, an XML root element for RSS/Atom/RDF), and Parsed.kind says
what was found ("rss20", "atom10", "jsonfeed11", ...). RSS, RDF and Atom are read by xmlfeed (lxml);
what it cannot read goes to feedparser (feed), and the kind then ends in FALLBACK so the log shows it.
Every record then passes sanitize.finish_record: safe HTML in `content`, `title` capped.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from ..core.cpu_slots import one_per_core
from ..core.errors import ParseError
from ..core.record import record_digest
from . import feed, json_api, jsonfeed, xmlfeed
from .parsed import FALLBACK, FeedInfo, Parsed, Select, newest, select_newest
from .sanitize import finish_record, stored_link
from .source_view import SourceView

__all__ = ["ADAPTERS", "FALLBACK", "Adapter", "FeedInfo", "Parsed", "Select", "looks_like_json", "newest", "parse_body",
           "select_newest"]


def looks_like_json(body: bytes, headers: Mapping[str, str]) -> bool:
    """A JSON media type, or (servers often say text/plain or nothing) a body that opens with '{'."""
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    mime = content_type.split(";")[0].strip().lower()
    if mime.endswith("/json") or mime.endswith("+json"):
        return True
    head = body[:64].lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"{") and not mime.endswith("xml")


def _any_body(body: bytes, headers: Mapping[str, str]) -> bool:
    return True


def _not_blank(body: bytes, headers: Mapping[str, str]) -> bool:
    return bool(body.strip())


@dataclass(frozen=True)
class Adapter:
    """One way of reading a body. `parse` returns its records, raises ParseError when the body is not
    what it reads, or returns None to hand the body to the next adapter of its kind."""
    name: str
    parse: Callable[..., Parsed | None]
    reads: Callable[[bytes, Mapping[str, str]], bool] = _any_body  # asked at all for this body?
    limited: bool = False   # takes `limit`: reads only the newest entries into records (the fast path)
    fallback: bool = False  # reads what an adapter before it handed on: its kind ends in FALLBACK


# Body kind (a protocol row's `body`) -> its adapters, tried in order; the first that is asked and
# returns a Parsed has read the body.
ADAPTERS: dict[str, tuple[Adapter, ...]] = {
    "json": (Adapter("json_api", json_api.parse),),
    "feed": (Adapter("jsonfeed", jsonfeed.parse, reads=looks_like_json),
             Adapter("xmlfeed", xmlfeed.parse, reads=_not_blank, limited=True),
             Adapter("feedparser", feed.parse, fallback=True)),
}


def _not_markup(body: bytes, headers: Mapping[str, str]) -> ParseError | None:
    """For a body the last feed reader refused: when it is no markup at all and the server named a type
    that is no XML (text/plain, application/octet-stream), that type is what the operator needs; the
    reader's `<unknown>:2:0: syntax error` says nothing to them. None otherwise."""
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    mime = content_type.split(";")[0].strip().lower()
    if not mime or any(word in mime for word in ("xml", "rss", "atom", "rdf", "html")):
        return None
    head = body[:1024].lstrip(b"\xef\xbb\xbf \t\r\n")
    if not head or head.startswith(b"<"):  # an empty body says so; broken markup, where it breaks
        return None
    return ParseError(f"not a feed: {mime}")


@one_per_core  # CPU work: more parsing threads than cores only make the main thread wait (cpu_slots.py)
def parse_body(source: SourceView, body: bytes, *, url: str, headers: Mapping[str, str], fetched: str,
               limit: int | None = None, select: Select | None = None) -> Parsed:
    """Parse one fetched body of `source` into records, by the first of its kind's adapters that reads it.

    `limit`: keep only the `limit` newest entries (see `newest`); a feed read by the fast path then
    normalizes and sanitizes only those. None keeps every entry the adapter keeps.
    `select`: asked once with the kept entries' ids; only the entries it wants are read whole (the
    fast path) or at least sanitized (the others) and returned."""
    parsed = None
    for adapter in ADAPTERS[source.body_kind]:
        if not adapter.reads(body, headers):
            continue
        options = {"limit": limit, "select": select} if adapter.limited else {}
        try:
            parsed = adapter.parse(body, url=url, headers=headers, source=source, fetched=fetched, **options)
        except ParseError:
            plainly = _not_markup(body, headers) if adapter.fallback else None
            if plainly is None:
                raise
            raise plainly from None
        if parsed is not None:
            if adapter.fallback and parsed.records:
                parsed = replace(parsed, kind=parsed.kind + FALLBACK)
            break
    if parsed is None:  # the last adapter of every kind reads whatever it is given
        raise AssertionError(f"no adapter of kind {source.body_kind!r} read the body")
    records = parsed.records
    if limit is not None and len(records) > limit:
        records = newest(records, limit)
    if select is not None and not adapter.limited:
        # The link as finish_record will store it: identity keys, and the first read keeps, this one.
        ids = [{"source": str(r.get("source") or ""), "guid": str(r.get("guid") or ""),
                "link": stored_link(r.get("link")), "digest": record_digest(r)}
               for r in records]
        wanted = select(ids, parsed.home)
        records = [r for r, want in zip(records, wanted, strict=True) if want]
    return replace(parsed, records=[finish_record(r) for r in records])
