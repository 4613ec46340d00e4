"""The formats `parser-daemon export` writes: JSON lines, CSV and Atom 1.0, each a function that writes
rows to a binary stream as they come and keeps none of them (parser/operate/export.py reads them).

A row is a dict of typed values: text, numbers, None, lists and dicts, times as UTC ISO 8601 text.
"""
from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Sequence
from typing import BinaryIO

from lxml import etree

from .. import __version__
from ..core.dates import utc_iso
from ..core.urls import foreign_scheme
from ..pipeline.staging import cell_text as staging_cell  # the staging CSV's spreadsheet-safe rule, kept one

ATOM = "http://www.w3.org/2005/Atom"
_A = f"{{{ATOM}}}"
_NSMAP = {None: ATOM}  # Atom as the default namespace: <entry>, not <ns0:entry>
# The feed's children are built without a namespace and written inside <feed xmlns=ATOM>, whose default
# namespace they are then in: built in it, lxml's incremental writer, which writes each one alone, would
# declare xmlns="http://www.w3.org/2005/Atom" again on every entry and every element of the head.
# Characters XML 1.0 cannot hold at all; a stored value with one would make lxml refuse the whole entry.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# An Atom date is RFC 3339; the daemon stores exactly this, an older table may hold something else.
_RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
# An atom:id must be an absolute IRI: a guid like "1234" or "post-7" is not one.
_ABSOLUTE_IRI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s]+$")
# tag: URIs (RFC 4151) for what has no address of its own: the feed, and an entry with neither guid nor link.
TAG_PREFIX = "tag:parser-daemon,2026:"


def write_jsonl(out: BinaryIO, rows: Iterable[dict]) -> int:
    """One JSON object a line, the row's own columns as keys."""
    count = 0
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    for row in rows:
        out.write((dumps(row) + "\n").encode("utf-8"))
        count += 1
    return count


def write_csv(out: BinaryIO, columns: Sequence[str], rows: Iterable[dict], *, bom: bool = False) -> int:
    """RFC 4180 CSV with a header row, UTF-8 (with a byte order mark when asked: Excel then reads it as
    UTF-8). Lists as JSON text; NULL as an empty cell; text made spreadsheet-safe as the staging CSV is."""
    text = io.TextIOWrapper(out, encoding="utf-8-sig" if bom else "utf-8", newline="")
    try:
        writer = csv.writer(text)
        writer.writerow(columns)
        count = 0
        for row in rows:
            writer.writerow([_csv_value(v) for v in row.values()])
            count += 1
        text.flush()
    finally:
        text.detach()  # the caller owns `out`: closing the wrapper would close it
    return count


def _csv_value(value: object) -> str:
    # A number is no formula (a spreadsheet reads -5 as minus five): only text gets the apostrophe.
    if value is None:
        return ""
    if type(value) is not str and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return staging_cell(value)


def write_atom(out: BinaryIO, rows: Iterable[dict], *, table: str, now: str) -> int:
    """An Atom 1.0 feed, an entry per row, written entry by entry (lxml's incremental writer)."""
    count = 0
    with etree.xmlfile(out, encoding="utf-8") as xf:
        xf.write_declaration()
        with xf.element(_A + "feed", nsmap=_NSMAP):
            xf.write("\n")
            for element in _feed_head(table, now):
                xf.write(element, pretty_print=True)
            for row in rows:
                xf.write(atom_entry(row, table, now), pretty_print=True)
                count += 1
    out.write(b"\n")
    return count


def _feed_head(table: str, now: str) -> list[etree._Element]:
    head = [_text("id", TAG_PREFIX + table), _text("title", f"parser-daemon: {table}"), _text("updated", now)]
    generator = _text("generator", "parser-daemon")
    generator.set("version", __version__)
    # RFC 4287 wants an author on the feed or on every entry; an entry's own author comes first.
    author = etree.Element("author")
    author.append(_text("name", "parser-daemon"))
    return [*head, generator, author]


def atom_entry(row: dict, table: str, now: str) -> etree._Element:
    """An entry from a row of items or of a job's table (a job's `url` is its link), in no namespace until
    it is written inside the feed (write_atom)."""
    entry = etree.Element("entry")
    link = _str(row.get("link")) or _str(row.get("url"))
    entry.append(_text("id", _entry_id(row, link, table)))
    entry.append(_text("title", _str(row.get("title"))))
    if link:
        _link(entry, "alternate", link)
    entry.append(_text("updated", _first_time(row, ("changed", "updated", "published", "fetched")) or now))
    if published := _first_time(row, ("published",)):
        entry.append(_text("published", published))
    if author := _str(row.get("author")):
        element = etree.SubElement(entry, "author")
        element.append(_text("name", author))
    for term in _list(row.get("categories")):
        if term := _str(term if isinstance(term, str) else json.dumps(term, ensure_ascii=False)):
            etree.SubElement(entry, "category", term=term)
    for enclosure in _list(row.get("enclosures")):
        if isinstance(enclosure, dict) and (href := _str(enclosure.get("url"))):
            _link(entry, "enclosure", href, _str(enclosure.get("type")), _length(enclosure.get("length")))
    if comments := _str(row.get("comments")):
        _link(entry, "replies", comments, "text/html")  # RFC 4685, the threading extension
    if summary := _str(row.get("summary")):
        entry.append(_text("summary", summary))
    if content := _str(row.get("content")):
        entry.append(_text("content", content, type="html"))
    return entry


def _entry_id(row: dict, link: str, table: str) -> str:
    guid = _str(row.get("guid"))
    if _ABSOLUTE_IRI.match(guid):
        return guid
    if link and _ABSOLUTE_IRI.match(link):
        return link
    return f"{TAG_PREFIX}{table}/{_str(row.get('hash')) or _str(row.get('id'))}"


def _first_time(row: dict, names: Sequence[str]) -> str:
    for name in names:
        value = row.get(name)
        if isinstance(value, str) and value:
            if _RFC3339.match(value):
                return value
            if iso := utc_iso(value):  # an older table's other way of writing a time
                return iso
    return ""


def _link(entry: etree._Element, rel: str, href: str, kind: str = "", length: str = "") -> None:
    if foreign_scheme(href):  # a javascript: link an earlier version stored: a reader would run it
        return
    link = etree.SubElement(entry, "link", rel=rel, href=href)
    if kind:
        link.set("type", kind)
    if length:
        link.set("length", length)


def _text(name: str, value: str, **attributes: str) -> etree._Element:
    element = etree.Element(name, attributes)
    element.text = value
    return element


def _str(value: object) -> str:
    """Text fit for XML: None is "", a number its digits, characters XML cannot hold taken out."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    return _NOT_XML.sub("", text) if _NOT_XML.search(text) else text


def _list(value: object) -> list:
    return value if isinstance(value, list) else []


def _length(value: object) -> str:
    """An enclosure's length in bytes, when it is a whole number."""
    if isinstance(value, bool):
        return ""
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        return str(int(value))
    return ""
