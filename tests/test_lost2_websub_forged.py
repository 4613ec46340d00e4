"""A forged WebSub verification: anyone can send `GET /websub/NAME?hub.mode=subscribe&hub.topic=<the feed>
&hub.challenge=x&hub.lease_seconds=999999999`. Answered, it is taken as a lease: renewals stop and the real
hub's lease lapses. Only a verification the daemon waits for is answered (the callback's token, the topic
it asked for, a request unverified), its lease capped to what was asked; the rest is refused and logged."""
from __future__ import annotations

import threading
from urllib.parse import parse_qs

import requests

from tests.process import free_port, start_listening, stop, wait_for
from tests.server import reply
from tests.test_websub import atom

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
