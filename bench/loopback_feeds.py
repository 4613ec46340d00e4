"""The benches' feeds served the old way (`--server python`): one tests.server.LoopbackServer a loopback host,
threads of the bench process itself, which share the machine's cores with the sides being measured."""
from __future__ import annotations

import resource
import time
from email.utils import formatdate

from bench.feed_server import Request, content_type
from tests.server import LoopbackServer, Route


class LoopbackFeeds:
    """Feed n is bodies[n % len(bodies)] at /feed{n}.xml on 127.0.0.{n % hosts + 1}, each with an ETag and a
    Last-Modified, answered 304 when a request carries either (tests/server.py)."""

    def __init__(self, bodies: list[bytes], repeat: int, hosts: int):
        self.servers = [LoopbackServer(host=f"127.0.0.{h + 1}").start() for h in range(hosts)]
        self.pids: tuple[int, ...] = ()
        self.urls: list[str] = []
        self.routes: list[Route] = []
        self._by_path: dict[str, Route] = {}
        self._modified: list[int] = []  # each feed's Last-Modified, whole seconds
        now = int(time.time())
        for n in range(len(bodies) * repeat):
            server, body = self.servers[n % hosts], bodies[n % len(bodies)]
            path = f"/feed{n}.xml"
            route = server.route(path, body=body, content_type=content_type(body), etag=f'"v0-{n}"',
                                 last_modified=formatdate(now, usegmt=True))
            self.routes.append(route)
            self._by_path[path] = route
            self._modified.append(now)
            self.urls.append(server.url(path))
        self._versions = [0] * len(self.routes)
        self._seen = [0] * len(self.servers)  # requests of each server already read
        self._requests: list[Request] = []

    def describe(self) -> str:
        return f"Python threads in the bench process (tests/server.py, one server a host, {len(self.servers)})"

    def body(self, n: int) -> bytes:
        return self.routes[n].body

    def replace(self, n: int, body: bytes) -> None:
        self._read()  # a request's 304 is told from the validators it met: read what came before this change
        route = self.routes[n]
        self._versions[n] += 1
        self._modified[n] = max(int(time.time()), self._modified[n] + 1)
        route.body, route.etag = body, f'"v{self._versions[n]}-{n}"'
        route.last_modified = formatdate(self._modified[n], usegmt=True)

    def requests(self) -> list[Request]:
        self._read()
        return list(self._requests)

    def cpu(self) -> float:
        """The whole bench process's CPU: the serving threads, and the bench's own (its /proc sampler) beside."""
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def _read(self) -> None:
        """The servers' new requests, each told 304 or not as tests/server.py answers: a matching If-None-Match or
        an equal If-Modified-Since."""
        new = []
        for s, server in enumerate(self.servers):
            # Both lists grow under the server's lock, one entry a request: read each up to the shorter.
            times, requests = list(server.times), list(server.requests)
            upto = min(len(times), len(requests))
            for (arrived, path), (_, headers) in zip(times[self._seen[s]:upto], requests[self._seen[s]:upto],
                                                     strict=True):
                names = {k.lower(): v for k, v in headers.items()}
                route = self._by_path.get(path)
                fresh = route is not None and (
                    route.etag is not None and names.get("if-none-match") == route.etag
                    or route.last_modified is not None and names.get("if-modified-since") == route.last_modified)
                conditional = "if-none-match" in names or "if-modified-since" in names
                new.append(Request(arrived, conditional, fresh))
            self._seen[s] = upto
        self._requests.extend(sorted(new))
