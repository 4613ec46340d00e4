"""Object pages: parse HTML safely, pull out fields by XPath or CSS, and list a page's links.

The parser never resolves entities, never touches the network and refuses trees deeper or larger
than any real page. A page whose text libxml2 could not read whole is refused too, never cut
silently. A field is the text of what its selector matches, whitespace collapsed; several matches
are joined by a newline; no match is ''. A field matched when the page gives it another text than a
blank page does (blank_values): a constant, or a count() or boolean() that any page answers, never
tells an object from an error page.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import lxml.html
from cssselect import HTMLTranslator, SelectorError
from lxml import etree
from w3lib.encoding import html_to_unicode

from .errors import ParseError
from .record import clean_text

MAX_ELEMENTS = 500_000
HTML_TYPES = ("text/html", "application/xhtml+xml", "")
_SPACES = re.compile(r"\s+")
_CSS_PSEUDO = re.compile(r"::(text|attr\(\s*([\w:-]+)\s*\))\s*$")
_TRANSLATOR = HTMLTranslator()
LINK_SCHEMES = ("http", "https")
_RESOURCE_LIMIT = etree.ErrorTypes.ERR_RESOURCE_LIMIT


def _parser() -> lxml.html.HTMLParser:
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
    parser = _parser()
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


def compile_selector(selector: str) -> etree.XPath:
    """An XPath, or `css:<selector>` (with optional ::text or ::attr(name)); ValueError when invalid."""
    if not isinstance(selector, str) or not selector.strip():
        raise ValueError("must be a non-empty XPath or css: selector")
    expression = selector.strip()
    if expression.startswith("css:"):
        css = expression[4:].strip()
        suffix = ""
        pseudo = _CSS_PSEUDO.search(css)
        if pseudo:
            css = css[:pseudo.start()]
            suffix = "/text()" if pseudo.group(1) == "text" else f"/@{pseudo.group(2)}"
        try:
            expression = _TRANSLATOR.css_to_xpath(css) + suffix
        except SelectorError as exc:
            raise ValueError(f"is not a valid CSS selector: {exc}") from None
    try:
        return etree.XPath(expression, smart_strings=False)
    except etree.XPathSyntaxError as exc:
        raise ValueError(f"is not a valid XPath: {exc}") from None


@dataclass
class Extracted:
    values: dict[str, str]
    empty: list[str]  # fields whose selector matched nothing (or only blanks)
    matched: list[str]  # fields whose text came from the page: not what a blank page gives them


def extract_fields(doc: lxml.html.HtmlElement, selectors: Mapping[str, etree.XPath],
                   blank: Mapping[str, str] | None = None) -> Extracted:
    """The fields' texts; `blank` is what each gives on a blank page (blank_values; '' when not given)."""
    blank = blank or {}
    values: dict[str, str] = {}
    empty: list[str] = []
    matched: list[str] = []
    for name, xpath in selectors.items():
        try:
            result = xpath(doc)
        except etree.XPathEvalError:
            result = []
        text = _text(result)
        values[name] = text
        if not text:
            empty.append(name)
        if text != blank.get(name, ""):
            matched.append(name)
    return Extracted(values, empty, matched)


def blank_values(selectors: Mapping[str, etree.XPath]) -> dict[str, str]:
    """What each selector gives on a page with nothing on it: '' for one that selects nodes; for a
    constant, a count() or a boolean() the value it has on any page, an error page's too."""
    doc = lxml.html.document_fromstring("<html><head></head><body></body></html>", parser=_parser())
    return extract_fields(doc, selectors).values


def _text(result: object) -> str:
    if isinstance(result, bool):
        return "true" if result else "false"
    if isinstance(result, float):
        return str(int(result)) if result.is_integer() else str(result)
    if isinstance(result, str):
        return _clean(result)
    parts = []
    for item in result if isinstance(result, list) else [result]:
        if isinstance(item, etree._Element):
            text = _clean(item.text_content() if isinstance(item, lxml.html.HtmlElement) else "".join(item.itertext()))
        else:
            text = _clean(str(item))
        if text:
            parts.append(text)
    return "\n".join(parts)


def _clean(text: str) -> str:
    return _SPACES.sub(" ", clean_text(text)).strip()


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
