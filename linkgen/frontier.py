"""A queue of links to send, in order, where the links of a host that asked for a pause (Retry-After)
wait apart, by host, until its hold ends: O(1) per link, however many links wait behind a held host.

A link is looked at once when it reaches the front; if its host is held it is parked with that host's
links and not looked at again until the hold has ended, when the host's links go back to the front in
their order. Links can also be pulled lazily from a source (an iterator over a link file), so the
queue never holds more than it must.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from parser.fetch.host_slots import host_key

MAX_PARKED_PER_POP = 10_000  # a pop that meets this many links of held hosts in a row gives up for now


def _same(item: Any) -> str:
    return item


class HostFrontier:
    """Items are URLs, or anything `url_of` turns into one (pass 2 queues (line, URL) pairs)."""

    def __init__(self, held_for: Callable[[str], float], source: Iterator[Any] | None = None, *,
                 url_of: Callable[[Any], str] = _same):
        """held_for(host key) -> seconds the host is still held (0: free)."""
        self.held_for = held_for
        self.url_of = url_of
        self._todo: deque[Any] = deque()
        self._parked: dict[str, deque[Any]] = {}
        self._parked_count = 0
        self._source = source

    def __len__(self) -> int:
        """Links queued or parked (a lazy source's links not pulled yet are not counted)."""
        return len(self._todo) + self._parked_count

    def append(self, item: Any) -> None:
        self._todo.append(item)

    def extend(self, items: Iterable[Any]) -> None:
        self._todo.extend(items)

    def appendleft(self, item: Any) -> None:
        """Back to the front (a link given out and not sent after all)."""
        self._todo.appendleft(item)

    def park(self, item: Any) -> None:
        """Keep `item` back with its host's links until the host's hold ends."""
        self._parked.setdefault(host_key(self.url_of(item)), deque()).append(item)
        self._parked_count += 1

    def parked_hosts(self) -> dict[str, Any]:
        """host key -> its first parked link."""
        return {host: items[0] for host, items in self._parked.items()}

    @property
    def parked_count(self) -> int:
        return self._parked_count

    def pop(self, eligible: Callable[[Any], bool] | None = None) -> Any | None:
        """The next link whose host is free: first the links of hosts whose hold has ended, then the
        rest in order. None when nothing may be sent now, or when the front link is not `eligible`
        (it stays at the front)."""
        self._unpark()
        parked_now = 0
        while True:
            if not self._todo and not self._pull():
                return None
            item = self._todo[0]
            if eligible is not None and not eligible(item):
                return None
            self._todo.popleft()
            host = host_key(self.url_of(item))
            if host in self._parked or self.held_for(host) > 0:
                self.park(item)
                parked_now += 1
                if parked_now >= MAX_PARKED_PER_POP:
                    return None
                continue
            return item

    def front(self, eligible: Callable[[Any], bool] | None = None) -> list[Any]:
        """One link per host that stands first in line now: the first link not on a held host (held
        ones at the front are parked on the way), then the first parked link of each held host."""
        self._unpark()
        parked_now = 0
        while parked_now < MAX_PARKED_PER_POP and (self._todo or self._pull()):
            item = self._todo[0]
            if eligible is not None and not eligible(item):
                break
            host = host_key(self.url_of(item))
            if host not in self._parked and self.held_for(host) <= 0:
                return [item, *(items[0] for items in self._parked.values())]
            self.park(self._todo.popleft())
            parked_now += 1
        return [items[0] for items in self._parked.values()]

    def _unpark(self) -> None:
        for host in [h for h in self._parked if self.held_for(h) <= 0]:
            items = self._parked.pop(host)
            self._parked_count -= len(items)
            self._todo.extendleft(reversed(items))

    def _pull(self) -> bool:
        if self._source is None:
            return False
        for item in self._source:
            self._todo.append(item)
            return True
        self._source = None
        return False
