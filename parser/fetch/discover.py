"""Feed discovery: the feeds an HTML page names in <link rel="alternate" type="..."> (RSS, Atom, JSON
Feed), in page order, as absolute addresses. Used when a source's address is a site's page rather
than its feed (parser/sources/poll.py)."""
from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urljoin, urlsplit

import lxml.html
from lxml import etree

FEED_TYPES = ("application/rss+xml", "application/atom+xml", "application/feed+json")


def is_html_page(body: bytes, headers: Mapping[str, str]) -> bool:
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    mime = content_type.split(";")[0].strip().lower()
    head = body[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return mime in ("text/html", "application/xhtml+xml") or head.startswith((b"<!doctype html", b"<html"))


def feed_links(body: bytes, page_url: str) -> list[str]:
    """Absolute http(s) addresses of the page's alternate feed links, first first, no repeats."""
    try:
        doc = lxml.html.document_fromstring(body)
    except (etree.ParserError, ValueError):
        return []
    base = next((b.get("href") for b in doc.iter("base") if b.get("href")), None)
    base = urljoin(page_url, base) if base else page_url
    found: list[str] = []
    for link in doc.iter("link"):
        rel = (link.get("rel") or "").lower().split()
        kind = (link.get("type") or "").split(";")[0].strip().lower()
        href = (link.get("href") or "").strip()
        if "alternate" not in rel or kind not in FEED_TYPES or not href:
            continue
        url = urljoin(base, href)
        if urlsplit(url).scheme in ("http", "https") and url not in found:
            found.append(url)
    return found
