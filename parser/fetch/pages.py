"""An HTML page read safely into a tree, and the links it holds: what a harvest follows and what pass 2
extracts fields from. The parser never resolves entities, never touches the network and refuses trees
deeper or larger than any real page; a page whose text libxml2 could not read whole is refused too,
never cut silently (every limit where the bytes come in, as in parser/fetch/http.py).
"""
from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

import lxml.html
from lxml import etree
from w3lib.encoding import html_to_unicode

from ..core.errors import ParseError
from ..core.record import clean_text

MAX_ELEMENTS = 500_000
HTML_TYPES = ("text/html", "application/xhtml+xml", "")
LINK_SCHEMES = ("http", "https")
_RESOURCE_LIMIT = etree.ErrorTypes.ERR_RESOURCE_LIMIT


def html_parser() -> lxml.html.HTMLParser:
    """The HTML parser every page here is read with (and extract.blank_values' blank page)."""
    # One per call: lxml parsers are not safe to share between threads.
    # huge_tree lifts libxml2's 10-million-character cap on one text node, which otherwise ends the
    # parse there and leaves that field and every later one empty. The body is already capped at
    # MAX_BYTES where it came in, which bounds memory; depth stays capped (2,048) and MAX_ELEMENTS
    # below caps the element count. Entities are never expanded by the HTML parser either way.
    return lxml.html.HTMLParser(no_network=True, huge_tree=True, remove_comments=True, remove_pis=True)


def parse_html(body: bytes, *, content_type: str = "") -> lxml.html.HtmlElement:
    """The document tree of an HTML page; ParseError when it is not HTML, empty or too large."""
    mime = content_type.split(";")[0].strip().lower()
    if mime not in HTML_TYPES:
        raise ParseError(f"not an HTML page: {mime}")
    if not body.strip():
        raise ParseError("empty body")
    _encoding, text = html_to_unicode(content_type or None, body)
    text = text.replace("\x00", "")
    if re.match(r"\s*<\?xml[^>]*\?>", text):  # lxml refuses str input that declares an encoding
        text = text[text.index("?>") + 2:]
    parser = html_parser()
    try:
        doc = lxml.html.document_fromstring(text, parser=parser)
    except (etree.ParserError, etree.XMLSyntaxError, ValueError) as exc:
        raise ParseError(f"HTML does not parse: {exc}") from None
    for entry in parser.error_log:
        if "Excessive depth" in entry.message:
            raise ParseError(f"page refused: nesting deeper than a real page ({entry.message.strip()})")
        if entry.type == _RESOURCE_LIMIT or "limit exceeded" in entry.message.lower() \
                or "Huge input lookup" in entry.message:
            # libxml2 stopped reading here: whatever follows would be stored empty or cut.
            raise ParseError(f"page refused: the parser could not read it whole ({entry.message.strip()})")
    count = 0
    for _ in doc.iter():
        count += 1
        if count > MAX_ELEMENTS:
            raise ParseError(f"page refused: more than {MAX_ELEMENTS:,} elements")
    return doc


def page_links(doc: lxml.html.HtmlElement, url: str) -> list[str]:
    """Absolute http(s) addresses of the page's <a href> and <area href>, in order, each once.

    mailto:, javascript:, tel:, data: and the like are dropped here; so are bare #fragments.
    """
    base = url
    for href in doc.xpath("//base/@href"):
        base = urljoin(url, href.strip())
        break
    seen: dict[str, None] = {}
    for href in doc.xpath("//a/@href | //area/@href"):
        href = clean_text(href).strip()
        if not href or href.startswith("#"):
            continue
        try:
            absolute = urljoin(base, href)
            parts = urlsplit(absolute)
        except ValueError:
            continue
        if parts.scheme.lower() in LINK_SCHEMES and parts.hostname:
            seen.setdefault(absolute, None)
    return list(seen)
