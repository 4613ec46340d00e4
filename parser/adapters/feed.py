"""RSS 0.9x/1.0/2.0 and Atom through feedparser, into records."""
from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import feedparser

from ..errors import ParseError
from ..record import clean_text, html_to_text, utc_iso
from ..urls import canonical_url
from . import Parsed

TITLE_MAX = 500


def parse(body: bytes, *, url: str, headers: Mapping[str, str], source: Any, fetched: str) -> Parsed:
    """Parse a feed body; raise ParseError when it is not a feed at all."""
    if not body.strip():
        raise ParseError("empty body")
    response_headers = {k.lower(): v for k, v in headers.items()}
    response_headers.setdefault("content-location", url)  # base for relative links
    # A BytesIO, never the bytes themselves: feedparser treats a bare string as a path or URL to open.
    feed = feedparser.parse(io.BytesIO(body), response_headers=response_headers)
    entries = feed.get("entries", [])
    problem = _bozo_text(feed)
    if not entries:
        if problem or not feed.get("version"):
            raise ParseError(_not_a_feed(response_headers.get("content-type", ""), body, problem))
        return Parsed(records=[], kind=feed.get("version", ""))
    records = [_record(e, source.name, fetched) for e in entries]
    records = _newest(records, source.max_items)
    warnings = [f"feed is malformed ({problem}); kept the {len(entries)} entries that parsed"] \
        if problem and not _harmless(feed) else []
    return Parsed(records=records, warnings=warnings, kind=feed.get("version", "") or "feed")


def _record(entry: Mapping[str, Any], source_name: str, fetched: str) -> dict:
    link = _alternate_link(entry)
    guid = clean_text(entry.get("id") or "")
    if not link and guid.startswith(("http://", "https://")):
        link = guid
    link = canonical_url(link)
    published = ""
    for key in ("published_parsed", "updated_parsed", "created_parsed"):
        if entry.get(key):
            published = utc_iso(entry[key])
            break
    if not published:  # feedparser could not read the date; dateutil is more forgiving
        raw = entry.get("published") or entry.get("updated") or ""
        published = utc_iso(raw) if raw else ""
    return {
        "source": source_name,
        "guid": guid or link,
        "link": link,
        "title": html_to_text(entry.get("title", ""))[:TITLE_MAX],
        "author": html_to_text(entry.get("author", "")),
        "published": published,
        "summary": html_to_text(entry.get("summary", "")),
        "content": _content(entry),
        "fetched": fetched,
    }


def _alternate_link(entry: Mapping[str, Any]) -> str:
    """The entry's rel="alternate" link; feedparser's `link` can be an enclosure that came later."""
    for link in entry.get("links") or []:
        if link.get("rel", "alternate") == "alternate" and link.get("href"):
            return link["href"]
    return entry.get("link") or ""


def _content(entry: Mapping[str, Any]) -> str:
    """The entry's full content as (feedparser-sanitized) HTML, preferring an HTML part."""
    parts = entry.get("content") or []
    for part in parts:
        if "html" in (part.get("type") or ""):
            return clean_text(part.get("value", ""))
    return clean_text(parts[0].get("value", "")) if parts else ""


def _newest(records: list[dict], limit: int) -> list[dict]:
    """The `limit` newest records: by date when every record has one, else in the feed's order."""
    if len(records) > limit and all(r["published"] for r in records):
        records = sorted(records, key=lambda r: r["published"], reverse=True)
    return records[:limit]


def _bozo_text(feed: Mapping[str, Any]) -> str:
    if not feed.get("bozo"):
        return ""
    exc = feed.get("bozo_exception")
    text = str(exc) if exc else "malformed"
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _harmless(feed: Mapping[str, Any]) -> bool:
    """feedparser flags a charset it had to guess or override; the entries are right all the same."""
    exc = feed.get("bozo_exception")
    return type(exc).__name__ in ("CharacterEncodingOverride", "NonXMLContentType")


def _not_a_feed(content_type: str, body: bytes, problem: str) -> str:
    mime = content_type.split(";")[0].strip().lower()
    head = body[:512].lstrip().lower()
    if mime in ("text/html", "application/xhtml+xml") or head.startswith((b"<!doctype html", b"<html")):
        return f"not a feed: {mime or 'an HTML page'}"
    if problem:
        return f"not a feed: {problem}"
    return f"not a feed: {mime}" if mime else "not a feed"
