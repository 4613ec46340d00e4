"""WebSub with the real daemon and a hub stub on 127.0.0.1: discovery of the hub in the feed, the
intent-verification challenge, lease renewal, a signed push that becomes rows, a forged push that
does not, and the feed polled only at the long fallback interval."""
from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from urllib.parse import parse_qs
from xml.sax.saxutils import escape, quoteattr

import requests

from tests.process import free_port, start_listening, stop, wait_for
from tests.server import reply


def atom(entries: list[int], *, hub: str = "", self_url: str = "") -> bytes:
    links = (f"<link rel=\"hub\" href={quoteattr(hub)}/>" if hub else "") + \
            (f"<link rel=\"self\" href={quoteattr(self_url)}/>" if self_url else "")
    body = "".join(f"<entry><id>urn:entry:{n}</id><title>Entry {n}</title>"
                   f"<link href=\"https://blog.example/{n}\"/><updated>2026-11-01T12:{n:02d}:00Z</updated>"
                   f"<summary>{escape(f'Summary {n}')}</summary></entry>" for n in entries)
    return (f'<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
            f"<title>Blog</title><id>urn:blog</id><updated>2026-11-01T12:00:00Z</updated>{links}{body}</feed>"
            ).encode()


class HubStub:
    """Takes subscription requests, verifies intent at the callback as a hub does (first with a topic
    the subscriber never asked for, which must be refused), then pushes one signed and one forged body."""

    def __init__(self):
        self.requests: list[dict[str, str]] = []
        self.challenges_echoed: list[bool] = []
        self.foreign_topic_status: list[int] = []
        self.push_status: list[int] = []
        self.lock = threading.Lock()

    def handle(self, h) -> None:
        form = {k: v[0] for k, v in parse_qs(h.rfile.read(int(h.headers["Content-Length"])).decode()).items()}
        with self.lock:
            self.requests.append(form)
            first = len(self.requests) == 1
        reply(h, 202)
        threading.Thread(target=self._verify_then_push, args=(form, first), daemon=True).start()

    def _verify_then_push(self, form: dict[str, str], first: bool) -> None:
        callback = form["hub.callback"]
        foreign = requests.get(callback, params={"hub.mode": "subscribe", "hub.topic": "https://other.example/x",
                                                 "hub.challenge": "nope", "hub.lease_seconds": "2"}, timeout=10)
        challenge = secrets.token_urlsafe(16)
        answer = requests.get(callback, params={"hub.mode": "subscribe", "hub.topic": form["hub.topic"],
                                                "hub.challenge": challenge, "hub.lease_seconds": "2"}, timeout=10)
        with self.lock:
            self.foreign_topic_status.append(foreign.status_code)
            self.challenges_echoed.append(answer.status_code == 200 and answer.text == challenge)
        if not first:
            return
        secret = form["hub.secret"].encode()
        for body, key in ((atom([3]), secret), (atom([99]), b"not the secret")):
            signature = "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()
            pushed = requests.post(callback, data=body, timeout=10,
                                   headers={"Content-Type": "application/atom+xml", "X-Hub-Signature": signature})
            with self.lock:
                self.push_status.append(pushed.status_code)


def test_subscribe_verify_renew_and_take_a_signed_push(server, project):
    hub = HubStub()
    feed_url = server.url("/feed.xml")
    server.route("/feed.xml", body=atom([1, 2], hub=server.url("/hub"), self_url=feed_url),
                 content_type="application/atom+xml")
    server.route("/hub", handler=hub.handle)
    port = free_port()
    project.write_params(SOURCES=[{"name": "blog", "protocol": "websub", "url": feed_url}],
                         WEBHOOK_LISTEN=f"127.0.0.1:{port}", POLL_INTERVAL=1)
    daemon = start_listening(project)
    try:
        # The hub grants 2 s leases: a second request is the renewal before expiry.
        wait_for(lambda: len(hub.challenges_echoed) >= 2 and len(hub.push_status) == 2
                 and "blog  new 2" in project.log(), "the first poll, a renewal and two pushes")
    finally:
        assert stop(daemon) == 0
    first = hub.requests[0]
    assert first["hub.mode"] == "subscribe" and first["hub.topic"] == feed_url
    assert first["hub.callback"].startswith(f"http://127.0.0.1:{port}/websub/blog?token=")
    assert len(first["hub.secret"]) >= 32
    assert all(hub.challenges_echoed) and set(hub.foreign_topic_status) == {404}
    assert hub.push_status == [202, 202]  # a forged push is acknowledged, as the spec says, and dropped
    assert sorted(r["title"] for r in project.rows()) == ["Entry 1", "Entry 2", "Entry 3"]
    assert "X-Hub-Signature does not match our secret" in project.log("errors.log")
    assert "lease 2 s" in project.log()
    # POLL_INTERVAL is 1 s, but a websub source is polled at its long fallback interval: once at start,
    # plus the subscriber's discovery of the hub.
    assert server.hits["/feed.xml"] <= 2


def test_a_feed_without_a_hub_is_polled_and_the_error_says_so(server, project):
    server.route("/plain.xml", body=atom([1]), content_type="application/atom+xml")
    project.write_params(SOURCES=[{"name": "plain", "protocol": "websub", "url": server.url("/plain.xml")}],
                         WEBHOOK_LISTEN=f"127.0.0.1:{free_port()}")
    daemon = start_listening(project)
    try:
        wait_for(lambda: "WebSub subscription failed" in project.log("errors.log") and "plain  new 1" in project.log(),
                 "the subscription error and the first poll")
    finally:
        assert stop(daemon) == 0
    assert [r["title"] for r in project.rows()] == ["Entry 1"]
    assert 'names no WebSub hub (no rel="hub" link)' in project.log("errors.log")


# A forged WebSub verification: anyone can send `GET /websub/NAME?hub.mode=subscribe&hub.topic=<the feed>
# &hub.challenge=x&hub.lease_seconds=999999999`. Answered, it is taken as a lease: renewals stop and the real
# hub's lease lapses. Only a verification the daemon waits for is answered (the callback's token, the topic
# it asked for, a request unverified), its lease capped to what was asked; the rest is refused and logged.
FOREVER = "999999999"


class GreedyHub:
    """Verifies each request with a lease far longer than asked, as a careless or hostile hub might."""

    def __init__(self):
        self.forms: list[dict[str, str]] = []
        self.answers: list[tuple[int, str]] = []
        self.lock = threading.Lock()

    def handle(self, h) -> None:
        form = {k: v[0] for k, v in parse_qs(h.rfile.read(int(h.headers["Content-Length"])).decode()).items()}
        reply(h, 202)
        threading.Thread(target=self._verify, args=(form,), daemon=True).start()

    def _verify(self, form: dict[str, str]) -> None:
        answer = requests.get(form["hub.callback"], timeout=10, params={
            "hub.mode": "subscribe", "hub.topic": form["hub.topic"], "hub.challenge": "real-challenge",
            "hub.lease_seconds": FOREVER})
        with self.lock:
            self.forms.append(form)
            self.answers.append((answer.status_code, answer.text))


def test_forged_verifications_are_refused_and_the_lease_is_capped(server, project):
    hub = GreedyHub()
    feed_url = server.url("/feed.xml")
    server.route("/feed.xml", body=atom([1], hub=server.url("/hub"), self_url=feed_url),
                 content_type="application/atom+xml")
    server.route("/hub", handler=hub.handle)
    port = free_port()
    callback = f"http://127.0.0.1:{port}/websub/blog"
    project.write_params(SOURCES=[{"name": "blog", "protocol": "websub", "url": feed_url}],
                         WEBHOOK_LISTEN=f"127.0.0.1:{port}")
    daemon = start_listening(project)
    try:
        wait_for(lambda: hub.answers and "WebSub subscription verified" in project.log(), "the hub's verification")
        assert hub.answers == [(200, "real-challenge")]
        assert "lease 864000 s" in project.log()  # capped to the 10 days asked for, not 31 years

        def forged(**params) -> requests.Response:
            return requests.get(callback, params=params, timeout=10)

        # A stranger who knows the feed and the listener's address, but not the callback the hub was given.
        stranger = forged(**{"hub.mode": "subscribe", "hub.topic": feed_url, "hub.challenge": "x",
                             "hub.lease_seconds": FOREVER})
        denial = forged(**{"hub.mode": "denied", "hub.topic": feed_url, "hub.reason": "forged"})
        denial_no_topic = forged(**{"hub.mode": "denied"})
        # The hub's own callback (its token), when no request of ours waits: not answered either.
        token = parse_qs(hub.forms[0]["hub.callback"].split("?", 1)[1])["token"][0]
        unasked = forged(token=token, **{"hub.mode": "subscribe", "hub.topic": feed_url, "hub.challenge": "y",
                                         "hub.lease_seconds": "60"})
        other_topic = forged(token=token, **{"hub.mode": "denied", "hub.topic": "https://other.example/feed"})
        wait_for(lambda: project.log("errors.log").count("WebSub verification refused (404)") >= 5,
                 "five refusals in errors.log")
    finally:
        assert stop(daemon) == 0
    assert [r.status_code for r in (stranger, denial, denial_no_topic, unasked, other_topic)] == [404] * 5
    assert "x" not in stranger.text and "y" not in unasked.text
    errors = project.log("errors.log")
    assert errors.count("the callback's token is missing or wrong") == 3
    assert "no subscription request of ours is waiting for its verification" in errors
    assert "not the topic we asked for" in errors
    assert "denied the subscription" not in errors  # the forged denials changed nothing
    assert project.log().count("WebSub subscription verified") == 1
    assert "WebSub lease of 999999999 s capped to the 864000 s asked for" in project.log()
