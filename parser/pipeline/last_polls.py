"""What each source's last poll held: every entry's key with a digest of what an edit changes.

A poll reads whole only the entries whose key is not here or whose digest differs (identity first,
parser/pipeline/first_read.py), and an entry already stored whose digest differs is staged again as an
update (parser/pipeline/sink.py; the flush then updates its row). So the steady state costs what it
did before updates existed, and an edit is seen at the next poll, across restarts and `--once` runs.

Held packed: 8 bytes of the key and 8 of the digest per entry, one bytes object per source (10,000
feeds of 50 entries: a tenth of a dict of strings; docs/benchmarks.md). Saved to `known.tsv` in the
staging folder (a line per source: its name, a tab, the hex of its pairs) by an atomic replace, with
the size of the hash file it goes with: a hash file that shrank or went away since (moved away to store
everything again, replaced) makes the saved digests stale, and they are dropped. Losing the file is
safe: a source with no digests has every entry it already stored staged once more, which the flush's
update leaves untouched when nothing changed.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger("parser")
PUSHED_KEPT = 1_000  # a pushed source's latest entries whose digests are kept (merge)
KEY_CHARS = 16  # hex characters of a key kept: a collision within one source's entries is never seen
_HEADER = "# parser known digests v1; hash file bytes: "


def pack(digests: Mapping[str, str]) -> bytes:
    """key -> 16-hex digest, packed (8 bytes of key, 8 of digest each)."""
    return bytes.fromhex("".join(key[:KEY_CHARS] + digest for key, digest in digests.items()))


def unpack(packed: bytes) -> dict[str, str]:
    """pack's inverse, keyed by the first KEY_CHARS hex characters of each key (see short_key)."""
    text = packed.hex()
    return {text[i:i + KEY_CHARS]: text[i + KEY_CHARS:i + 32] for i in range(0, len(text), 32)}


def short_key(key: str) -> str:
    return key[:KEY_CHARS]


class LastPolls:
    """Per source, the packed digests of its last poll; loaded from and saved to `path`."""

    def __init__(self, path: Path | None, hash_file: Path | None = None):
        self.path, self.hash_file = path, hash_file
        self.by_source: dict[str, bytes] = {}
        self.dirty = False
        # Entries were stored before this run, and a source has no digests of them (an upgrade from a version
        # without this file, the file lost or dropped, a source whose last poll a kill cut before the file was
        # saved): its first poll stages its stored entries once more (recheck). A new project has nothing to
        # recheck: an entry another source stored this run is no edit.
        self.recheck = path is not None and self._hash_bytes() > 0
        if path is not None:
            self._load()

    def checks(self, source: str) -> bool:
        """Whether a poll of `source` can tell an edit: its digests are known, or entries were stored before
        this run began (then a source with none has its stored entries staged once more: a recheck). In a
        new project an entry another source stored this run is no edit, and none is staged again."""
        return source in self.by_source or self.recheck

    def get(self, source: str) -> dict[str, str] | None:
        """short key -> digest of the source's last poll; None when nothing is known of it."""
        packed = self.by_source.get(source)
        return None if packed is None else unpack(packed)

    def put(self, source: str, digests: Mapping[str, str]) -> None:
        self.by_source[source] = pack(digests)
        self.dirty = True

    def merge(self, source: str, digests: Mapping[str, str], keep: int = PUSHED_KEPT) -> None:
        """A pushed source's delivery: its entries added to what is known of it (a delivery holds a few
        entries, not the feed), the `keep` latest kept."""
        merged = self.get(source) or {}
        for key, digest in digests.items():
            merged.pop(short_key(key), None)
            merged[short_key(key)] = digest
        kept = list(merged.items())[-keep:]
        self.by_source[source] = bytes.fromhex("".join(k + d for k, d in kept))
        self.dirty = True

    def save(self) -> None:
        """Write the file when something changed (temp file, fsync, replace): old or new, never half."""
        if self.path is None or not self.dirty:
            return
        temp = self.path.with_name(self.path.name + ".tmp")
        with open(temp, "w", encoding="ascii") as f:
            f.write(f"{_HEADER}{self._hash_bytes()}\n")
            for source, packed in self.by_source.items():
                if "\t" not in source and "\n" not in source:
                    f.write(f"{source}\t{packed.hex()}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, self.path)
        self.dirty = False

    def _hash_bytes(self) -> int:
        try:
            return self.hash_file.stat().st_size if self.hash_file is not None else 0
        except FileNotFoundError:
            return 0

    def _load(self) -> bool:
        """Read the file; False when there is none that fits the hash file."""
        assert self.path is not None
        try:
            lines = self.path.read_text(encoding="ascii").splitlines()
        except FileNotFoundError:
            return False
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("%s unreadable (%s): every source's stored entries are checked for edits once", self.path, exc)
            return False
        if not lines or not lines[0].startswith(_HEADER):
            return False
        saved_with = int(lines[0][len(_HEADER):] or 0) if lines[0][len(_HEADER):].isdigit() else -1
        if self.hash_file is not None and self._hash_bytes() < saved_with:
            log.info("%s: the hash file is smaller than when it was saved (replaced or moved away): "
                     "its digests are dropped", self.path.name)
            return False
        for line in lines[1:]:
            source, _, hexed = line.partition("\t")
            try:
                self.by_source[source] = bytes.fromhex(hexed)
            except ValueError:
                continue  # a damaged line: that source's entries are checked once, as after a loss
        return True
