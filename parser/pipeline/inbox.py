"""The durable hand-over from the listener threads (webhook deliveries, WebSub pushes) to the main
thread, which alone writes the staging files.

Why a file of its own and not a lock around Sink.stage: the main thread's uniqueness check, staging
CSV, flush and state would all have to take that lock, and a slow flush would then hold back the
answer to a sender. Instead a listener thread appends the accepted records as one JSON line to
inbox.jsonl and fsyncs it BEFORE it answers 2xx, so a kill -9 right after the answer loses nothing;
the main loop drains the inbox into the Sink like any poll's records. The lock here only orders
appends against the drain's rename, and is held for one write.

Draining renames inbox.jsonl to a numbered inbox.draining-*.jsonl (atomic), stages its records,
appends its delivery ids to deliveries.txt, and only then deletes it. A crash in between stages the
same records again on restart, which the uniqueness check and the database's unique hash absorb.
A delivery id is remembered from the moment its line is fsynced (it is in the inbox or in
deliveries.txt at all times), so a repeated delivery is refused across restarts too.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..core import durable
from ..core.record import Record

log = logging.getLogger("parser")
KEEP_DELIVERY_IDS = 200_000  # ids older than this many deliveries are forgotten (senders retry within hours)


class Inbox:
    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "inbox.jsonl"
        self.ids_path = folder / "deliveries.txt"
        self._lock = threading.Lock()
        # A line torn by a crash was never answered 2xx; cut it, or the next line would be glued to it.
        for path in (self.path, self.ids_path):
            durable.repair_tail(path, durable.whole_lines)
        self._seen: set[str] = set(_read_ids(self.ids_path))
        for pending in [*self._draining(), self.path]:
            for entry in _read_entries(pending):
                if entry.get("delivery"):
                    self._seen.add(_key(entry["source"], entry["delivery"]))

    def accept(self, source: str, delivery: str | None, records: Sequence[Record]) -> bool:
        """Durably keep one delivery's records; False (nothing kept) when `delivery` was seen before.

        Raises StorageError when the disk refuses: the sender then gets a 5xx and retries."""
        # ASCII with \u escapes: any text, lone surrogates included, reads back exactly.
        line = json.dumps({"source": source, "delivery": delivery, "records": records}).encode("ascii") + b"\n"
        with self._lock:
            key = _key(source, delivery) if delivery else None
            if key is not None and key in self._seen:
                return False
            _append_durably(self.path, line)
            if key is not None:
                self._seen.add(key)
        return True

    def seen(self, source: str, delivery: str) -> bool:
        with self._lock:
            return _key(source, delivery) in self._seen

    def drain(self, stage: Callable[[str, list[Record]], None]) -> int:
        """Main thread: hand the waiting deliveries' records to stage(source, records), a call per
        source; return how many deliveries.

        A StorageError from stage leaves the file for the next drain."""
        with self._lock:
            if self.path.exists() and self.path.stat().st_size:
                os.replace(self.path, self.path.with_name(f"inbox.draining-{time.time_ns()}.jsonl"))
        count = 0
        for batch in self._draining():
            entries = list(_read_entries(batch))
            by_source: dict[str, list[Record]] = {}  # one staging write per source, not per delivery
            for entry in entries:
                by_source.setdefault(entry["source"], []).extend(entry["records"])
            for source, records in by_source.items():
                stage(source, records)
            count += len(entries)
            ids = [_key(e["source"], e["delivery"]) for e in entries if e.get("delivery")]
            if ids:
                _append_durably(self.ids_path, "".join(f"{i}\n" for i in ids).encode("utf-8", "surrogatepass"))
            os.remove(batch)
        if count:
            self._forget_old_ids()
        return count

    def _draining(self) -> list[Path]:
        return sorted(self.path.parent.glob("inbox.draining-*.jsonl"),
                      key=lambda p: int(p.stem.rsplit("-", 1)[1]))

    def _forget_old_ids(self) -> None:
        """Keep deliveries.txt (and memory) bounded: past twice the limit, keep the newest half."""
        try:
            if self.ids_path.stat().st_size < KEEP_DELIVERY_IDS * 2 * 40:
                return
        except FileNotFoundError:
            return
        ids = _read_ids(self.ids_path)
        if len(ids) <= KEEP_DELIVERY_IDS * 2:
            return
        keep = ids[-KEEP_DELIVERY_IDS:]
        tmp = self.ids_path.with_suffix(".tmp")
        tmp.write_text("".join(f"{i}\n" for i in keep), encoding="utf-8", errors="surrogatepass")
        os.replace(tmp, self.ids_path)
        with self._lock:
            self._seen.difference_update(ids[:-KEEP_DELIVERY_IDS])


def _key(source: str, delivery: str) -> str:
    # Ids are per source (two senders may both number from 1); no newline may split a line.
    return f"{source}\x1f{delivery}".replace("\n", " ").replace("\r", " ")


def _append_durably(path: Path, data: bytes) -> None:
    durable.append(path, data, mode=0o600)


def _read_entries(path: Path):
    """The whole lines of an inbox file; a torn last line (a crash mid-write, never answered 2xx) is skipped."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    for number, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            log.warning("%s line %d is torn or damaged; skipped (its sender was not answered 2xx)",
                        path.name, number)
            continue
        if isinstance(entry, dict) and isinstance(entry.get("records"), list) and isinstance(entry.get("source"), str):
            yield entry


def _read_ids(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="surrogatepass").splitlines()
    except FileNotFoundError:
        return []
