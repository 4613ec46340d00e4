"""RSS 0.9x/1.0/2.0, RDF and Atom 0.3/1.0 read with lxml straight into records: the fast path.

feedparser runs a pure-Python sanitizer and relative-URI resolver over every entry; here lxml (C)
builds the tree, only the entries that will be kept are read into records, relative links are
resolved once (xml:base, then the feed's address) and content is sanitized once, by nh3, in
sanitize.finish_record. `parse` returns None for what it does not read (an unknown root, UTF-16
without a byte order mark, no entries); parse_body then asks feedparser (adapters/feed.py).

Hostile XML: entities are never expanded (resolve_entities=False: an entity stays a reference),
no DTD or anything else is loaded (load_dtd=False, no_network=True), and huge_tree=False keeps
libxml2's limits on depth and text size. Bodies are already capped by the fetcher (MAX_BYTES), which
also bounds a long CDATA section lifted out before the parse (_prepared): entities are never
expanded inside one.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import html
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from html.entities import html5
from urllib.parse import urljoin, urlsplit

import lxml.etree as etree

from ..core.dates import read_date
from ..core.record import CONTROL_BYTES, AdapterRecord, Enclosure, Record, clean_text, looks_like_html, title_text
from ..core.urls import canonical_url, is_canonical_already
from ..fetch.charset import to_utf8
from .feed import NO_ZONE_NOTE, TITLE_MAX, keep_whole_entries
from .parsed import FeedInfo, Parsed, Scan, select_newest
from .sanitize import absolute_url, enclosure_length, language_tag
from .source_view import SourceView

ATOM10 = "http://www.w3.org/2005/Atom"
ATOM03 = "http://purl.org/atom/ns#"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RSS10 = "http://purl.org/rss/1.0/"
RSS090 = "http://my.netscape.com/rdf/simple/0.9/"
USERLAND = "http://backend.userland.com/rss2"  # RSS 2.0 in a namespace, as some 2000s servers wrote it
CONTENT = "http://purl.org/rss/1.0/modules/content/"
# The same without its last slash, as some podcast feeds declare it; feedparser reads content:encoded
# under any namespace its prefix is bound to, so this one too.
CONTENT_BARE = "http://purl.org/rss/1.0/modules/content"
DC = "http://purl.org/dc/elements/1.1/"
DCTERMS = "http://purl.org/dc/terms/"
MEDIA = "http://search.yahoo.com/mrss/"
ITUNES = "http://www.itunes.com/dtds/podcast-1.0.dtd"
ITUNES_CAPS = "http://www.itunes.com/DTDs/Podcast-1.0.dtd"  # Apple's own early spelling
FEEDBURNER = "http://rssnamespace.org/feedburner/ext/1.0"
XHTML = "http://www.w3.org/1999/xhtml"

# Element tag -> the field it feeds. RSS elements come without a namespace (RSS 0.9x/2.0) or in the
# RSS 1.0 / 0.9 namespace (RDF); Atom's in its own.
_RSS_CORE = {"title": "title", "link": "link", "description": "summary", "guid": "guid", "author": "author",
             "pubDate": "published", "pubdate": "published",
             "id": "id", "updated": "updated"}  # Atom's names without its namespace: seen in RSS
_ATOM_CORE = {"title": "title", "link": "atomlink", "summary": "summary", "content": "content", "id": "id",
              "author": "atomauthor", "published": "published", "issued": "published", "updated": "updated",
              "modified": "updated", "created": "created"}
TAGS: dict[str, str] = {}
for _ns in ("", RSS10, RSS090, USERLAND):
    TAGS.update({(f"{{{_ns}}}{k}" if _ns else k): v for k, v in _RSS_CORE.items()})
for _ns in (ATOM10, ATOM03):
    TAGS.update({f"{{{_ns}}}{k}": v for k, v in _ATOM_CORE.items()})
TAGS.update({
    f"{{{CONTENT}}}encoded": "encoded", f"{{{CONTENT_BARE}}}encoded": "encoded",
    f"{{{DC}}}creator": "creator", f"{{{DC}}}author": "creator", f"{{{DC}}}date": "updated",
    f"{{{DC}}}title": "dctitle", f"{{{DC}}}description": "dcdescription",
    f"{{{DCTERMS}}}issued": "published", f"{{{DCTERMS}}}modified": "updated", f"{{{DCTERMS}}}created": "created",
    f"{{{MEDIA}}}title": "mediatitle", f"{{{MEDIA}}}description": "mediadescription", f"{{{MEDIA}}}group": "mediagroup",
    f"{{{ITUNES}}}author": "itunesauthor", f"{{{ITUNES}}}summary": "itunessummary",
    f"{{{ITUNES_CAPS}}}author": "itunesauthor", f"{{{ITUNES_CAPS}}}summary": "itunessummary",
    f"{{{FEEDBURNER}}}origLink": "origlink",
})
# The same namespaces written with https:// (seen: dc in real feeds); feedparser accepts them too.
TAGS.update({"{https://" + tag[8:]: name for tag, name in list(TAGS.items()) if tag.startswith("{http://")})
# A namespace matched without regard to case, as feedparser does: podcasts declare iTunes's as
# ".../DTDs/PodCast-1.0.dtd", ".../dtds/Podcast-1.0.dtd" and other spellings (see _field_of).
_TAGS_BY_LOWER_NS = {"{" + tag[1:].partition("}")[0].lower() + "}" + tag.partition("}")[2]: name
                     for tag, name in TAGS.items() if tag.startswith("{")}
# The fields only an entry read whole needs (_extras): kept out of TAGS so that _fields, run over every
# kept entry before identity first picks the new ones, costs what it did.
EXTRA_TAGS: dict[str, str] = {}
for _ns in ("", RSS10, RSS090, USERLAND):
    EXTRA_TAGS.update({(f"{{{_ns}}}{k}" if _ns else k): v for k, v in (
        ("category", "category"), ("enclosure", "enclosure"), ("comments", "comments"), ("language", "language"),
        ("link", "atomlink"))})  # an RSS <link rel="enclosure" href="..."/>, as some podcasts write it
for _ns in (ATOM10, ATOM03):
    EXTRA_TAGS.update({f"{{{_ns}}}category": "category", f"{{{_ns}}}link": "atomlink"})
EXTRA_TAGS.update({
    f"{{{DC}}}subject": "category", f"{{{DC}}}language": "language",
    f"{{{MEDIA}}}category": "category", f"{{{MEDIA}}}keywords": "keywords", f"{{{MEDIA}}}content": "mediacontent",
    f"{{{MEDIA}}}thumbnail": "thumbnail", f"{{{MEDIA}}}group": "mediagroup",
    f"{{{ITUNES}}}keywords": "keywords", f"{{{ITUNES}}}image": "itunesimage", f"{{{ITUNES}}}category": "itunescategory",
})
# Media RSS under the RSS Advisory Board's address, as feedparser also reads it (seen: Squarespace).
EXTRA_TAGS.update({"{http://www.rssboard.org/media-rss}" + tag.partition("}")[2]: name
                   for tag, name in list(EXTRA_TAGS.items()) if tag.startswith(f"{{{MEDIA}}}")})
EXTRA_TAGS.update({"{https://" + tag[8:]: name for tag, name in list(EXTRA_TAGS.items()) if tag.startswith("{http://")})
_EXTRA_BY_LOWER_NS = {"{" + tag[1:].partition("}")[0].lower() + "}" + tag.partition("}")[2]: name
                      for tag, name in EXTRA_TAGS.items() if tag.startswith("{")}
# Each tag's answer from TAGS and EXTRA_TAGS, as _looked_up found it, for this process's life.
SEEN_TAGS = 4096
_FIELD_OF: dict[object, str] = {}
_EXTRA_OF: dict[object, str] = {}
_REPAIRED: dict[bytes, bytes] = {}  # an odd ampersand's spelling -> its XML (_repaired)
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_ENTRY_TAGS = {"item", f"{{{RSS10}}}item", f"{{{RSS090}}}item", f"{{{ATOM10}}}entry", f"{{{ATOM03}}}entry"}
_RDF_ABOUT = f"{{{RDF}}}about"

# Two common ill-formed ampersands that libxml2's recovery would drop, taking the text after them
# along: HTML's named entities (&eacute;, &nbsp;), which become character references, and a bare
# '&' (a link's "?a=1&b=2"), which becomes &amp;. CDATA sections are left as they are.
_ODD_AMPERSAND = re.compile(rb"&(?!(?:amp|lt|gt|quot|apos|#[0-9]+|#[xX][0-9a-fA-F]+);)")
# What _repaired turns into XML: every ampersand but XML's own references, with the name it opens.
_REPAIRABLE = re.compile(rb"&(?!(?:amp|lt|gt|quot|apos|#[0-9]+|#[xX][0-9a-fA-F]+);)"
                         rb"(?:([A-Za-z][A-Za-z0-9]{1,31});|[A-Za-z_][\w.-]*;)?")
# CDATA sections this long are lifted out before libxml2 reads the document (_prepared); in their
# place a placeholder: the section's number and line ends between two private-use characters.
LIFT_AT = 512
_MARK, _MARK_END = "\ue000", "\ue001"
_MARK_BYTES, _MARK_END_BYTES = _MARK.encode(), _MARK_END.encode()
_PLACEHOLDER = re.compile(_MARK + "([0-9]+)\n*" + _MARK_END)
# The fields an edit at the source changes, as _fields names them (_digest).
_DIGESTED = ("title", "dctitle", "summary", "dcdescription", "content", "encoded", "updated")
_DECLARES_ENTITIES = re.compile(rb"<!DOCTYPE[^>\[]*\[[^\]]*<!ENTITY", re.IGNORECASE)
_XML_DECLARATION = re.compile(rb"<\?xml[^>]{0,300}\?>")
# Each pattern below that reads up to a ">" or a close is used only where one follows (see _tags_out):
# from every opener with none after it, the search would run to the end, and a stranger's 160 KB of
# "<!--" took 25 s; every pass here is linear in the text.
# What a summary's text leaves out: comments, scripts and styles whole (_hidden_out), then every tag.
_HIDDEN_START = re.compile(r"<(!--|script\b|style\b)", re.IGNORECASE)
_HIDDEN_END = {"script": re.compile(r"</script\s*>", re.IGNORECASE), "style": re.compile(r"</style\s*>", re.IGNORECASE)}
_TAG = re.compile(r"<[^>]*>")
_SPACES = re.compile(r"\s+")
# "joe@example.org (Joe Bloggs)" and "Joe Bloggs <joe@example.org>": RSS's <author> spellings.
_MAIL_THEN_NAME = re.compile(r"^\s*[^\s@()]+@[^\s@()]+\s*\((.+)\)\s*$")
_NAME_THEN_MAIL = re.compile(r"^\s*(.+?)\s*[<(][^\s@<>()]+@[^\s@<>()]+[>)]\s*$")  # also "Name (mail)"
_KINDS = {"2.0": "rss20", "2.0.1": "rss20", "0.91": "rss091u", "0.92": "rss092", "0.93": "rss093",
          "0.94": "rss094"}

_local = threading.local()  # an lxml parser serves one document at a time: one per thread


def _parser() -> etree.XMLParser:
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = etree.XMLParser(
            recover=True, resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False,
            encoding="utf-8", remove_comments=True, remove_pis=True, collect_ids=False)
    return parser


def parse(body: bytes, *, url: str, headers: Mapping[str, str], source: SourceView, fetched: str,
          limit: int | None = None) -> Parsed | None:
    """The feed's records (at most `limit`, the newest, each read whole), or None when feedparser should
    read it."""
    found = scan(body, url=url, headers=headers, source=source, fetched=fetched, limit=limit)
    return None if found is None else found.read()


def scan(body: bytes, *, url: str, headers: Mapping[str, str], source: SourceView, fetched: str,
         limit: int | None = None, ids: bool = False) -> Scan | None:
    """The feed read as far as its kept entries (at most `limit`, the newest) and, with `ids`, each one's
    ids and digest; Scan.read reads the chosen ones whole (identity first: a steady poll normalizes only
    its new entries). None when feedparser should read it."""
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    decoded = to_utf8(body, content_type)
    if not decoded.encoding:
        return None  # UTF-16/32 or EBCDIC without a byte order mark: feedparser sniffs those
    text = decoded.body.lstrip()
    if _DECLARES_ENTITIES.search(text, 0, 65536):
        # A DTD that declares entities (billion laughs, XXE): the fast path leaves every entity
        # unexpanded, but libxml2 then stops at the first amplification; feedparser's handling of
        # these is the one the hostile-source tests hold, so it reads them.
        return None
    declaration = _XML_DECLARATION.match(text)  # it may name the old encoding; the text is UTF-8 now
    if declaration:
        text = text[declaration.end():]
    text, lifted = _prepared(text)
    location = next((v for k, v in headers.items() if k.lower() == "content-location"), "")
    base = urljoin(url, location) if location else url
    parser = _parser()
    try:
        root = etree.fromstring(text, parser, base_url=base or None)
    except etree.XMLSyntaxError:
        return None
    if root is None or not isinstance(root.tag, str):
        return None
    found = _channel_and_entries(root)
    if found is None:
        return None
    kind, channel, entries = found
    if not entries:
        return None  # an empty feed, or one we misread: feedparser tells which
    warnings = list(decoded.warnings)
    problem = _problem(root, parser)
    if problem:
        entries = keep_whole_entries(entries, text, problem, warnings)
    dated: list[tuple[etree._Element, tuple[str, bool] | None]]  # each entry, with its date when it was read
    if limit is not None and len(entries) > limit:
        dates = [_entry_date(e) for e in entries]  # dated first: only the kept are read whole
        pairs: list[tuple[etree._Element, tuple[str, bool] | None]] = list(zip(entries, dates, strict=True))
        dated = select_newest(pairs, [date for date, _ in dates], limit)
    else:
        dated = [(e, None) for e in entries]
    try:
        if lifted:
            _restore(channel, lifted, deep=False)
            for entry, _ in dated:
                _restore(entry, lifted, deep=True)
        fielded = [(entry, date, _fields(entry)) for entry, date in dated]
        entry_ids = [_ids(entry, fields, source.name, digest=ids) for entry, _, fields in fielded]
        info = _feed_info(channel)
    except (UnicodeDecodeError, ValueError):
        return None  # as below, where the entries are read
    about = Parsed(records=[], warnings=warnings, kind=kind, home=info.link, feed=info)

    def read(wanted: Sequence[bool]) -> Parsed | None:
        notes: set[str] = set()  # what reading them finds (dates without a time zone)
        try:
            records: list[Record] = [_record(*one, entry_id, source.name, fetched, notes, info.language)
                                     for one, entry_id, want in zip(fielded, entry_ids, wanted, strict=True) if want]
        except UnicodeDecodeError:
            # libxml2's recovery lets a surrogate reference (&#xDC80;) through as bytes lxml cannot
            # decode: feedparser reads such a body (with the surrogate replaced).
            return None
        except ValueError:
            return None
        return replace(about, records=records, notes=sorted(notes))

    return Scan(ids=entry_ids, about=about, entries=read)


def _prepared(text: bytes) -> tuple[bytes, list[bytes]]:
    """`text` as libxml2 is to read it, and the CDATA sections lifted out of it.

    Ampersands outside CDATA sections are made XML (see _repaired). A CDATA section of LIFT_AT bytes
    or more (a post's content:encoded, most of a feed's bytes) is replaced by a short placeholder
    and its bytes kept aside: libxml2 then need not copy and check them, and only the kept
    entries' sections are ever decoded (_restore). The sections are found with bytes.find: a
    non-greedy pattern over a whole feed cost more than the parse itself."""
    repair = _ODD_AMPERSAND.search(text) is not None
    lift = _MARK_BYTES not in text  # a document holding the mark itself is parsed whole
    if not repair and not (lift and b"<![CDATA[" in text):
        return text, []
    parts: list[bytes] = []
    lifted: list[bytes] = []
    position = 0
    while True:
        start = text.find(b"<![CDATA[", position)
        end = text.find(b"]]>", start + 9) if start >= 0 else -1
        if end < 0:  # no (closed) section left: the rest is markup
            rest = text[position:]
            parts.append(_REPAIRABLE.sub(_repaired, rest) if repair else rest)
            return b"".join(parts), lifted
        markup = text[position:start]
        parts.append(_REPAIRABLE.sub(_repaired, markup) if repair else markup)
        if lift and end - start - 9 >= LIFT_AT:
            section = text[start + 9:end]
            # The section's line ends stay, so libxml2's line numbers in a warning are the document's.
            parts.append(b"<![CDATA[%s%d%s%s]]>" % (_MARK_BYTES, len(lifted), b"\n" * section.count(b"\n"),
                                                   _MARK_END_BYTES))
            lifted.append(section)
        else:
            parts.append(text[start:end + 3])
        position = end + 3


def _restore(element: etree._Element, lifted: list[bytes], *, deep: bool) -> None:
    """Put the lifted sections back into `element`'s text (and, with `deep`, its descendants'), as
    libxml2 would have read them: line ends as LF; the control characters XML forbids, at which
    libxml2 would have stopped, left out (as record.clean_text would)."""
    def section(match: re.Match) -> str:
        raw = lifted[int(match.group(1))]
        if b"\r" in raw:
            raw = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return raw.translate(None, CONTROL_BYTES).decode("utf-8", "replace")

    for node in (element.iter() if deep else (element, *element)):
        text, tail = node.text, node.tail
        if text and _MARK in text and isinstance(node.tag, str):
            node.text = _PLACEHOLDER.sub(section, text)
        if tail and _MARK in tail:
            node.tail = _PLACEHOLDER.sub(section, tail)


def _repaired(match: re.Match) -> bytes:
    """An odd ampersand as XML, kept per spelling (a feed repeats a few dozen: &nbsp;, a bare &) up to
    SEEN_TAGS of them, for this process's life: what it becomes depends on the matched bytes alone."""
    found = match.group(0)
    repaired = _REPAIRED.get(found)
    if repaired is None:
        repaired = _repair(found, match.group(1))
        if len(_REPAIRED) < SEEN_TAGS:
            _REPAIRED[found] = repaired
    return repaired


def _repair(found: bytes, name: bytes | None) -> bytes:
    if found == b"&":
        return b"&amp;"  # a bare ampersand
    if name and name not in (b"amp", b"lt", b"gt", b"quot", b"apos"):
        characters = html5.get(name.decode("ascii") + ";")
        if characters:
            return b"".join(b"&#%d;" % ord(c) for c in characters)
    return found  # XML's own, a character reference, or an entity the document may declare


def _channel_and_entries(root: etree._Element) -> tuple[str, etree._Element, list] | None:
    """(kind, the element holding the feed's own fields, the entry elements); None for an unknown root."""
    tag = root.tag
    if tag in ("rss", f"{{{USERLAND}}}rss"):
        namespace = tag[:-3]
        channel = root.find(namespace + "channel")
        holder = channel if channel is not None else root
        item_tags = {namespace + "item", "item"}  # seen: namespaced channel, items with xmlns=""
        entries = [e for e in holder if e.tag in item_tags] or list(root.iter(*item_tags))
        return _KINDS.get((root.get("version") or "").strip(), "rss"), holder, entries
    if tag == f"{{{RDF}}}RDF":
        entries = [e for e in root.iter() if e.tag in _ENTRY_TAGS]
        channel = root.find(f"{{{RSS10}}}channel")
        if channel is None:
            channel = root.find(f"{{{RSS090}}}channel")
        kind = "rss090" if any(e.tag == f"{{{RSS090}}}item" for e in entries[:1]) else "rss10"
        return kind, channel if channel is not None else root, entries
    if tag in (f"{{{ATOM10}}}feed", f"{{{ATOM03}}}feed"):
        entry_tag = tag[:-4] + "entry"
        return ("atom10" if ATOM10 in tag else "atom03"), root, [e for e in root if e.tag == entry_tag]
    return None


def _problem(root: etree._Element, parser: etree.XMLParser) -> str:
    """What libxml2 had to recover from, or an entity declaration left unexpanded; '' for a clean body."""
    for error in parser.error_log:
        if error.level >= etree.ErrorLevels.ERROR:
            return error.message.strip()[:200]
    dtd = root.getroottree().docinfo.internalDTD
    if dtd is not None and any(True for _ in dtd.iterentities()):
        return "its DTD declares entities; they are not expanded"
    for error in parser.error_log:
        return error.message.strip()[:200]  # e.g. an undefined entity: a warning to libxml2
    return ""


# -- one entry -------------------------------------------------------------------------------------
def _field_of(tag: object) -> str | None:
    """The field an element's tag feeds (TAGS), its namespace matched without regard to case."""
    name = _FIELD_OF.get(tag)
    if name is None:
        name = _learned(tag, TAGS, _TAGS_BY_LOWER_NS, _FIELD_OF)
    return name or None


def _learned(tag: object, by_tag: Mapping[str, str], by_lower_ns: Mapping[str, str], seen: dict[object, str]) -> str:
    """by_tag's name for `tag`, else by_lower_ns's for it with its namespace in lower case, "" for none;
    kept in `seen` (a feed's elements have a few dozen tags between them, and a miss costs a partition
    and a lower() each time), up to SEEN_TAGS tags."""
    # An entity's tag is a function: never in TAGS (and read once: lxml builds it).
    name = by_tag.get(tag, "") if isinstance(tag, str) else ""
    if not name and isinstance(tag, str) and tag.startswith("{"):
        namespace, _, local = tag[1:].partition("}")
        name = by_lower_ns.get("{" + namespace.lower() + "}" + local, "")
    if len(seen) < SEEN_TAGS:  # a body of a million made-up tags keeps the parse process's memory flat
        seen[tag] = name
    return name


def _fields(entry: etree._Element) -> dict[str, list[etree._Element]]:
    """The entry's children by field (TAGS), in document order; media:group's children included."""
    fields: dict[str, list[etree._Element]] = {}
    for child in entry:
        name = _field_of(child.tag)
        if name == "mediagroup":
            for grandchild in child:
                inner = _field_of(grandchild.tag)
                if inner in ("mediatitle", "mediadescription"):
                    fields.setdefault(inner, []).append(grandchild)
        elif name:
            fields.setdefault(name, []).append(child)
    return fields


def _entry_date(entry: etree._Element) -> tuple[str, bool]:
    fields: dict[str, list[etree._Element]] = {}
    for child in entry:
        name = _field_of(child.tag)
        if name in ("published", "updated", "created"):
            fields.setdefault(name, []).append(child)
    return _published(fields)


def _ids(entry: etree._Element, fields: Mapping[str, list], source_name: str, *,
         digest: bool = False) -> dict[str, str]:
    """What identifies an entry, exactly as _record gives it: source, guid (the link when it has
    none) and link, and with `digest` its _digest; read for every kept entry before any is read whole."""
    guid_element = _first(fields, "guid")
    guid = _plain(guid_element) or _plain(_first(fields, "id")) or \
        clean_text(entry.get(_RDF_ABOUT) or "").strip()
    link = _link(fields)
    if not link and guid_element is not None and (guid_element.get("isPermaLink") or "").strip().lower() != "false" \
            and guid.startswith(("http://", "https://")):
        link = _http(guid_element, guid)  # RSS 2.0: a guid is the item's permalink unless it says otherwise
    ids = {"source": source_name, "guid": guid or link, "link": link}
    if digest:
        ids["digest"] = _digest(fields)
    return ids


def _digest(fields: Mapping[str, list]) -> str:
    """16 hex characters over the text of what an edit changes (title, summary, content, updated): a
    known entry whose digest differs is read whole again and updates its row (parser/pipeline/last_polls.py).
    Its elements' text as libxml2 holds it, in UTF-8 (no str made and encoded again), through OpenSSL's
    SHA-1: the cheapest measured (docs/benchmarks.md), as it is paid for every kept entry of every changed
    feed. What it must see is an edit, not an attacker's collision: 64 bits of any good hash do."""
    digest = hashlib.sha1(usedforsecurity=False)
    for name in _DIGESTED:
        for element in fields.get(name, ()):
            digest.update(etree.tostring(element, method="text", encoding="utf-8", with_tail=False))
            digest.update(b"\x1f")
    return digest.hexdigest()[:16]


def _record(entry: etree._Element, dated: tuple[str, bool] | None, fields: dict[str, list], ids: dict[str, str],
            source_name: str, fetched: str, notes: set[str], feed_language: str = "") -> AdapterRecord:
    published, zoned = dated or _published(fields)
    if not zoned:
        notes.add(NO_ZONE_NOTE)
    link = ids["link"]
    title = _title(_first(fields, "title")) or _title(_first(fields, "dctitle")) or \
        _title(_first(fields, "mediatitle"), default_type="text")
    summary_element = next((e for e in map(fields.get, ("summary", "dcdescription", "itunessummary",
                                                        "mediadescription")) if e), [None])[0]
    content, base = _content(fields)
    if summary_element is not None:
        plain = _field_of(summary_element.tag) in ("itunessummary", "mediadescription")
        summary = _html_text(_html_of(summary_element, default_type="text" if plain else ""))
    else:
        summary = _html_text(content)  # as feedparser does: the content stands in for a missing summary
    if not content:
        content, base = _html_summary(_first(fields, "summary"))
    extras = _extras(entry)
    return {
        "source": source_name,
        "guid": ids["guid"],
        "link": link,
        "title": title[:TITLE_MAX],
        "author": _authors(fields),
        "published": published,
        "updated": _updated(fields),
        "summary": summary,
        "content": content,
        "categories": extras.categories,
        "enclosures": extras.enclosures,
        "image": next(iter(extras.thumbnails + extras.images), ""),
        "comments": next(iter(extras.comments), ""),
        "language": language_tag(_language(entry, fields) or next(iter(extras.languages), "") or feed_language),
        "fetched": fetched,
        "base": base,  # not stored: finish_record resolves the content's relative links against it
    }


def _html_summary(element: etree._Element | None) -> tuple[str, str]:
    """(an RSS description's or Atom summary's HTML, its base) when it is HTML, for an entry with no
    content: typed html/xhtml, or RSS text that reads as HTML (feedparser's guess); Atom's untyped
    summary is text by RFC 4287."""
    if element is None:
        return "", ""
    atom = isinstance(element.tag, str) and element.tag.startswith(("{" + ATOM10, "{" + ATOM03))
    kind = _type_of(element, "text" if atom else "")
    if kind == "" and len(element):  # markup written unescaped in an RSS description: HTML as it stands
        return _xhtml(element), element.base or ""
    if kind in ("text", "base64 text") or (kind == "" and not looks_like_html(_text(element))):
        return "", ""
    return _html_of(element, default_type=kind), element.base or ""


class _Extras:
    """What an entry read whole carries besides its text: lists in the document's order."""
    __slots__ = ("categories", "enclosures", "media", "thumbnails", "images", "comments", "languages")

    def __init__(self) -> None:
        self.categories: list[str] = []
        self.enclosures: list[Enclosure] = []
        self.media: list[Enclosure] = []  # media:content, after the enclosures as feedparser lists them
        self.thumbnails: list[str] = []
        self.images: list[str] = []
        self.comments: list[str] = []
        self.languages: list[str] = []


def _extras(entry: etree._Element) -> _Extras:
    """Categories, enclosures, image, comments and language of one entry read whole (one pass over its
    children, media:group's and media:content's included)."""
    found = _Extras()
    _gather(entry, found, 0)
    found.enclosures += found.media
    return found


def _gather(element: etree._Element, found: _Extras, depth: int) -> None:
    for child in element:
        name = _extra_of(child.tag)
        if name is None:
            continue
        if name == "category":
            term = (child.get("term") or "").strip() or _plain(child) or (child.get("label") or "").strip()
            found.categories.append(term)
        elif name == "keywords":
            found.categories += [word.strip() for word in _plain(child).split(",")]
        elif name == "itunescategory":
            found.categories.append((child.get("text") or "").strip())
        elif name == "enclosure":
            found.enclosures.append(_enclosure(child, "url", "length"))
        elif name == "mediacontent":
            found.media.append(_enclosure(child, "url", "fileSize"))
            if depth < 2:
                _gather(child, found, depth + 1)
        elif name == "mediagroup" and depth < 2:
            _gather(child, found, depth + 1)
        elif name == "atomlink":
            _atom_link(child, found)
        elif name == "thumbnail":
            found.thumbnails.append(absolute_url(child.get("url") or _plain(child), child.base or ""))
        elif name == "itunesimage":
            found.images.append(absolute_url(child.get("href") or child.get("url") or "", child.base or ""))
        elif name == "comments":
            found.comments.append(absolute_url(_plain(child), child.base or ""))
        elif name == "language":
            found.languages.append(_plain(child))
    for values in (found.thumbnails, found.images, found.comments, found.languages):
        if "" in values:
            values[:] = [v for v in values if v]


def _atom_link(element: etree._Element, found: _Extras) -> None:
    """Atom's rel="enclosure" (a file) and rel="replies" to an HTML page (the comments, RFC 4685)."""
    rel = (element.get("rel") or "").strip().lower()
    if rel == "enclosure":
        found.enclosures.append(_enclosure(element, "href", "length"))
        if not found.enclosures[-1]["url"]:  # <link rel="enclosure">http://...</link>, as feedparser reads it
            found.enclosures[-1]["url"] = absolute_url(_plain(element), element.base or "")
    elif rel == "replies" and "html" in (element.get("type") or "").lower():
        found.comments.append(absolute_url(element.get("href") or "", element.base or ""))


def _enclosure(element: etree._Element, url: str, length: str) -> Enclosure:
    return {"url": absolute_url(clean_text(element.get(url) or ""), element.base or ""),
            "type": (element.get("type") or "").strip(), "length": enclosure_length(element.get(length))}


def _extra_of(tag: object) -> str | None:
    """The extra an element's tag feeds (EXTRA_TAGS), its namespace matched without regard to case."""
    name = _EXTRA_OF.get(tag)
    if name is None:
        name = _learned(tag, EXTRA_TAGS, _EXTRA_BY_LOWER_NS, _EXTRA_OF)
    return name or None


def _lang_in_effect(element: etree._Element | None) -> str:
    """The xml:lang in effect at `element` (its own, else the nearest ancestor's); '' when none."""
    while element is not None:
        lang = element.get(XML_LANG)
        if lang is not None:
            return lang.strip()
        element = element.getparent()
    return ""


def _language(entry: etree._Element, fields: Mapping[str, list]) -> str:
    """The xml:lang in effect at the entry's title, else its summary, else its content (feedparser's
    order: each detail keeps the language in effect), else at the entry itself."""
    for name in ("title", "summary", "encoded", "content"):
        element = _first(fields, name)
        if element is not None:
            lang = _lang_in_effect(element)
            if lang:
                return lang
    return _lang_in_effect(entry)


def _feed_info(channel: etree._Element) -> FeedInfo:
    """The feed's title, home page, description and language (RSS <language> or dc:language, else the
    xml:lang in effect)."""
    title = description = language = ""
    for child in channel:
        if not isinstance(child.tag, str):
            continue
        name = _field_of(child.tag)
        if name in ("title", "dctitle") and not title:
            title = _title(child)
        elif not description and (name in ("summary", "dcdescription")
                                  or child.tag in (f"{{{ATOM10}}}subtitle", f"{{{ATOM03}}}tagline")):
            description = _html_text(_html_of(child))
        elif not language and _extra_of(child.tag) == "language":
            language = _plain(child)
    return FeedInfo(title=title[:TITLE_MAX], link=_home(channel), description=description,
                    language=language_tag(language or _lang_in_effect(channel)))


def _title(element: etree._Element | None, default_type: str = "") -> str:
    """A title as text, decoded exactly once by its type (record.title_text); an untyped one is HTML
    only when it looks like HTML. A script's or style's text is no part of a title."""
    if element is None:
        return ""
    kind = _type_of(element, default_type)
    if kind == "xhtml":
        value, kind = _xhtml(element), "html"
    else:
        value = clean_text(_text(element))
        if kind.startswith("base64"):
            value, kind = _unbase64(value, kind)
    if kind != "text" and "<" in value:
        value = _hidden_out(value)
    return title_text(value, kind or "guess")


def _html_text(value: str) -> str:
    """Plain text of an HTML fragment, whitespace collapsed. Patterns, not an HTML parser: a summary
    is text to read, and this runs over every kept entry's HTML (an lxml parse costs five times more)."""
    if "<" in value:
        value = _tags_out(_hidden_out(value))
    if "&" in value:
        value = html.unescape(value)
    return " ".join(value.split())


def _hidden_out(value: str) -> str:
    """`value` with each comment, script and style (text and all) a space, in one pass: each opener's
    close found once, and an opener of a kind no close follows passed over (none follows a later one
    either). An unclosed one stays, as the tags after it do."""
    parts: list[str] = []
    position = 0
    unclosed: set[str] = set()
    for opener in _HIDDEN_START.finditer(value):
        kind = opener[1].lower()
        if opener.start() < position or kind in unclosed:  # inside one taken out, or never closed
            continue
        if kind == "!--":
            close = value.find("-->", opener.end())
            end = close + 3 if close >= 0 else -1
        else:
            found = _HIDDEN_END[kind].search(value, opener.end())
            end = found.end() if found else -1
        if end < 0:
            unclosed.add(kind)
            continue
        parts += (value[position:opener.start()], " ")
        position = end
    return "".join((*parts, value[position:])) if parts else value


def _tags_out(value: str) -> str:
    """`value` with each tag a space. Only up to its last ">": no "<" after it opens a tag."""
    last = value.rfind(">")
    return _TAG.sub(" ", value[:last + 1]) + value[last + 1:] if last >= 0 else value


def _first(fields: Mapping[str, list], name: str):
    found = fields.get(name)
    return found[0] if found else None


def _text(element: etree._Element | None) -> str:
    """An element's text, children's text included (an entity left unexpanded stays '&name;')."""
    if element is None:
        return ""
    if len(element) == 0:
        return element.text or ""
    return "".join(element.itertext())


def _plain(element: etree._Element | None) -> str:
    return clean_text(_text(element)).strip()


def _type_of(element: etree._Element, default_type: str) -> str:
    """'text', 'html' or 'xhtml' from Atom 1.0's type or Atom 0.3's type/mode; RSS has none."""
    kind = (element.get("type") or "").strip().lower()
    mode = element.get("mode", "").strip().lower()
    if mode == "base64" or ("/" in kind and not kind.startswith("text/") and not kind.endswith(("+xml", "/xml"))):
        # Atom 0.3's mode="base64", Atom 1.0's other media types: the value is base64 (RFC 4287 3.1.1),
        # when it is (_unbase64); a title typed "application/x-custom" by mistake stays text.
        return "base64 " + ("html" if "html" in kind else "text")
    if mode == "escaped" or kind in ("html", "text/html"):
        return "html"
    if kind in ("xhtml", "application/xhtml+xml") or element.get("mode", "").strip().lower() == "xml":
        return "xhtml"
    if kind in ("text", "text/plain", "plain"):  # "plain": Media RSS's word for it
        return "text"
    # No type at all (RSS, and Atom written carelessly: "7769&nbsp;" in an untyped Atom 0.3 title):
    # the caller's default, else the value decides (record.looks_like_html, as for a description).
    return default_type


def _html_of(element: etree._Element | None, default_type: str = "") -> str:
    """The element's value as HTML, whatever its type: text is escaped, xhtml serialized, and an
    untyped (RSS) value is HTML when it reads as HTML, else text."""
    if element is None:
        return ""
    kind = _type_of(element, default_type)
    if kind == "xhtml":
        value = _xhtml(element)
    else:
        value = _text(element)  # control characters are left to finish_record: one pass, after nh3
        if kind.startswith("base64"):
            value, kind = _unbase64(value, kind)
        if kind == "text" or (kind == "" and not looks_like_html(value)):
            return html.escape(value, quote=False)
    return value


def _unbase64(value: str, kind: str) -> tuple[str, str]:
    """A "base64 ..." value and kind decoded; a value that is no base64 of UTF-8 text (a title whose
    writer gave it a made-up media type) is kept as the text it is, never decoded into garbage."""
    try:
        return base64.b64decode(_SPACES.sub("", value), validate=True).decode("utf-8"), kind[7:]
    except (ValueError, binascii.Error):  # UnicodeDecodeError is a ValueError
        return value, "text"


def _xhtml(element: etree._Element) -> str:
    """Atom xhtml content: the children of its <div>, serialized as HTML without namespaces."""
    holder = element
    children = [c for c in element if isinstance(c.tag, str)]
    if len(children) == 1 and etree.QName(children[0]).localname == "div" and not (element.text or "").strip():
        holder = children[0]
    parts = [html.escape(holder.text or "", quote=False)]
    for child in holder:
        parts.append(etree.tostring(child, method="html", encoding="unicode", with_tail=True))
    value = "".join(parts)
    return value.replace(f' xmlns="{XHTML}"', "").replace("html:", "") if XHTML in value or "html:" in value \
        else value


def _content(fields: Mapping[str, list]) -> tuple[str, str]:
    """(the entry's full content as HTML, the address its relative links are relative to):
    content:encoded, or Atom content (an HTML part first)."""
    encoded = _first(fields, "encoded")
    if encoded is not None:
        return _html_of(encoded, default_type="html"), encoded.base or ""
    parts = fields.get("content") or []
    if not parts:
        return "", ""
    part = next((p for p in parts if _type_of(p, "") in ("html", "xhtml")), parts[0])
    return _html_of(part), part.base or ""


def _link(fields: Mapping[str, list]) -> str:
    """The entry's http(s) alternate link, resolved against xml:base and the feed's address;
    FeedBurner's origLink (the article, not the feedproxy redirect) first."""
    for element in fields.get("origlink", ()):
        link = _http(element, _plain(element))
        if link:
            return link
    for element in fields.get("link", ()):
        link = _http(element, _plain(element) or (element.get("href") or "").strip())
        if link:
            return link
    for element in fields.get("atomlink", ()):
        if (element.get("rel") or "alternate").strip() == "alternate":
            link = _http(element, (element.get("href") or "").strip() or _plain(element))
            if link:
                return link
    return ""


def _http(element: etree._Element, value: str) -> str:
    """`value` resolved against the element's base, canonical; '' unless it is an http(s) URL."""
    if not value:
        return ""
    if not value.startswith(("http://", "https://")):
        base = element.base or ""
        try:
            value = urljoin(base, value) if base else value
        except ValueError:
            return ""
        if not value.lower().startswith(("http://", "https://")):
            return ""
    if is_canonical_already(value, exact=True):  # most links: no split, no w3lib
        return value
    try:
        if not urlsplit(value).hostname:
            return ""
    except ValueError:  # "http://example.c[o.test/": not an address
        return ""
    return canonical_url(clean_text(value), exact=True)  # parser/pipeline/identity.py decides what of it identifies


def _home(channel: etree._Element) -> str:
    """The feed's own home page: RSS's channel <link>, Atom's alternate link."""
    for child in channel:
        name = _field_of(child.tag)
        if name == "link":
            link = _http(child, _plain(child) or (child.get("href") or "").strip())
        elif name == "atomlink" and (child.get("rel") or "alternate").strip() == "alternate":
            link = _http(child, (child.get("href") or "").strip())
        else:
            continue
        if link:
            return link
    return ""


def _authors(fields: Mapping[str, list]) -> str:
    """Every author, in document order, joined with ', '; a person's name, the e-mail only without one."""
    names: list[str] = []
    for element in fields.get("atomauthor", ()):
        name = email = ""
        for child in element:
            if not isinstance(child.tag, str):
                continue
            local = etree.QName(child).localname
            if local == "name":
                name = _plain(child)
            elif local == "email":
                email = _plain(child)
        if not name and not email and not any(isinstance(c.tag, str) for c in element):
            name = _plain(element)  # <author>Joe</author>, Atom 0.3 style
        names.append(name or email)
    for key in ("author", "creator"):
        for element in fields.get(key, ()):
            names.append(_person(_plain(element)))
    if not any(names):
        names = [_person(_plain(e)) for e in fields.get("itunesauthor", ())]
    unique = [_html_text(n) for n in dict.fromkeys(n for n in names if n)]
    return ", ".join(n for n in dict.fromkeys(unique) if n)


def _person(value: str) -> str:
    match = _MAIL_THEN_NAME.match(value) or _NAME_THEN_MAIL.match(value)
    return match.group(1).strip() if match else _SPACES.sub(" ", value)


def _published(fields: Mapping[str, list]) -> tuple[str, bool]:
    """The first readable of published, updated, created (as feedparser orders them), UTC ISO 8601
    (parser/core/dates.py: other languages read, impossible days refused), and False when the text had no
    zone; of two values of one kind (<issued> and <published>), the later one in the document."""
    for key in ("published", "updated", "created"):
        for element in reversed(fields.get(key, ())):
            read = read_date(_plain(element))
            if read.iso:
                return read.iso, read.zoned
    return "", True


def _updated(fields: Mapping[str, list]) -> str:
    """The entry's last-modified date (Atom <updated>, dc:date, dcterms:modified), UTC ISO 8601; the
    later one in the document when there are two."""
    for element in reversed(fields.get("updated", ())):
        read = read_date(_plain(element))
        if read.iso:
            return read.iso
    return ""
