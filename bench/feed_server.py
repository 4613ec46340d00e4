"""What the benches ask of the server of their loopback feeds (bench/nginx_feeds.py, bench/loopback_feeds.py),
whichever it is: the bodies, a new version of one, the requests it saw, its CPU."""
from __future__ import annotations

import socket
from typing import NamedTuple, Protocol


class Request(NamedTuple):
    arrived: float       # time.monotonic() of its arrival
    conditional: bool    # it carried If-None-Match or If-Modified-Since
    not_modified: bool   # it was answered 304


class FeedServer(Protocol):
    urls: list[str]        # feed n at /feed{n}.xml on loopback host n % hosts
    pids: tuple[int, ...]  # its processes, left out of a measured side's tree (none: threads of the bench)

    def describe(self) -> str:
        """What serves, in a few words, for the bench's first line."""
        ...

    def body(self, n: int) -> bytes:
        ...

    def replace(self, n: int, body: bytes) -> None:
        """Feed n's body from now on, with an ETag and a Last-Modified of its own (new even within a second)."""
        ...

    def requests(self) -> list[Request]:
        """Every request it has answered since it started, in order."""
        ...

    def cpu(self) -> float:
        """CPU seconds it has spent so far."""
        ...

    def stop(self) -> None:
        ...


def content_type(body: bytes) -> str:
    """What a server would say: JSON Feed as JSON (one benchmark feed is), Atom and RSS as themselves."""
    head = body[:2048].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"{"):
        return "application/feed+json"
    return "application/atom+xml" if b"<feed" in head else "application/rss+xml"


def free_port() -> int:
    """A port on 127.0.0.1 no one listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
