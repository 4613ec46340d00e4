"""SOURCES_OPML: the outlines of an OPML subscription list (as feed readers export it) become feed
sources. An outline with an xmlUrl is a feed; the outlines around it (a reader's folders) become
its tags. Names are the outline's title (or text); parser/settings/params.py makes them unique.
`export-opml` goes the other way (write_opml): the feed sources as OPML 2.0, read back the same; a
disabled source is an outline with OPML 2.0's `isComment="true"`, read back as disabled.

lxml (already a dependency) reads the file: an OPML list is a flat set of attributes, and lxml
gives the line numbers that the settings messages point to.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from email.utils import formatdate
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lxml import etree

# Line breaks and other control characters: in a source name they would forge lines in errors.log.
CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def clean_name(text: str) -> str:
    """An outline title fit to name a source: control characters become spaces, spaces collapse."""
    return " ".join(CONTROL_CHARACTERS.sub(" ", text).split())


@dataclass(frozen=True)
class Outline:
    name: str
    url: str
    tags: tuple[str, ...]
    line: int
    enabled: bool = True  # isComment="true": OPML 2.0's mark of an outline switched off


@dataclass(frozen=True)
class FeedOutline:
    """A feed source as export-opml writes it: `url` the feed polled (a feed found on the source's page
    included), `page` the page that `url` was found on, if any (its htmlUrl)."""
    name: str
    url: str
    tags: tuple[str, ...] = ()
    enabled: bool = True
    page: str = ""


class OpmlError(ValueError):
    """The file is missing or unreadable; the message says which and where."""


def read_outlines(path: Path) -> list[Outline]:
    """Every feed outline of the OPML file at `path`, in document order."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise OpmlError(f"file does not exist: {path}") from None
    except OSError as exc:
        raise OpmlError(f"cannot read {path}: {exc.strerror or exc}") from None
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        raise OpmlError(f"{path.name} is not well-formed XML: {exc}") from None
    if etree.QName(root).localname.lower() != "opml":
        raise OpmlError(f"{path.name}: the root element is <{etree.QName(root).localname}>, not <opml>")
    body = next((c for c in root if isinstance(c.tag, str) and etree.QName(c).localname == "body"), None)
    if body is None:
        raise OpmlError(f"{path.name}: no <body> element")
    outlines: list[Outline] = []
    _walk(body, (), outlines)
    return outlines


def _walk(element: etree._Element, folders: tuple[str, ...], out: list[Outline]) -> None:
    for child in element:
        if not isinstance(child.tag, str) or etree.QName(child).localname != "outline":
            continue
        attrs = {k.lower(): (v or "").strip() for k, v in child.attrib.items()}
        label = clean_name(attrs.get("title") or attrs.get("text") or "")
        url = attrs.get("xmlurl", "")
        if url:
            tags = folders + tuple(clean_name(t) for t in attrs.get("category", "").replace("/", ",").split(",")
                                   if t.strip())
            out.append(Outline(name=label or _name_from_url(url), url=url, tags=tuple(dict.fromkeys(tags)),
                               line=child.sourceline or 0, enabled=attrs.get("iscomment", "").lower() != "true"))
        _walk(child, folders + ((label,) if label and not url else ()), out)


def _name_from_url(url: str) -> str:
    parts = urlsplit(url)
    return (parts.netloc + parts.path).rstrip("/") or url


def write_opml(sources: Iterable[FeedOutline], *, title: str) -> str:
    """OPML 2.0 for `sources`: every tag in `category` ("a,b", as the OPML 2.0 spec writes tags: comma-separated,
    no slash), and the first tag also as the folder, for the readers that file feeds in folders; a disabled
    source with `isComment="true"` (the spec's mark of an outline switched off), a feed found on a page with
    that page as `htmlUrl`. read_outlines gives the same names, addresses, tags and enabled back."""
    root = etree.Element("opml", version="2.0")
    head = etree.SubElement(root, "head")
    etree.SubElement(head, "title").text = title
    etree.SubElement(head, "dateCreated").text = formatdate(usegmt=True)
    body = etree.SubElement(root, "body")
    folders: dict[str, Any] = {}
    for source in sources:
        tags = list(source.tags)
        parent = body
        if tags:
            folder = tags[0]
            if folder not in folders:
                folders[folder] = etree.SubElement(body, "outline", text=folder, title=folder)
            parent = folders[folder]
        outline = etree.SubElement(parent, "outline", type="rss", text=source.name, title=source.name,
                                   xmlUrl=source.url)
        if source.page:
            outline.set("htmlUrl", source.page)
        if not source.enabled:
            outline.set("isComment", "true")
        categories = [tag for tag in tags if "," not in tag and "/" not in tag]  # an OPML folder's title may hold one
        if categories:
            outline.set("category", ",".join(categories))
    return etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True).decode("utf-8")
