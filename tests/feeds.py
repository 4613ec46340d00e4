"""Small feeds written for the tests."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from xml.sax.saxutils import escape

BASE_TIME = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
# The record's fields as 0.5 staged them: files an older version left, which a newer one must load.
OLD_RECORD_FIELDS = ("source", "guid", "link", "title", "author", "published", "summary", "content", "fetched")


def rss(items: list[dict], *, title: str = "Test feed", encoding: str = "utf-8", prolog: bool = True) -> bytes:
    """RSS 2.0 with one <item> per dict (keys: title, link, guid, description, date, author)."""
    parts = [f'<?xml version="1.0" encoding="{encoding}"?>\n' if prolog else "",
             f"<rss version=\"2.0\"><channel><title>{escape(title)}</title><link>http://example.com/</link>"
             "<description>test</description>"]
    for i, item in enumerate(items):
        parts.append("<item>")
        parts.append(f"<title>{escape(item.get('title', f'Item {i}'))}</title>")
        if item.get("link") is not None:
            parts.append(f"<link>{escape(item['link'])}</link>")
        if item.get("guid"):
            parts.append(f"<guid isPermaLink=\"false\">{escape(item['guid'])}</guid>")
        if item.get("description"):
            parts.append(f"<description>{escape(item['description'])}</description>")
        if item.get("author"):
            parts.append(f"<author>{escape(item['author'])}</author>")
        date = item.get("date")
        if date is not None:
            parts.append(f"<pubDate>{format_datetime(date)}</pubDate>")
        parts.append("</item>")
    parts.append("</channel></rss>")
    return "".join(parts).encode(encoding, "xmlcharrefreplace")


def numbered_items(start: int, count: int, *, host: str = "example.com") -> list[dict]:
    """Items `start`..`start+count-1`, newest first, each with its own link and date."""
    return [{"title": f"Item {n}", "link": f"http://{host}/item/{n}",
             "date": BASE_TIME + timedelta(minutes=n), "description": f"Body of item {n}"}
            for n in range(start + count - 1, start - 1, -1)]


def raw_rss(items: list[tuple[str, str]]) -> bytes:
    """RSS 2.0 of (link, pubDate as written) pairs."""
    entries = "".join(f"<item><title>Item {i}</title><link>{link}</link><pubDate>{date}</pubDate></item>"
                      for i, (link, date) in enumerate(items))
    return (f'<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>t</title>'
            f"<link>http://example.com/</link><description>d</description>{entries}</channel></rss>").encode()
