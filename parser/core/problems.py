"""What is wrong with a project's settings, collected and said one way: `Problems` gathers every bad
value with where it is, and `did_you_mean` suggests the name a typo meant.

It stands in core, not beside params.py in settings/, because the checks that report through it sit on
lower floors too: a source's protocol keys (sources/source_options.py) and its keep and block rules
(pipeline/filters.py) are checked below settings/, which may not be imported from there.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable

from .errors import SettingsError


class Problems:
    """Collects every bad value so the user fixes them all in one go, each as "file: where: what". `secrets`:
    the reader uses the secrets (the daemon), so one whose environment variable is not set is a problem;
    for a command that never does (check, status, poll, export-opml) it is a note, in `unset`."""

    def __init__(self, filename: str, *, secrets: bool = True) -> None:
        self.filename, self.secrets = filename, secrets
        self.lines: list[str] = []
        self.unset: list[str] = []
        self._wheres: set[str] = set()

    def add(self, where: str, what: str) -> None:
        self.lines.append(f"{self.filename}: {where}: {what}")
        self._wheres.add(where)

    def has(self, where: str) -> bool:
        """Whether a problem was added about `where` (a job, a source): a check that builds on an earlier
        one is skipped when that one failed, so one mistake is not reported again in other words."""
        return where in self._wheres

    def secret_unset(self, where: str, what: str) -> None:
        if self.secrets:
            self.add(where, what)
        else:
            self.unset.append(f"{where}: {what}; only the daemon reads it, from its own environment "
                              "(EnvironmentFile= in its systemd unit)")

    def raise_if_any(self) -> None:
        if self.lines:
            raise SettingsError("\n".join(self.lines))


def did_you_mean(word: object, known: Iterable[str], *, quote: bool = True) -> str:
    """ "did you mean 'interval'?" for the known name closest to a misspelt `word`, or "" when none is close
    (the caller then lists what is known). `quote` False for a setting's name, written bare in params.py."""
    close = difflib.get_close_matches(str(word), list(known), n=1)
    if not close:
        return ""
    return f"did you mean {close[0]!r}?" if quote else f"did you mean {close[0]}?"


def unknown_key(key: object, known: Iterable[str]) -> str:
    """A dict's key that is none of `known` (a source's, a job's): the one meant, or the keys there are."""
    known = tuple(known)
    hint = did_you_mean(key, known)
    return f"unknown key {key!r}, {hint}" if hint else f"unknown key {key!r} (known keys: {', '.join(known)})"
