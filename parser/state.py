"""What the daemon remembers about each source between polls and across restarts:
validators for conditional GET, failures in a row, and when it may poll next.

Saved atomically (write a temp file, rename). It is saved only after the records of a poll are
staged, so a kill can lose an ETag (one unconditional fetch more) but never records.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class SourceState:
    etag: str | None = None
    last_modified: str | None = None
    failures: int = 0          # failures in a row; reset by any success
    next_due: float = 0.0      # epoch seconds; 0 = at once
    not_before: float = 0.0    # a server's Retry-After: honoured even by --once
    last_outcome: str = ""
    url: str = ""              # validators belong to this address; a changed url drops them
    # Where the source is polled instead of `url` (address(), below): a permanent redirect (301/308)
    # seen on two polls in a row, and a feed found on the HTML page that `url` is.
    moved_to: str = ""
    redirect_seen: str = ""    # the last poll's permanent redirect, not yet seen twice
    feed_url: str = ""         # found in the page's <link rel="alternate">; polled from then on

    def address(self) -> str:
        """Where the next poll goes."""
        return self.feed_url or self.moved_to or self.url


def load_states(path: Path) -> dict[str, SourceState]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError:
        return {}  # a damaged state file costs one unconditional poll per source, nothing more
    fields = SourceState.__dataclass_fields__
    return {name: SourceState(**{k: v for k, v in data.items() if k in fields})
            for name, data in raw.items() if isinstance(data, dict)}


def save_states(path: Path, states: dict[str, SourceState]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({k: asdict(v) for k, v in states.items()}, indent=1, sort_keys=True),
                   encoding="utf-8")
    os.replace(tmp, path)
