"""The identity of a record: the key that says "the same entry" (UNIQUE_FIELDS), decided for one
poll's records together, since whether a link names one entry depends on the entries beside it.

"auto" (the default): an entry is its canonical link, hashed exactly as `UNIQUE_FIELDS = ["link"]`
always did (so hashes.txt and tables of earlier versions still match), when that link names this
entry alone. It does not when it is empty, when it is the feed's own address (home page or feed URL:
a podcast giving every episode the show's page), or when another entry of the same source in this
poll has the same canonical link and the source tells the two apart (another guid, or another link
as written: a #fragment, or a parameter canonicalization drops such as a session id). Such an
entry is keyed within its source: by its guid; else by its link as written; else by its title, date
and text. Never by an empty string shared with other sources.

An explicit list of fields hashes those fields; a record whose fields are all empty is keyed within
its source as above, said once per source in parser.log.

The stored link is canonical (no fragment, tracking or session parameters) unless what
canonicalization drops is what tells two entries of the source apart in this poll (`page#a`,
`page#b`): then the link as written is the entry's real address, and is stored.
"""
from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import parse_qsl

from ..core.record import AnyRecord, ObjectRecord, Record, record_hash
from ..core.urls import canonical_url, is_junk_param

log = logging.getLogger("parser")
AUTO = "auto"
CACHE_LINKS = 50_000  # canonical forms remembered: a steady poll sees the same links again and again
# The version of the rules that make a record's key (this module and parser/core/urls.py): a change that
# gives a record another key than before bumps it, and says here what it does to a hash file made by
# the version before (parser/pipeline/history.py records the version beside each hash file and tells it at start).
RULES_VERSION = 4
RULE_CHANGES = {
    2: "links keep their ref, sid, referrer and spm parameters, which can name an entry (deal.php?ref=17, "
       "PHP-Nuke's article&sid=123): an entry whose link carries one and is still in its feed is stored "
       "once more, under its whole link",
    3: "a link's query escapes in a legacy charset are kept as written (item.php?name=%82%A0 was stored as "
       "name=%EF%BF%BD%EF%BF%BD, and %82%A2 taken for the same entry), and a link written with decomposed "
       "accents (NFD) is keyed as its composed (NFC) spelling: such an entry still in its feed is stored "
       "once more, under its right link; every other link keeps its key",
    4: "a link of another scheme than http(s) (javascript:, data:) is no link (JSON Feed, json_api, webhooks; "
       "RSS and Atom never stored one): such an entry still in its feed is stored once more, keyed by its guid "
       "within its source; and an untyped description holding a lone <img> or <br> is HTML, so an entry with "
       "neither guid nor link, keyed by its text, is stored once more when its description holds one",
}


# Identity hands back the records it was given, of their own type (its links set as stored).
Keyed = TypeVar("Keyed", Record, ObjectRecord, AnyRecord)


@dataclass
class Identified(Generic[Keyed]):
    records: list[Keyed]  # the records as they are stored (the link canonical unless that merges entries)
    keys: list[str]      # one hex digest per record
    by_content: int = 0  # records keyed by their title, date and text (neither guid nor link to go by)


@dataclass
class _Entry:
    """What identity looks at in one record."""
    source: str
    link: str       # as written, spelled canonically (urls.canonical_url exact)
    plain: str      # canonical: the link as UNIQUE_FIELDS = ["link"] always hashed it
    guid: str       # "" when the guid is only the link again (adapters default guid to link)


class Identity:
    """Keys for one table's records. Keeps which sources were told about the fallback (log once)."""

    def __init__(self, unique_fields: str | Sequence[str], algorithm: str, *, table: str = "items"):
        self.auto = unique_fields == AUTO
        self.fields: tuple[str, ...] = () if self.auto else tuple(unique_fields)
        self.algorithm = algorithm
        self.table = table
        self._told_fallback: set[str] = set()
        self._canonical: dict[str, str] = {}

    def keyed_by_ids(self) -> bool:
        """Whether a record's key can come from its source, guid and link alone (identity first:
        parser/pipeline/first_read.py): "auto", or fields among those; except that an entry with neither
        is keyed by its content (Identified.by_content counts those)."""
        return self.auto or set(self.fields) <= {"source", "guid", "link"}

    def identify(self, records: Sequence[Keyed], feed_links: Iterable[str] = (),
                 log_lines: list[tuple[bool, str]] | None = None) -> Identified[Keyed]:
        """Keys for one poll (or one delivery) of records; `feed_links` are the feed's own addresses
        (home page, feed URL), which name the feed and never one entry. Its lines go to parser.log, or
        with `log_lines` (a parse process: parser/pipeline/first_read.py) into that list as (said once per
        source?, line), for the daemon to log."""
        say = self._logged if log_lines is None else lambda once, line: log_lines.append((once, line))
        own = {self._plain(u) for u in feed_links if u}
        entries = [self._entry(r) for r in records]
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, e in enumerate(entries):
            if e.plain:
                groups[(e.source, e.plain)].append(i)
        told_apart: set[tuple[str, str]] = set()   # links several entries share, the source telling them apart
        written_kept: set[tuple[str, str]] = set()  # ... by their links as written
        for group, members in groups.items():
            if len({(entries[i].guid, entries[i].link) for i in members}) > 1:
                told_apart.add(group)
            if len({entries[i].link for i in members}) > 1:
                written_kept.add(group)
        stored: list[Keyed] = []
        for record, e in zip(records, entries, strict=True):
            link = e.link if (e.source, e.plain) in written_kept else e.plain
            if record.get("link", "") != link:
                relinked = record.copy()
                relinked["link"] = link
                if record.get("guid") and record.get("guid") == record.get("link"):
                    relinked["guid"] = link  # the adapters' default guid is the link: it follows the link
                record = relinked
            stored.append(record)
        keys: list[str] = []
        by_content = 0
        for record, e in zip(stored, entries, strict=True):
            if self.auto:
                if e.plain and e.plain not in own and (e.source, e.plain) not in told_apart:
                    keys.append(record_hash({"link": e.plain}, ("link",), self.algorithm))
                else:
                    key, content = self._within_source(record, e, own)
                    keys.append(key)
                    by_content += content
            elif any(record.get(f) for f in self.fields):
                keys.append(record_hash(record, self.fields, self.algorithm))
            else:
                self._tell_fallback(e.source or self.table, say)
                key, content = self._within_source(record, e, own)
                keys.append(key)
                by_content += content
        self._tell_collapse(entries, keys, say)
        return Identified(records=stored, keys=keys, by_content=by_content)

    def _within_source(self, record: AnyRecord, e: _Entry, own: set[str]) -> tuple[str, bool]:
        """A key only this source can produce: its guid, else its link (fragment kept), else its content;
        and whether it was its content."""
        parts: tuple[str, ...]
        if e.guid and self._plain(e.guid) not in own:
            parts = ("guid", e.source, e.guid)
        elif record.get("link") and e.plain not in own:
            parts = ("link", e.source, record["link"])
        else:
            parts = ("content", e.source, str(record.get("title") or ""), str(record.get("published") or ""),
                     str(record.get("summary") or record.get("content") or ""))
        # The record separator keeps these apart from any record_hash of plain fields.
        joined = "\x1e" + "\x1f".join(parts)
        return hashlib.new(self.algorithm, joined.encode("utf-8", "surrogatepass")).hexdigest(), parts[0] == "content"

    def _tell_fallback(self, source: str, say: Callable[[bool, str], None]) -> None:
        """Once per source: here, or (lines handed on, `say` not the log) by the daemon that logs them."""
        if source not in self._told_fallback:
            if say == self._logged:
                self._told_fallback.add(source)
            say(True, f"{source}  records with empty UNIQUE_FIELDS ({', '.join(self.fields)}) are told "
                      "apart within the source by guid, link or content")

    @staticmethod
    def _logged(once: bool, line: str) -> None:
        log.info("%s", line)

    def _tell_collapse(self, entries: list[_Entry], keys: list[str], say: Callable[[bool, str], None]) -> None:
        """Property: a user can see when one poll's entries are fewer entries than they look."""
        by_source: dict[str, tuple[int, set[str]]] = {}
        for e, key in zip(entries, keys, strict=True):
            count, distinct = by_source.get(e.source, (0, set()))
            distinct.add(key)
            by_source[e.source] = (count + 1, distinct)
        for source, (count, distinct) in by_source.items():
            if len(distinct) < count:
                say(False, f"{source or self.table}  {count} entries are {len(distinct)} distinct entries "
                                 f"({count - len(distinct)} repeated, stored once)")


    def _entry(self, record: AnyRecord) -> _Entry:
        # Adapters store the link exactly as written, already spelled canonically (urls.canonical_url).
        link = str(record.get("link") or "")
        guid = str(record.get("guid") or "")
        if guid == link or (guid.startswith(("http://", "https://")) and canonical_url(guid, exact=True) == link):
            guid = ""  # the adapter's default guid, or a permalink guid: the link says it already
        return _Entry(source=str(record.get("source") or ""), link=link, plain=self._plain(link), guid=guid)

    def _plain(self, url: str) -> str:
        """canonical_url of a link spelled canonically already, remembered: w3lib takes tens of
        microseconds a link. A link without fragment, path parameter or junk parameter is its own
        canonical form: canonical_url would give w3lib the same string, with or without `exact`."""
        if "#" not in url and ";" not in url and ("?" not in url or not any(
                is_junk_param(k) for k, _ in parse_qsl(url.partition("?")[2], keep_blank_values=True))):
            return url
        plain = self._canonical.get(url)
        if plain is None:
            if len(self._canonical) >= CACHE_LINKS:
                self._canonical.clear()
            plain = self._canonical[url] = canonical_url(url)
        return plain
