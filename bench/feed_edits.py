"""New entries put at the top of a real feed's body, as its publisher would add them (bench/bench_steady.py).

The body is edited as bytes, not re-serialised, so that everything else in it (encoding, namespaces, odd
markup that a parser must still read) stays as the publisher wrote it. The entries are ASCII, with a new
link, guid and a date of `when` (then one second older each), which is the newest in the feed: a reader that
keeps only the newest `max_items` keeps them. Their links are under .example, which never resolves.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from email.utils import format_datetime

# What may come before the root element: the XML declaration, processing instructions, comments, a DOCTYPE.
_PROLOG = re.compile(rb"\s*(?:<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^\[>]*(?:\[.*?\])?\s*>)", re.S)
_ROOT = re.compile(rb"\s*<([A-Za-z_][\w.-]*:)?([A-Za-z_][\w.-]*)[\s>/]")


def with_new_entries(body: bytes, tag: str, when: datetime, count: int = 2) -> bytes:
    """`body` with `count` new entries first; `tag` makes their links and guids unique. ValueError when the
    body is not an RSS, RDF, Atom or JSON feed this can edit (UTF-16, an unknown root, nowhere to put them)."""
    if b"\x00" in body[:200]:
        raise ValueError("a UTF-16 or UTF-32 body: not edited")
    dates = [when - timedelta(seconds=i) for i in range(count)]
    if body.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        return _json_feed(body, tag, dates)
    root = _ROOT.match(body, _prolog_end(body))
    if root is None:
        raise ValueError("no root element")
    prefix, name = (root.group(1) or b"").decode(), root.group(2).decode()
    if name == "feed":
        first, end = rf"<{prefix}entry[\s>/]", rf"</{prefix}feed\s*>"
        entries = "".join(_atom_entry(prefix, tag, i, d) for i, d in enumerate(dates))
    elif name in ("rss", "RDF"):
        # An item's prefix is its own: RDF's items are RSS 1.0's, not rdf:'s; some RSS 2.0 prefixes its items.
        item = re.search(rb"<([\w.-]+:)?item[\s>/]", body)
        p = (item.group(1) or b"").decode() if item else ""
        if name == "rss":
            first, end = rf"<{p}item[\s>/]", rf"</{p}channel\s*>"
            entries = "".join(_rss_item(p, tag, i, d) for i, d in enumerate(dates))
        else:
            first, end = rf"<{p}item[\s>/]", rf"</{prefix}RDF\s*>"
            dc = b"xmlns:dc=" in body
            entries = "".join(_rdf_item(p, tag, i, d, dc) for i, d in enumerate(dates))
    else:
        raise ValueError(f"root element <{prefix}{name}> is not rss, RDF or feed")
    place = re.search(first.encode(), body) or re.search(end.encode(), body)
    if place is None:
        raise ValueError(f"no entry and no end of <{prefix}{name}> to put new entries before")
    return body[:place.start()] + entries.encode("ascii") + body[place.start():]


def _prolog_end(body: bytes) -> int:
    end = 3 if body.startswith(b"\xef\xbb\xbf") else 0
    while part := _PROLOG.match(body, end):
        end = part.end()
    return end


def _link(tag: str, i: int) -> str:
    return f"https://steady.example/{tag}/{i}"


def _rss_item(p: str, tag: str, i: int, when: datetime) -> str:
    return (f'<{p}item><{p}title>Steady {tag} {i}</{p}title><{p}link>{_link(tag, i)}</{p}link>'
            f'<{p}guid isPermaLink="false">steady-{tag}-{i}</{p}guid><{p}pubDate>'
            f'{format_datetime(when, usegmt=True)}</{p}pubDate>'
            f'<{p}description>New entry {i} of {tag}.</{p}description></{p}item>\n')


def _atom_entry(p: str, tag: str, i: int, when: datetime) -> str:
    return (f'<{p}entry><{p}id>urn:steady:{tag}:{i}</{p}id><{p}title>Steady {tag} {i}</{p}title>'
            f'<{p}link href="{_link(tag, i)}"/><{p}updated>{_iso(when)}</{p}updated>'
            f'<{p}summary>New entry {i} of {tag}.</{p}summary></{p}entry>\n')


def _rdf_item(p: str, tag: str, i: int, when: datetime, dc: bool) -> str:
    date = f"<dc:date>{_iso(when)}</dc:date>" if dc else ""
    return (f'<{p}item rdf:about="{_link(tag, i)}"><{p}title>Steady {tag} {i}</{p}title>'
            f'<{p}link>{_link(tag, i)}</{p}link><{p}description>New entry {i} of {tag}.</{p}description>'
            f'{date}</{p}item>\n')


def _json_feed(body: bytes, tag: str, dates: list[datetime]) -> bytes:
    feed = json.loads(body.decode("utf-8-sig"))
    if not isinstance(feed, dict):
        raise ValueError("a JSON body that is not an object")
    new = [{"id": f"steady-{tag}-{i}", "url": _link(tag, i), "title": f"Steady {tag} {i}",
            "content_text": f"New entry {i} of {tag}.", "date_published": _iso(d)} for i, d in enumerate(dates)]
    feed["items"] = new + list(feed.get("items") or [])
    return json.dumps(feed, ensure_ascii=False).encode("utf-8")


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")
