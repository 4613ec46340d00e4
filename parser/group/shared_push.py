"""SHARED = True for pushed sources: any daemon of the group may receive a webhook delivery or a WebSub
request, so what must hold for the group is in the shared PostgreSQL (SQL in db/coord.py).

- SharedInbox: a delivery id is taken in parser_deliveries (INSERT ... ON CONFLICT DO NOTHING) before
  the delivery is kept in this daemon's durable inbox; a replay to any daemon finds it there and is
  answered as a repeat. Should the inbox refuse the write, the id is given back, so the sender's
  retry is taken. The table keeps the newest KEEP_DELIVERY_IDS ids, as one daemon's deliveries.txt
  does: each daemon prunes it at start and after every PRUNE_EVERY deliveries it took, at a drain
  (the main thread: no sender waits on it).
- SharedWebSub: one subscription per source for the whole group. The secret is the group's (made by
  the first daemon, unless secret_env names one), and so is the callback's token made from it; a daemon
  (re)subscribes only when it claims the source's turn in parser_websub, and the hub and topic it asked
  for, and that a request waits for its verification, are written before the request, so the hub's
  verification may reach any daemon.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from db.coord import PerThread
from db.coord_push import PushTables

from ..core.errors import FetchError, ParseError, StorageError
from ..core.record import Record
from ..pipeline.inbox import KEEP_DELIVERY_IDS, Inbox
from ..push.listener import Reply
from ..push.websub import VERIFY_WAIT, Subscription, WebSub
from ..sources.source_options import PushedSource, push_of

log = logging.getLogger("parser")
PRUNE_EVERY = 10_000  # deliveries this daemon took between two prunings: the table stays near KEEP_DELIVERY_IDS


def _tables(coords: PerThread) -> PushTables:
    return PushTables(coords.get())


class SharedInbox(Inbox):
    def __init__(self, folder: Path, db_url: str):
        super().__init__(folder)
        self.coords = PerThread(db_url)
        _tables(self.coords).create_schema()
        self._taken = 0  # since the last pruning
        self._count_lock = threading.Lock()
        self._prune()

    def accept(self, source: str, delivery: str | None, records: Sequence[Record]) -> bool:
        if delivery is None:
            return super().accept(source, delivery, records)
        coord = _tables(self.coords)
        if not coord.take_delivery(source, delivery):
            return False  # another daemon (or this one) took it: a replay
        with self._count_lock:
            self._taken += 1
        try:
            return super().accept(source, delivery, records)
        except StorageError:
            coord.forget_delivery(source, delivery)
            raise

    def seen(self, source: str, delivery: str) -> bool:
        return super().seen(source, delivery) or _tables(self.coords).delivery_seen(source, delivery)

    def drain(self, stage: Callable[[str, list[Record]], None]) -> int:
        count = super().drain(stage)
        if self._taken >= PRUNE_EVERY:
            self._prune()
        return count

    def _prune(self) -> None:
        with self._count_lock:
            self._taken = 0
        try:
            forgotten = _tables(self.coords).prune_deliveries(KEEP_DELIVERY_IDS)
        except StorageError as exc:  # tried again after the next PRUNE_EVERY deliveries
            log.warning("parser_deliveries not pruned: %s", exc)
            return
        if forgotten:
            log.info("parser_deliveries: %d older delivery ids forgotten (the newest %d kept)", forgotten,
                     KEEP_DELIVERY_IDS)

    def close(self) -> None:
        self.coords.close()


class SharedWebSub(WebSub):
    def __init__(self, sources: Sequence[PushedSource], *, db_url: str, **kwargs: Any):
        super().__init__(sources, **kwargs)
        self.coords = PerThread(db_url)
        coord = _tables(self.coords)
        coord.create_schema()
        for sub in self.subscriptions.values():
            if not push_of(sub.source).secret():  # a secret of our own making: the group's, the first one's
                sub.secret = coord.websub_secret(sub.source.name, sub.secret.decode("ascii")).encode("ascii")

    def close(self) -> None:
        super().close()
        self.coords.close()

    def _subscribe(self, sub: Subscription) -> None:
        name = sub.source.name
        try:
            coord = _tables(self.coords)
            if not coord.claim_websub(name, VERIFY_WAIT):
                # Another daemon subscribed (or is subscribing): look again when the next turn is due.
                hub, topic, due_in = coord.websub_row(name) or (None, None, VERIFY_WAIT)
                with self._lock:
                    sub.hub, sub.topic = hub or sub.hub, topic or sub.topic
                    sub.next_action = self.clock() + max(due_in, 1.0)
                return
            if not sub.hub or not sub.topic:
                sub.hub, sub.topic = self._discover(sub)
            coord.websub_requested(name, sub.hub, sub.topic)  # before the request: any daemon may verify
        except (FetchError, ParseError, StorageError) as exc:
            self._failed(sub, str(exc))
            return
        super()._subscribe(sub)

    def verify(self, sub: Subscription, query) -> Reply:
        if not sub.topic:  # requested by another daemon of the group
            try:
                row = _tables(self.coords).websub_row(sub.source.name)
            except StorageError:
                row = None
            if row is not None and row[1]:
                with self._lock:
                    sub.hub, sub.topic = row[0] or sub.hub, row[1]
        reply = super().verify(sub, query)
        if reply.status == 200 and sub.state == "active":
            try:
                _tables(self.coords).websub_verified(sub.source.name, sub.lease, sub.next_action - self.clock())
            except StorageError:
                pass  # another daemon may subscribe again at VERIFY_WAIT: a renewal, not a second one
        return reply

    def _waiting(self, sub: Subscription) -> bool:
        """This daemon's request, or another's of the group, waits for its verification."""
        if super()._waiting(sub):
            return True
        try:
            return _tables(self.coords).websub_waiting(sub.source.name)
        except StorageError:
            return False  # not answered now: the hub retries its verification, or the request is made again
