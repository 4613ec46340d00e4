"""Object pages: pull out fields by XPath or CSS from a page parser/fetch/pages.py has read safely.

A field is the text of what its selector matches, whitespace collapsed; several matches are joined
by a newline; no match is ''. A field matched when the page gives it another text than a blank page
does (blank_values): a constant, or a count() or boolean() that any page answers, never tells an
object from an error page.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import lxml.html
from cssselect import HTMLTranslator, SelectorError
from lxml import etree

from ..core.record import clean_text
from ..fetch.pages import html_parser

_SPACES = re.compile(r"\s+")
_CSS_PSEUDO = re.compile(r"::(text|attr\(\s*([\w:-]+)\s*\))\s*$")
_TRANSLATOR = HTMLTranslator()


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
    doc = lxml.html.document_fromstring("<html><head></head><body></body></html>", parser=html_parser())
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
            text = _clean(_element_text(item))
        else:
            text = _clean(str(item))
        if text:
            parts.append(text)
    return "\n".join(parts)


# Elements a browser shows on a line (or in a cell) of their own: their text is not glued to what is
# beside them (`number 2.<br>Second line` is "number 2. Second line", not "number 2.Second line").
_APART = frozenset((
    "address", "article", "aside", "blockquote", "br", "caption", "dd", "details", "dialog", "div", "dl", "dt",
    "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr",
    "li", "main", "nav", "ol", "option", "p", "pre", "section", "summary", "table", "tbody", "td", "tfoot",
    "th", "thead", "tr", "ul"))


def _element_text(root: etree._Element) -> str:
    """The element's text as text_content() gives it, with a line end at each block and <br> boundary.
    Walked with a stack, not recursion: a page nests as deep as its author likes."""
    parts: list[str] = []
    stack: list[tuple[etree._Element, bool]] = [(root, False)]
    while stack:
        element, closing = stack.pop()
        tag = element.tag
        named = isinstance(tag, str)  # a comment or processing instruction: only its tail is text
        apart = isinstance(tag, str) and tag.rpartition("}")[2].lower() in _APART
        if apart:
            parts.append("\n")
        if closing:
            if element is not root and element.tail:
                parts.append(element.tail)
            continue
        if named and element.text:
            parts.append(element.text)
        stack.append((element, True))
        stack.extend((child, False) for child in reversed(element))
    return "".join(parts)


def _clean(text: str) -> str:
    return _SPACES.sub(" ", clean_text(text)).strip()
