"""WebSub (W3C Recommendation): subscribe to a feed's hub, answer the hub's verification of intent,
renew the lease before it runs out, and take the feed bodies the hub pushes to our callback.

The hub is the source's `hub` key, or is discovered from the feed: an HTTP `Link: <...>; rel="hub"`
header, an `<atom:link rel="hub">` in RSS or Atom, or a JSON Feed's `hubs`. The topic is the feed's
rel="self" address (what the hub knows it by), else the source's url. Pushes must carry an HMAC of
the body made with the secret we gave the hub (X-Hub-Signature `sha256=...`, or sha1/sha384/sha512
as the spec allows; X-Hub-Signature-256 too). The secret is the source's `secret_env`, or a random
one per run, since every start subscribes again. Pushed bodies are parsed by the feed adapter and
handed to the main loop through the durable inbox, like webhook deliveries. The daemon keeps
polling the feed at the source's (long) interval, in case the hub misses something.

One thread runs subscriptions and renewals; verification and pushes arrive through the shared listener
(parser/push/listener.py) and its limits; a push without any signature header is acknowledged and dropped
before its body is read.

The verification GET is unauthenticated, and answering it is taking a lease: so only one the daemon is
waiting for is answered. The callback given to the hub carries a token made from the secret
(`?token=...`), which only the hub learns; the topic must be the one asked for; a subscribe must come
while a request of ours is unverified; its lease is capped to the lease asked for. Anything else gets
404 and an errors.log line (a flood: a line a minute, see RefusalLog). A denial needs the token and the
topic too, at any time (a hub may end a subscription it granted).
"""
from __future__ import annotations

import hashlib
import hmac
import io
import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from email.message import Message
from urllib.parse import urljoin

import feedparser
from requests.utils import parse_header_links

from ..adapters import looks_like_json
from ..adapters.json_api import request_headers
from ..core import logs
from ..core.errors import FetchError, ParseError
from ..core.urls import canonical_url, redact_url
from ..fetch.http import Fetcher
from ..pipeline.inbox import Inbox
from ..sources.source_options import PushedSource, push_of
from .delivery import Arrival, Desk, take
from .listener import RefusalLog, Reply, signature_matches

log = logging.getLogger("parser")
REQUESTED_LEASE = 10 * 86400       # what we ask for; the hub decides
DEFAULT_LEASE = 86400              # assumed when a hub's verification names none
VERIFY_WAIT = 300.0                # a request the hub has not verified by then is made again
RETRY_AFTER = (60.0, 300.0, 900.0, 3600.0)  # after failed attempts in a row
SIGNATURE_HEADERS = ("X-Hub-Signature", "X-Hub-Signature-256")


@dataclass
class Subscription:
    source: PushedSource
    callback: str                  # the callback's address, for logs; the hub is given callback_url()
    secret: bytes
    hub: str = ""
    topic: str = ""
    state: str = "new"             # new, requested, active, failed, denied
    lease: float = 0.0
    expires: float = 0.0
    next_action: float = 0.0       # when the subscriber thread should (re)subscribe
    failures: int = 0

    def token(self) -> str:
        """The callback's token: made from the secret, so it is the group's with SHARED (the secret is),
        and the same across restarts when secret_env names the secret (the hub's subscription stays one)."""
        return hmac.new(self.secret, b"websub callback " + self.callback.encode("utf-8"),
                        hashlib.sha256).hexdigest()[:32]

    def callback_url(self) -> str:
        return f"{self.callback}?token={self.token()}"


def renew_at(now: float, lease: float) -> float:
    """Renew when three quarters of the lease have passed: early enough for a slow hub or a retry."""
    return now + max(lease * 0.75, 1.0)


class WebSub:
    def __init__(self, sources: Sequence[PushedSource], *, fetcher: Fetcher, inbox: Inbox, callback_base: str,
                 stop: threading.Event, refusals: RefusalLog | None = None, clock: Callable[[], float] = time.time):
        self.fetcher = fetcher
        self.refusals = refusals or RefusalLog()
        self.inbox = inbox
        self.stop = stop
        self.clock = clock
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._wake = threading.Event()  # a verification moved a renewal time: recompute the sleep
        self._thread: threading.Thread | None = None
        self.subscriptions = {
            s.name: Subscription(source=s, callback=callback_base.rstrip("/") + push_of(s).path,
                                 secret=push_of(s).secret() or secrets.token_hex(32).encode("ascii"),
                                 hub=push_of(s).hub)
            for s in sources}

    # -- life cycle -----------------------------------------------------------------------------
    def endpoints(self) -> dict[str, CallbackEndpoint]:
        return {push_of(sub.source).path: CallbackEndpoint(self, sub) for sub in self.subscriptions.values()}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="websub", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._closing.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not (self._closing.is_set() or self.stop.is_set()):
            now = self.clock()
            for sub in self.subscriptions.values():
                with self._lock:  # due: new, a renewal, a retry, or a request the hub never verified
                    due = sub.next_action <= now
                if due and not self._closing.is_set():
                    self._subscribe(sub)
            with self._lock:
                soonest = min(s.next_action for s in self.subscriptions.values())
            self._wake.wait(min(max(soonest - self.clock(), 0.2), 30.0))
            self._wake.clear()

    # -- subscribing ----------------------------------------------------------------------------
    def _subscribe(self, sub: Subscription) -> None:
        name = sub.source.name
        try:
            if not sub.hub or not sub.topic:
                sub.hub, sub.topic = self._discover(sub)
            with self._lock:
                sub.state, sub.next_action = "requested", self.clock() + VERIFY_WAIT
            form = {"hub.mode": "subscribe", "hub.topic": sub.topic, "hub.callback": sub.callback_url(),
                    "hub.secret": sub.secret.decode("utf-8"), "hub.lease_seconds": str(REQUESTED_LEASE)}
            result = self.fetcher.post_form(sub.hub, form)
        except (FetchError, ParseError) as exc:
            self._failed(sub, str(exc))
            return
        log.info("%s  subscription requested at hub %s (HTTP %d); waiting for its verification", name,
                 redact_url(sub.hub), result.status)

    def _discover(self, sub: Subscription) -> tuple[str, str]:
        """(hub, topic) from the source's `hub` key, or from the feed's Link header and body."""
        source = sub.source
        if sub.hub:
            return sub.hub, sub.topic or source.url
        result = self.fetcher.get(source.url, headers=request_headers(source))
        hub, topic = discover_links(result.body, result.headers, result.url)
        if not hub:
            raise ParseError('the feed names no WebSub hub (no rel="hub" link); it is only polled, every '
                             f'{source.interval:g} s: set "hub", or use protocol "feed" for frequent polls')
        return hub, topic or source.url

    def _failed(self, sub: Subscription, why: str) -> None:
        with self._lock:
            sub.failures += 1
            wait = RETRY_AFTER[min(sub.failures, len(RETRY_AFTER)) - 1]
            sub.state, sub.next_action = "failed", self.clock() + wait
            sub.hub = push_of(sub.source).hub  # rediscover next time: the feed may name another hub
        logs.error_line(sub.source.name, sub.source.url, f"WebSub subscription failed: {why}; "
                        f"trying again in {wait:g} s")

    # -- the hub's requests (listener threads) ----------------------------------------------------
    def verify(self, sub: Subscription, query: Mapping[str, list[str]]) -> Reply:
        """The hub checks that we asked: echo hub.challenge only for a verification we are waiting for
        (see the module's docstring); refuse anything else with 404 and an errors.log line."""
        def one(key: str) -> str:
            return (query.get(key) or [""])[0]

        mode, topic, challenge = one("hub.mode"), one("hub.topic"), one("hub.challenge")
        name = sub.source.name
        why = self._unexpected(sub, mode, topic, challenge, one("token"))
        if why:
            self.refusals.note(name, sub.callback, "404", f"WebSub verification refused (404): "
                               f"hub.mode={mode[:20]!r}, hub.topic={redact_url(topic[:200])!r}: {why}")
            return Reply(404, "not requested\n")
        if mode == "denied":
            with self._lock:
                sub.state, sub.next_action = "denied", self.clock() + RETRY_AFTER[-1]
            logs.error_line(name, sub.source.url, f"WebSub hub denied the subscription: "
                            f"{one('hub.reason')[:200] or 'no reason given'}; asking again in {RETRY_AFTER[-1]:g} s")
            return Reply(200, "ok\n")
        lease_text = one("hub.lease_seconds")
        lease = float(lease_text) if lease_text.isdigit() and int(lease_text) > 0 else DEFAULT_LEASE
        if lease > REQUESTED_LEASE:  # a longer lease than asked would stop the renewals past the real one's end
            log.info("%s  WebSub lease of %s s capped to the %d s asked for", name, lease_text[:20], REQUESTED_LEASE)
            lease = float(REQUESTED_LEASE)
        with self._lock:
            now = self.clock()
            sub.state, sub.lease, sub.expires = "active", lease, now + lease
            sub.next_action, sub.failures = renew_at(now, lease), 0
        self._wake.set()
        log.info("%s  WebSub subscription verified by the hub: lease %g s, renewed in %g s", name, lease,
                 sub.next_action - now)
        return Reply(200, challenge)

    def _unexpected(self, sub: Subscription, mode: str, topic: str, challenge: str, token: str) -> str:
        """Why a verification is not one we wait for ('' when it is)."""
        if not hmac.compare_digest(token.encode("utf-8", "replace"), sub.token().encode("ascii")):
            return "the callback's token is missing or wrong (not the address we gave the hub)"
        if mode not in ("subscribe", "denied"):  # we never unsubscribe: such a request is someone else's
            return "not a mode we ask for"
        if not _same_topic(topic, sub.topic):
            return f"not the topic we asked for ({redact_url(sub.topic) or 'none yet'})"
        if mode == "subscribe" and not challenge:
            return "no hub.challenge"
        if mode == "subscribe" and not self._waiting(sub):
            return "no subscription request of ours is waiting for its verification"
        return ""

    def _waiting(self, sub: Subscription) -> bool:
        """A request of ours is unverified (sent, or being sent: a hub may verify before it answers)."""
        with self._lock:
            return sub.state == "requested"

    def receive(self, sub: Subscription, headers: Message, body: bytes, peer: str) -> Reply:
        """A push: the new entries of the topic, signed with our secret."""
        name = sub.source.name
        signature = next((headers.get(h) for h in SIGNATURE_HEADERS if headers.get(h)), None)
        if not signature_matches(sub.secret, body, signature):
            why = "no X-Hub-Signature" if not signature else "X-Hub-Signature does not match our secret"
            return self.ignored(sub, peer, why)
        arrival = Arrival(headers.get("Content-Type") or "", sub.callback, None, "WebSub push", peer,
                          base=sub.topic or sub.source.url)
        taken = take(sub.source, body, arrival, Desk(self.inbox, self.refusals, self.clock))
        if taken.refusal is not None:
            return taken.refusal
        parsed = taken.parsed
        if parsed is not None:  # taken (a push has no delivery id, so it is never one seen before)
            log.info("%s  WebSub push: %d records received (%s)", name, len(parsed.records), parsed.kind)
        return Reply(202, "accepted\n")

    def ignored(self, sub: Subscription, peer: str, why: str) -> Reply:
        # The spec: acknowledge with a 2xx anyway (a forger learns nothing), and ignore the body.
        self.refusals.note(sub.source.name, sub.callback, "ignored", f"WebSub push from {peer} ignored: {why}")
        return Reply(202, "ignored\n")


class CallbackEndpoint:
    """The listener's view of one subscription's callback: GET verifies, POST pushes."""
    methods: tuple[str, ...] = ("GET", "POST")

    def __init__(self, websub: WebSub, sub: Subscription):
        self.websub = websub
        self.sub = sub
        self.name = sub.source.name
        self.url = sub.callback

    def precheck(self, method: str, headers: Message, peer: str) -> Reply | None:
        """A push with no signature header at all is acknowledged and dropped without reading its body."""
        if method == "POST" and not any(headers.get(h) for h in SIGNATURE_HEADERS):
            return self.websub.ignored(self.sub, peer, "no X-Hub-Signature")
        return None

    def handle(self, method: str, query: Mapping[str, list[str]], headers: Message, body: bytes,
               peer: str) -> Reply:
        if method == "GET":
            return self.websub.verify(self.sub, query)
        return self.websub.receive(self.sub, headers, body, peer)

    def too_large(self, length: int, limit: int, peer: str) -> None:
        self.websub.refusals.note(self.name, self.url, "413", f"WebSub push from {peer} refused (413): "
                                  f"{length} bytes is over MAX_BYTES ({limit})")


def discover_links(body: bytes, headers: Mapping[str, str], url: str) -> tuple[str, str]:
    """(hub, self) URLs from a Link header first (the spec's order), then the document; '' when absent."""
    hub = topic = ""
    for link in parse_header_links(headers.get("link", "")) if headers.get("link") else []:
        rels = (link.get("rel") or "").split()
        if "hub" in rels and not hub:
            hub = urljoin(url, link.get("url", ""))
        if "self" in rels and not topic:
            topic = urljoin(url, link.get("url", ""))
    if hub and topic:
        return hub, topic
    if looks_like_json(body, headers):
        import json
        try:
            document = json.loads(body)
        except ValueError:
            document = {}
        hubs = document.get("hubs") if isinstance(document, dict) else None
        for entry in hubs if isinstance(hubs, list) else []:
            if isinstance(entry, dict) and str(entry.get("type", "")).lower() == "websub" and entry.get("url"):
                hub = hub or urljoin(url, str(entry["url"]))
        if isinstance(document, dict) and isinstance(document.get("feed_url"), str):
            topic = topic or document["feed_url"]
        return hub, topic
    feed = feedparser.parse(io.BytesIO(body), response_headers={"content-location": url})
    for link in feed.get("feed", {}).get("links", []):
        if link.get("rel") == "hub" and not hub:
            hub = urljoin(url, link.get("href", ""))
        elif link.get("rel") == "self" and not topic:
            topic = urljoin(url, link.get("href", ""))
    return hub, topic


def _same_topic(a: str, b: str) -> bool:
    return bool(a) and (a == b or canonical_url(a) == canonical_url(b))
