"""`full_text: true`: for an entry with no content and a summary under SHORT_SUMMARY characters, fetch
its page and keep the page's main text (trafilatura) as the record's content.

Runs in the worker thread of the poll, with its own timeout. A page that cannot be fetched or has
no main text, or a failure of any other kind (trafilatura or a module it needs missing from the
install), keeps the summary and adds one warning line (errors.log); it never fails the source.
An entry's link is a stranger's: it is fetched only at a public address (the resolved address checked,
redirects included), unless the source sets `full_text_internal` (an intranet's pages).
Each link is tried once: a small file of link digests remembers which, so a feed that changes
every poll does not fetch its fifty pages again every poll (their records are duplicates by then).
"""
from __future__ import annotations

import hashlib
import logging
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..adapters import Parsed
from ..adapters.sanitize import safe_html
from ..adapters.source_view import SourceView
from ..core.errors import FetchError
from ..core.record import Record

log = logging.getLogger("parser")
SHORT_SUMMARY = 220
PAGE_ACCEPT = "text/html, application/xhtml+xml;q=0.9, */*;q=0.5"


class FullText:
    def __init__(self, fetcher: Any, memory_path: Path | None = None):
        """`fetcher` is a Fetcher with the full-text timeout (Fetcher.with_timeout); `memory_path`
        None remembers nothing across runs (a dry run writes no file)."""
        self.fetcher = fetcher                # for a source with full_text_internal
        self.public = fetcher.public_only()   # for every other: an entry's link is a stranger's
        self.memory = _TriedLinks(memory_path)

    def enrich(self, source: SourceView, parsed: Parsed) -> Parsed:
        """`parsed` with `content` filled in its short records (new records, a new Parsed); problems
        become its warnings."""
        wanted = {id(r) for r in parsed.records if not r.get("content") and len(r.get("summary") or "") < SHORT_SUMMARY
                  and (r.get("link") or "").startswith(("http://", "https://"))
                  and self.memory.first_try(source.name, r["link"])}
        if not wanted:
            return parsed
        missing = missing_module()
        if missing:  # tried all the same: these entries are stored now, and a page fetched later is a duplicate's
            return replace(parsed, warnings=[*parsed.warnings, f"full text unavailable: {missing}; "
                                                               f"{len(wanted)} entries kept their summary"])
        fetcher = self.fetcher if source.full_text_internal else self.public
        warnings = list(parsed.warnings)
        records: list[Record] = []
        for record in parsed.records:
            if id(record) in wanted:
                record = self._with_text(record, fetcher, warnings)
            records.append(record)
        return replace(parsed, records=records, warnings=warnings)

    def _with_text(self, record: Record, fetcher: Any, warnings: list[str]) -> Record:
        """The record with its page's main text as `content`; the record as it was when there is none."""
        link = record["link"]
        try:
            return {**record, "content": self.extract(link, fetcher)}
        except FullTextError as exc:
            warnings.append(f"full text of {link}: {exc}; kept the summary")
        except Exception as exc:  # noqa: BLE001 (a bug here must not cost the source its entries)
            log.exception("full text of %s", link)
            warnings.append(f"full text of {link}: internal error {exc!r}"[:300] + "; kept the summary")
        return record

    def extract(self, link: str, fetcher: Any = None) -> str:
        """The main text of the page at `link` as safe HTML; FullTextError says why not."""
        try:
            result = (fetcher or self.public).get(link, accept=PAGE_ACCEPT)
        except FetchError as exc:
            raise FullTextError(str(exc)) from None
        mime = (result.headers.get("content-type") or "text/html").split(";")[0].strip().lower()
        if mime not in ("text/html", "application/xhtml+xml", "text/plain", ""):
            raise FullTextError(f"not a web page ({mime})")
        import trafilatura  # imported on first use: it is large, and most projects never need it
        try:
            html = trafilatura.extract(result.body.decode(_charset(result.headers), "replace"), url=link,
                                       output_format="html", include_comments=False, include_images=True,
                                       favor_precision=True)
        except Exception as exc:  # trafilatura on a stranger's page: any failure is that page's
            raise FullTextError(f"extraction failed: {exc!r}"[:200]) from None
        content = safe_html(html or "")
        if not content:
            raise FullTextError("no main text found on the page")
        return content


class FullTextError(Exception):
    pass


def missing_module() -> str:
    """'' when full text's modules import; else what is missing, in words an operator acts on.
    trafilatura (through justext) imports lxml.html.clean, a shell over lxml_html_clean, which an install
    may lack (justext asks for it as `lxml[html_clean]`, an extra that older pips do not match)."""
    try:
        import lxml_html_clean  # noqa: F401
        import trafilatura  # noqa: F401
    except Exception as exc:  # noqa: BLE001 (an ImportError, or a broken module's own error)
        name = getattr(exc, "name", None) or type(exc).__name__
        return (f"cannot import {name} ({str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__}); "
                "install it into the daemon's environment (pip install lxml_html_clean trafilatura)")
    return ""


def _charset(headers: Any) -> str:
    content_type = headers.get("content-type") or ""
    for part in content_type.split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            candidate = value.strip().strip('"')
            try:
                "".encode(candidate)
                return candidate
            except LookupError:
                break
    return "utf-8"


class _TriedLinks:
    """Digests of (source, link) tried before: a set in memory, a line each in a file (worker threads
    append under a lock; losing the last lines to a crash costs one fetch more, nothing else)."""

    def __init__(self, path: Path | None):
        self.path = path
        self._lock = threading.Lock()
        self._seen: set[str] = set()
        if path is not None and path.exists():
            self._seen.update(path.read_text(encoding="ascii", errors="replace").split())

    def first_try(self, source: str, link: str) -> bool:
        digest = hashlib.sha1(f"{source}\x1f{link}".encode("utf-8", "surrogatepass")).hexdigest()[:20]
        with self._lock:
            if digest in self._seen:
                return False
            self._seen.add(digest)
            if self.path is not None:
                try:
                    with open(self.path, "a", encoding="ascii") as f:
                        f.write(digest + "\n")
                except OSError as exc:
                    log.warning("cannot remember full-text links in %s: %s", self.path, exc)
        return True


def remember_path(staging_dir: Path) -> Path:
    os.makedirs(staging_dir, exist_ok=True)
    return staging_dir / "fulltext-tried.txt"
