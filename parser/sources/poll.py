"""One poll of one source, in a worker thread: wait for the source's rate, fetch, parse, follow a
JSON API's pages, fill in full text. Returns the first answer and the records; writes nothing.

The daemon calls Poller.poll for every polled protocol; which requests a protocol needs is decided
here, by its row in parser/sources/protocols.py, and in its adapter, never downstream.
"""
from __future__ import annotations

import threading
from dataclasses import replace

from ..adapters import Parsed, newest, parse_body
from ..adapters import json_api as api
from ..adapters.source_view import SourceView
from ..core.cpu_pool import CpuPool, ProcessDiedError
from ..core.errors import FetchError, ParseError, ParseProcessError
from ..core.record import Record
from ..core.urls import redact_url
from ..fetch.discover import feed_links, is_html_page
from ..fetch.http import Fetcher, FetchResult
from ..fetch.ratelimit import RateLimits
from ..pipeline.first_read import Keyed, Keying, read_new
from ..pipeline.fulltext import FullText
from .parse_view import parse_view
from .protocols import protocol_of

JSON_ACCEPT = "application/json, application/feed+json;q=0.9, */*;q=0.5"


class Poller:
    def __init__(self, fetcher: Fetcher, *, stop: threading.Event, max_wait: float,
                 rates: RateLimits | None = None, full_text: FullText | None = None, cpu: CpuPool | None = None):
        """`max_wait`: the longest a request waits for its source's rate before the poll gives up;
        `cpu`: where a feed's body is parsed (parse processes, or this thread)."""
        self.fetcher = fetcher
        self.cpu = cpu or CpuPool(0)
        self.stop = stop
        self.max_wait = max_wait
        self.rates = rates or RateLimits()
        self.full_text = full_text

    def poll(self, source: SourceView, *, etag: str | None, last_modified: str | None, fetched: str,
             discover: bool = True,
             keying: Keying | None = None) -> tuple[FetchResult, Parsed | None, Keyed | None]:
        """(first answer, records or None when it was a 304, their keys when the poll had `keying` and the
        body was read so). Raises FetchError / ParseError.
        `discover` False: an HTML page is an error, its feed links are not followed (the address has
        served a feed before: the page is a maintenance page, not the site's). `keying`: a feed's
        records come keyed and only its new entries read whole (not with full text, which changes
        the records after the parse)."""
        keying = keying if not source.full_text else None
        keyed = None
        if protocol_of(source).json_pages:
            result, parsed = self._json_api(source, etag, last_modified, fetched)
        else:
            self._wait_for_rate(source, first=True)
            result = self.fetcher.get(source.url, headers=api.request_headers(source), etag=etag,
                                      last_modified=last_modified)
            parsed = None
            if not result.not_modified:
                result, (parsed, keyed) = self._parse_or_discover(source, result, fetched, discover, keying)
        if parsed is not None and source.full_text and self.full_text is not None:
            parsed = self.full_text.enrich(source, parsed)
        return result, parsed, keyed

    def _parse_or_discover(self, source: SourceView, result: FetchResult, fetched: str, discover: bool,
                           keying: Keying | None) -> tuple[FetchResult, tuple[Parsed, Keyed | None]]:
        """The body parsed as a feed; or, when a feed source's address is an HTML page, the first feed
        the page links to (<link rel="alternate">) fetched and parsed instead, Parsed.feed_url set."""
        try:
            return result, self._parse(source, result, fetched, keying)
        except ParseProcessError:
            raise
        except ParseError as exc:
            if not protocol_of(source).discovers_feed or not is_html_page(result.body, result.headers):
                raise
            links = feed_links(result.body, result.url)
            if not links:
                raise ParseError(f"{exc}; the page links to no feed (no <link rel=\"alternate\"> of type "
                                 "RSS, Atom or JSON Feed)") from None
            if not discover:
                raise ParseError("answered an HTML page, not a feed; not following its feed links because this "
                                 "address has served a feed before (a maintenance page?); asked again at the next "
                                 "poll. If the feed has moved for good, update its url in params.py") from None
        feed_url = links[0]
        named = f"the page links to the feed{'s' if len(links) > 1 else ''} {', '.join(map(redact_url, links))}"
        self._wait_for_rate(source, first=True)
        # The source's own headers (credentials) go only to its own server, as with a redirect.
        headers = api.request_headers(source) if api.same_origin(feed_url, source.url) else {}
        try:
            feed = self.fetcher.get(feed_url, headers=headers)
            parsed, keyed = self._parse(source, feed, fetched, keying)
        except FetchError as exc:
            raise FetchError(f"{named}; the first failed: {exc}", status=exc.status, retry_after=exc.retry_after,
                             permanent=exc.permanent) from None
        except ParseError as exc:
            raise ParseError(f"{named}; the first is not a feed either: {exc}") from None
        return feed, (replace(parsed, feed_url=feed_url), keyed)

    def _parse(self, source: SourceView, result: FetchResult, fetched: str,
               keying: Keying | None) -> tuple[Parsed, Keyed | None]:
        """A feed's body parsed where the CPU is (self.cpu), keyed there too when the poll has keying. The
        source goes as its ParseView: a parse process unpickling the settings' Source would import them.
        Only the max_items newest entries are kept (the fast path reads no other); pushed records are never cut."""
        source = parse_view(source)
        try:
            if keying is None:
                return self.cpu.run(parse_body, source, result.body, url=result.url, headers=result.headers,
                                    fetched=fetched, limit=source.max_items), None
            return self.cpu.run(read_new, source, result.body, url=result.url, headers=result.headers,
                                fetched=fetched, limit=source.max_items,
                                keying=replace(keying, feed_urls=(*keying.feed_urls, result.url)))
        except ProcessDiedError as exc:
            raise ParseProcessError(str(exc)) from None

    def _wait_for_rate(self, source: SourceView, *, first: bool) -> bool:
        """Wait for the source's rate; False when it would take longer than max_wait (later pages).
        For the first request that is a FetchError carrying Retry-After, so the daemon waits."""
        rate = source.rate
        if rate is None or self.rates.wait(source.name, rate, self.max_wait, self.stop) is not None:
            return True
        if not first:
            return False
        wait = self.rates.next_free(source.name)
        raise FetchError(f"rate {rate.text} reached: the next request is allowed in {wait:.0f} s",
                         retry_after=wait)

    def _json_api(self, source: SourceView, etag: str | None, last_modified: str | None,
                  fetched: str) -> tuple[FetchResult, Parsed | None]:
        """Page 1 decides the poll (its error is the source's error, its 304 means nothing new); a
        later page that fails keeps the pages before it and says so in a warning."""
        options = source.api
        assert options is not None, "a json_api source has its options"
        headers = api.request_headers(source)
        url = api.page_url(source, 1) if options.page_param else api.first_page_url(source)
        first: FetchResult | None = None
        records: list[Record] = []
        warnings: list[str] = []
        seen = {url}
        pages = 0
        for page in range(1, options.max_pages + 1):
            if page == 1:
                self._wait_for_rate(source, first=True)
            elif not self._wait_for_rate(source, first=False):
                assert source.rate is not None, "only a rate makes a page wait"
                warnings.append(f"stopped after page {pages}: rate {source.rate.text} allows the next page "
                                "only later; the rest comes with the next poll")
                break
            try:
                result = self.fetcher.get(url, headers=headers, accept=JSON_ACCEPT,
                                          etag=etag if page == 1 else None,
                                          last_modified=last_modified if page == 1 else None)
                if page == 1 and result.not_modified:
                    return result, None
                parsed = parse_body(source, result.body, url=result.url, headers=result.headers, fetched=fetched)
            except (FetchError, ParseError) as exc:
                if page == 1:
                    raise
                warnings.append(f"page {page} ({redact_url(url)}) failed: {exc}; kept the {pages} pages before it")
                break
            first = first or result
            pages += 1
            records.extend(parsed.records)
            warnings.extend(parsed.warnings)
            if not parsed.records or len(records) >= source.max_items:
                break
            next_url = self._next_url(source, page, parsed, warnings)
            if not next_url or next_url in seen:
                break
            url = next_url
            seen.add(url)
        kind = "json_api" if pages == 1 else f"json_api, {pages} pages"
        assert first is not None, "page 1 answered, or its error was raised"
        return first, Parsed(records=newest(records, source.max_items), warnings=warnings, kind=kind)

    @staticmethod
    def _next_url(source: SourceView, page: int, parsed: Parsed, warnings: list[str]) -> str | None:
        options = source.api
        assert options is not None, "a json_api source has its options"
        if options.page_param:
            return api.page_url(source, page + 1)
        if not options.next or not parsed.next_url:
            return None
        target = parsed.next_url
        if not api.same_origin(target, source.url):
            # The token goes with every page: a next link elsewhere would hand it to a stranger.
            warnings.append(f"next page {redact_url(target)} is on another host than the source; not followed")
            return None
        if api.auth_params(source):
            target = api.with_query(target, api.auth_params(source))
        return target
