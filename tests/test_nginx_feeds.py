"""The benches' nginx (bench/nginx_feeds.py): each feed a static file answered with its Content-Type, an ETag
and a Last-Modified, 304 to a conditional request, new validators for a new body even within one second, and
the requests read back from its access log. Skipped when nginx is absent and cannot be installed."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from bench.nginx_feeds import NginxFeeds, find_nginx

RSS = b'<?xml version="1.0"?><rss version="2.0"><channel><title>t</title></channel></rss>'
ATOM = b'<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title></feed>'
JSON = json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "t", "items": []}).encode()

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback only, whatever the environment


def get(url: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with _opener.open(urllib.request.Request(url, headers=headers), timeout=10) as answer:
            return answer.status, dict(answer.headers.items()), answer.read()
    except urllib.error.HTTPError as answer:  # a 304 comes as one
        return answer.code, dict(answer.headers.items()), answer.read()


@pytest.fixture(scope="module")
def binary():
    found = find_nginx()
    if found is None:
        pytest.skip("nginx is absent and could not be installed (apt-get install nginx-light)")
    return found


@pytest.fixture
def feeds(binary):
    served = NginxFeeds(binary, [RSS, ATOM, JSON], repeat=2, hosts=2)
    yield served
    served.stop()


def test_each_feed_is_served_with_its_type_and_validators(feeds):
    assert len(feeds.urls) == 6
    assert feeds.urls[0].startswith("http://127.0.0.1:") and feeds.urls[1].startswith("http://127.0.0.2:")
    types = []
    for n, url in enumerate(feeds.urls):
        status, headers, body = get(url)
        assert status == 200 and body == [RSS, ATOM, JSON][n % 3]
        assert headers["ETag"] and headers["Last-Modified"]
        types.append(headers["Content-Type"])
    assert types == ["application/rss+xml", "application/atom+xml", "application/feed+json"] * 2
    assert get(feeds.urls[0].replace("feed0", "feed99"))[0] == 404


def test_a_conditional_request_is_answered_304_and_counted(feeds):
    before = time.monotonic()
    _, headers, _ = get(feeds.urls[0])
    assert get(feeds.urls[0], **{"If-None-Match": headers["ETag"]})[0] == 304
    assert get(feeds.urls[0], **{"If-Modified-Since": headers["Last-Modified"]})[0] == 304
    assert get(feeds.urls[0], **{"If-None-Match": '"stale"'})[0] == 200
    requests = feeds.requests()
    assert [(r.conditional, r.not_modified) for r in requests] == [(False, False), (True, True), (True, True),
                                                                    (True, False)]
    # when each came, on the clock the bench reads (time.monotonic()), to nginx's millisecond
    assert all(before - 0.01 <= r.arrived <= time.monotonic() + 0.01 for r in requests), (before, requests)


def test_two_new_bodies_within_a_second_each_change_both_validators(feeds):
    _, first, _ = get(feeds.urls[3])
    seen = [(first["ETag"], first["Last-Modified"])]
    for body in (RSS + b"<!-- one -->", RSS + b"<!-- two -->"):  # the same size: only the mtime tells them apart
        feeds.replace(3, body)
        status, headers, served = get(feeds.urls[3], **{"If-None-Match": seen[-1][0],
                                                         "If-Modified-Since": seen[-1][1]})
        assert status == 200 and served == body and feeds.body(3) == body
        seen.append((headers["ETag"], headers["Last-Modified"]))
    assert len({etag for etag, _ in seen}) == 3 and len({modified for _, modified in seen}) == 3
    assert get(feeds.urls[0])[2] == RSS  # feed 0 shared its first file with feed 3: it keeps its own body
