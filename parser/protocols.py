"""The protocols a source can speak, one row each: whether the daemon polls it or its records are
pushed, how a poll asks and what reads the body, and the source keys it takes.

What differs by protocol is read from this table (the settings checks in source_options.py, the
poll in poll.py, the adapter choice in adapters/__init__.py, the daemon's split into polled and
listened sources, the status view) rather than by testing a protocol's name. A protocol that asks
and reads as an existing one does is a new row here and nothing more; one with a new way of asking
or reading adds that to poll.py or adapters/ and names it in its row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Every per-protocol source key, in the order the settings messages list them.
KEYS = ("protocol", "items", "map", "query_params", "header_params", "auth", "next", "page_param", "max_pages",
        "path", "secret_env", "delivery_header", "hub", "rate", "full_text")
_POLL_KEYS = ("auth", "rate", "full_text")
_JSON_KEYS = ("items", "map")
_PAGE_KEYS = ("query_params", "header_params", "next", "page_param", "max_pages")
_PUSH_KEYS = ("path", "secret_env")


@dataclass(frozen=True)
class Protocol:
    name: str
    short: str                        # its name in the status table and page (6 characters at most)
    polled: bool                      # fetched on the source's interval (a websub source as a fallback)
    pushed: bool                      # records are sent to the listener (parser/push.py)
    body: str                         # "json": JSON read by the source's `items` and `map` (adapters/json_api)
                                      # "feed": RSS/Atom/RDF/JSON Feed, told apart by the body itself
    keys: tuple[str, ...]             # the source keys it takes, besides those every source has
    discovers_feed: bool = False      # a poll that finds an HTML page reads the feed the page links to
    default_path: str | None = None   # pushed: where the listener takes them, "{name}" the source's
                                      # quoted name; None: the source must give `path`
    needs_secret: bool = False        # pushed: deliveries must be signed (secret_env required)
    interval: float | None = None     # its interval when the source sets none; None: POLL_INTERVAL

    @property
    def json_pages(self) -> bool:
        """A poll asks for JSON and may follow pages (next / page_param): a JSON API."""
        return self.polled and self.body == "json"


WEBSUB_FALLBACK_INTERVAL = 6 * 3600.0  # pushes bring the news; the poll only catches what a hub missed

PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (
    Protocol("feed", "feed", polled=True, pushed=False, body="feed", keys=_POLL_KEYS, discovers_feed=True),
    Protocol("json_api", "json", polled=True, pushed=False, body="json", keys=_POLL_KEYS + _JSON_KEYS + _PAGE_KEYS),
    Protocol("webhook", "hook", polled=False, pushed=True, body="json",
             keys=_JSON_KEYS + _PUSH_KEYS + ("delivery_header",), needs_secret=True),
    Protocol("websub", "websub", polled=True, pushed=True, body="feed", keys=_POLL_KEYS + _PUSH_KEYS + ("hub",),
             default_path="/websub/{name}", interval=WEBSUB_FALLBACK_INTERVAL),
)}
DEFAULT = "feed"

# key -> the protocols that take it, in table order (what the settings messages name).
KEY_PROTOCOLS: dict[str, tuple[str, ...]] = {
    key: tuple(p.name for p in PROTOCOLS.values() if key == "protocol" or key in p.keys) for key in KEYS}


def protocol_of(source: Any) -> Protocol:
    """The row of a source (anything with a `protocol` name; without one, a feed)."""
    return PROTOCOLS[getattr(source, "protocol", DEFAULT)]


def polled(sources: list) -> list:
    """The sources the daemon polls (a websub source too: its poll is the fallback for the hub)."""
    return [s for s in sources if protocol_of(s).polled]


def pushed(sources: list) -> list:
    """The sources whose records arrive at the listener."""
    return [s for s in sources if protocol_of(s).pushed]
