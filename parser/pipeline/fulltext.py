"""`full_text: true`: for an entry with no content and a summary under SHORT_SUMMARY characters, fetch
its page and keep the page's main text (trafilatura) as the record's content.

Runs in the worker thread of the poll, with its own timeout. A page that cannot be fetched or has
no main text keeps the summary and adds one warning line (errors.log); it never fails the source.
Each link is tried once: a small file of link digests remembers which, so a feed that changes
every poll does not fetch its fifty pages again every poll (their records are duplicates by then).
"""
from __future__ import annotations

import hashlib
import logging
import os
import threading
from pathlib import Path
from typing import Any

from ..adapters import Parsed
from ..adapters.sanitize import safe_html
from ..adapters.source_view import SourceView
from ..core.errors import FetchError

log = logging.getLogger("parser")
SHORT_SUMMARY = 220
PAGE_ACCEPT = "text/html, application/xhtml+xml;q=0.9, */*;q=0.5"


class FullText:
    def __init__(self, fetcher: Any, memory_path: Path | None = None):
        """`fetcher` is a Fetcher with the full-text timeout (Fetcher.with_timeout); `memory_path`
        None remembers nothing across runs (a dry run writes no file)."""
        self.fetcher = fetcher
        self.memory = _TriedLinks(memory_path)

    def enrich(self, source: SourceView, parsed: Parsed) -> None:
        """Fill `content` of the short records in place; problems become parsed.warnings."""
        for record in parsed.records:
            link = record.get("link") or ""
            if record.get("content") or len(record.get("summary") or "") >= SHORT_SUMMARY:
                continue
            if not link.startswith(("http://", "https://")) or not self.memory.first_try(source.name, link):
                continue
            try:
                record["content"] = self.extract(link)
            except FullTextError as exc:
                parsed.warnings.append(f"full text of {link}: {exc}; kept the summary")

    def extract(self, link: str) -> str:
        """The main text of the page at `link` as safe HTML; FullTextError says why not."""
        try:
            result = self.fetcher.get(link, accept=PAGE_ACCEPT)
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
