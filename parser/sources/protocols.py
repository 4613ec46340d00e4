"""The protocols a source can speak, one row each: whether the daemon polls it or its records are
pushed, how a poll asks and what reads the body, and the source keys it takes.

What differs by protocol is read from this table (the settings checks in source_options.py, the
poll in poll.py, the adapter choice in adapters/__init__.py by `body`, the daemon's split into polled
and listened sources, the listener's endpoints in push/endpoints.py, export-opml, the status view), never by
testing a protocol's name: no other module compares one (tests/test_protocols.py holds it). A
protocol that asks and reads as an existing one does is a new row here and nothing more; one with a
new way of asking or reading adds that to poll.py or adapters/ and names it in its row.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol as Interface
from typing import TypeVar

# Every per-protocol source key, in the order the settings messages list them.
KEYS = ("protocol", "items", "map", "query_params", "header_params", "auth", "next", "page_param", "max_pages",
        "path", "secret_env", "delivery_header", "hub", "rate", "full_text", "full_text_internal")
_POLL_KEYS = ("auth", "rate", "full_text", "full_text_internal")
_JSON_KEYS = ("items", "map")
_PAGE_KEYS = ("query_params", "header_params", "next", "page_param", "max_pages")
_PUSH_KEYS = ("path", "secret_env")


@dataclass(frozen=True)
class Protocol:
    name: str
    short: str                        # its name in the status table and page (6 characters at most)
    polled: bool                      # fetched on the source's interval (a websub source as a fallback)
    pushed: bool                      # records are sent to the listener (parser/push/endpoints.py)
    body: str                         # "json": JSON read by the source's `items` and `map` (adapters/json_api)
                                      # "feed": RSS/Atom/RDF/JSON Feed, told apart by the body itself
    keys: tuple[str, ...]             # the source keys it takes, besides those every source has
    discovers_feed: bool = False      # a poll that finds an HTML page reads the feed the page links to
    default_path: str | None = None   # pushed: where the listener takes them, "{name}" the source's
                                      # quoted name; None: the source must give `path`
    needs_secret: bool = False        # pushed: deliveries must be signed (secret_env required)
    subscribed: bool = False          # pushed by a hub we subscribe to (a WebSub callback, parser/push/websub.py);
                                      # False: senders post to the source's path (parser/push/webhook.py)
    in_opml: bool = False             # export-opml lists it: a plain feed any reader can poll
    interval: float | None = None     # its interval when the source sets none; None: POLL_INTERVAL

    @property
    def json_pages(self) -> bool:
        """A poll asks for JSON and may follow pages (next / page_param): a JSON API."""
        return self.polled and self.body == "json"


WEBSUB_FALLBACK_INTERVAL = 6 * 3600.0  # pushes bring the news; the poll only catches what a hub missed

PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (
    Protocol("feed", "feed", polled=True, pushed=False, body="feed", keys=_POLL_KEYS, discovers_feed=True,
             in_opml=True),
    Protocol("json_api", "json", polled=True, pushed=False, body="json", keys=_POLL_KEYS + _JSON_KEYS + _PAGE_KEYS),
    Protocol("webhook", "hook", polled=False, pushed=True, body="json",
             keys=_JSON_KEYS + _PUSH_KEYS + ("delivery_header",), needs_secret=True),
    Protocol("websub", "websub", polled=True, pushed=True, body="feed", keys=_POLL_KEYS + _PUSH_KEYS + ("hub",),
             default_path="/websub/{name}", interval=WEBSUB_FALLBACK_INTERVAL, subscribed=True),
)}
DEFAULT = "feed"

# key -> the protocols that take it, in table order (what the settings messages name).
KEY_PROTOCOLS: dict[str, tuple[str, ...]] = {
    key: tuple(p.name for p in PROTOCOLS.values() if key == "protocol" or key in p.keys) for key in KEYS}


class Speaking(Interface):
    """Anything that names its protocol (a Source, a SourceView)."""

    @property
    def protocol(self) -> str: ...


Named = TypeVar("Named", bound=Speaking)


def protocol_of(source: Speaking) -> Protocol:
    """The row of a source."""
    return PROTOCOLS[source.protocol]


def polled(sources: Sequence[Named]) -> list[Named]:
    """The sources the daemon polls (a websub source too: its poll is the fallback for the hub)."""
    return [s for s in sources if protocol_of(s).polled]


def pushed(sources: Sequence[Named]) -> list[Named]:
    """The sources whose records arrive at the listener."""
    return [s for s in sources if protocol_of(s).pushed]


def opml_sources(sources: Sequence[Named]) -> list[Named]:
    """The sources export-opml writes."""
    return [s for s in sources if protocol_of(s).in_opml]
