"""Field coverage: per feed and per job, the share of a pass's records that have each field non-empty
(a feed's title, published, content, summary, link, author; each field a job extracts), and a short
history of it, so that a rule that stops matching says so (Spidermon's field coverage is the model).

A pass is a poll of a feed (its records as read, duplicates included: an unchanged feed still shows its
coverage) or a pass 2 of a job (its objects since its last summary). When a field's share falls below
DROP_BELOW of its usual share (the median of its last HISTORY passes), the caller writes one errors.log
line; it is said once, until the share comes back. A pass of fewer than MIN_RECORDS records, or a field
with fewer than MIN_HISTORY passes behind it, never says so: a feed of one entry would cry wolf. Passes
below MIN_RECORDS are shown, not kept in the history.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import median
from typing import Any

FEED_FIELDS = ("title", "published", "content", "summary", "link", "author")
HISTORY = 10        # passes a field's usual share is the median of
MIN_RECORDS = 5     # records a pass needs to count in the history, and to be judged
MIN_HISTORY = 3     # passes in the history before a drop is said
DROP_BELOW = 0.5    # a share below this part of the usual one is a drop


@dataclass(frozen=True)
class Drop:
    """A field whose share fell: `key` is "source/<name>" or "job/<name>"."""
    key: str
    field: str
    share: float
    usual: float
    records: int

    def text(self) -> str:
        """The errors.log line's description: what fell, and what it likely means."""
        said = (f"field coverage: {self.field} in {self.share:.0%} of this pass's {self.records} records, "
                f"usually {self.usual:.0%}")
        if self.key.startswith("job/"):
            return f"{said}: the site changed its markup? check the job's rule for {self.field}"
        return f"{said}: the feed stopped writing {self.field}, or its format changed? look at the feed"


def filled(value: object) -> bool:
    """A field's value counts when it holds something: not None, "" nor [] (a typed 0 counts)."""
    return value is not None and value != "" and value != []


class Coverage:
    """Each source's and job's coverage: its last pass, its history, the fields said low. Main thread only."""

    def __init__(self, kept: Mapping[str, Any] | None = None):
        # Each key's entry is held as its daemon.json line alone (JSON text) and read back at the key's next
        # pass: as dicts, lists and floats it took three times the memory (10,000 feeds: 18.8 MiB, against 4.7).
        self._lines: dict[str, str] = {}
        for key, entry in (kept or {}).items():  # daemon.json's, from the last run: checked, not trusted
            if isinstance(key, str) and isinstance(entry, dict):
                self._lines[key] = json.dumps(_saved_form(_entry_of(entry)))
        self._pending: dict[str, tuple[int, Counter[str]]] = {}

    def count(self, key: str, records: Iterable[Mapping[str, Any]], fields: Iterable[str]) -> None:
        """Records of the pass under way of `key`."""
        made, filled_in = self._pending.get(key, (0, Counter()))
        fields = tuple(fields)
        for record in records:
            made += 1
            filled_in.update(f for f in fields if filled(record.get(f)))
        self._pending[key] = (made, filled_in)

    def passed(self, key: str, records: Iterable[Mapping[str, Any]], fields: Iterable[str]) -> list[Drop]:
        """A pass of `key` made of `records` (a feed's poll): its shares kept; the fields that dropped."""
        self.count(key, records, fields)
        return self.pass_ended(key, fields)

    def pass_ended(self, key: str, fields: Iterable[str]) -> list[Drop]:
        """The pass of `key` counted so far ended: its shares kept; the fields newly fallen below their usual
        share (each said once until it comes back). A pass without records changes nothing."""
        made, filled_in = self._pending.pop(key, (0, Counter()))
        if not made:
            return []
        fields = tuple(fields)
        shares = {f: filled_in[f] / made for f in fields}
        line = self._lines.get(key)
        entry = _entry_of({} if line is None else json.loads(line))
        entry["records"], entry["shares"] = made, shares
        drops = self._judge(key, entry, shares, made) if made >= MIN_RECORDS else []
        entry["history"] = {f: entry["history"].get(f, []) for f in fields}  # a field taken out of the rules: forgotten
        entry["low"] = [f for f in entry["low"] if f in fields]
        self._lines[key] = json.dumps(_saved_form(entry))
        return drops

    def _judge(self, key: str, entry: dict[str, Any], shares: dict[str, float], made: int) -> list[Drop]:
        """A pass of MIN_RECORDS or more: each share against its usual one, then into the history."""
        history: dict[str, list[float]] = entry["history"]
        low: list[str] = entry["low"]
        drops = []
        for f, share in shares.items():
            past = history.get(f, [])
            usual = median(past) if len(past) >= MIN_HISTORY else None
            if usual is not None and share < DROP_BELOW * usual:
                if f not in low:
                    low.append(f)
                    drops.append(Drop(key, f, share, usual, made))
            elif f in low:
                low.remove(f)
            history[f] = [*past, round(share, 2)][-HISTORY:]
        return drops

    def as_json(self) -> dict[str, dict[str, Any]]:
        """What daemon.json keeps: per key, the last pass's records and shares, each field's usual share
        (None: too short a history yet), the fields said low, and the history a restart reads back."""
        return {key: json.loads(line) for key, line in sorted(self._lines.items())}

    def json_lines(self) -> list[tuple[str, str]]:
        """as_json() as (key, its entry in JSON), made once per pass: daemon.json is written far more often
        than a source is polled, a line per source or job, as state.json's sources."""
        return sorted(self._lines.items())


def _saved_form(entry: dict[str, Any]) -> dict[str, Any]:
    """A key's entry as daemon.json has it, made once per pass (the file is written far more often than a
    source is polled)."""
    history: dict[str, list[float]] = entry["history"]
    return {"records": entry["records"], "shares": {f: round(s, 4) for f, s in entry["shares"].items()},
            "usual": {f: round(median(h), 4) if len(h) >= MIN_HISTORY else None for f, h in history.items()},
            "low": list(entry["low"]), "history": {f: list(h) for f, h in history.items()}}


def numbers(value: object) -> dict[str, float]:
    """A dict of shares as daemon.json has it; what is no number (a hand edit) is left out."""
    if not isinstance(value, dict):
        return {}
    return {f: float(s) for f, s in value.items() if isinstance(s, int | float) and not isinstance(s, bool)}


def _entry_of(saved: Mapping[str, Any]) -> dict[str, Any]:
    """A key's entry as kept, from daemon.json's (a hand edit or an older file: what does not fit is dropped)."""
    def past(value: object) -> list[float]:
        if not isinstance(value, list):
            return []
        return [float(s) for s in value if isinstance(s, int | float) and not isinstance(s, bool)][-HISTORY:]

    history = saved.get("history")
    records = saved.get("records")
    low = saved.get("low")
    return {"records": records if isinstance(records, int) else 0, "shares": numbers(saved.get("shares")),
            "history": {f: past(h) for f, h in (history.items() if isinstance(history, dict) else ())},
            "low": [f for f in low if isinstance(f, str)] if isinstance(low, list) else []}
