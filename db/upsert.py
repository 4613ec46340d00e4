"""How a staged row meets the row already stored under its hash: the SQL of a flush's conflict.

UPDATES (parser/settings): "ignore" stores a hash once and never touches it again (0.5's rule); "update"
(the default) overwrites the stored row's columns with the staged ones when any of them differs, and sets
`changed` to the staged row's `fetched` when a value the user sees is replaced by another (title, content,
summary, updated for items; every field of a job's object; a value filled where there was none, as after an
upgrade, is no edit); "history" does the same after copying the row
as it was into `<table>_versions`. The first `fetched` stays: it says when the entry was first seen. The
mode is the source's own where it has one (Updates: a row's `source` column says whose it is).

An update applies only when the staged row was fetched at or after the stored row's version was (its
`changed`, else its first `fetched`): several daemons of a group stage one entry, each its own poll, and
flush in any order; the latest poll stays whoever flushes last.

Loading a batch twice (a crash between the commit and the batch's removal) changes nothing the second
time: the staged values equal the stored ones, so no row matches the WHERE and nothing is written.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from parser.core.record import EDITABLE_FIELDS

MODES = ("update", "history", "ignore")
KEPT = frozenset({"id", "hash", "source", "fetched", "changed", "stored"})  # never overwritten by an update
# When a flush wrote a row (its `stored`), as each database spells the time of its statement.
NOW = {"sqlite": "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')", "postgresql": "now()"}


def stamped(target: Target, dialect: str) -> tuple[list[str], list[str]]:
    """The column an insert into the target adds to the staged fields, and its value: `stored`, the time of
    the flush, where the table has it (every table this version made or brought up; not a user's own)."""
    return (["stored"], [NOW[dialect]]) if "stored" in target.columns else ([], [])


class Updates(NamedTuple):
    """A table's UPDATES at the flush: `mode` for every row but those of the sources (the `source` column)
    named in `own`, each with a mode of its own (a source's `updates`). A job's table has one mode."""
    mode: str = "update"
    own: tuple[tuple[str, str], ...] = ()  # (source, its mode), where it differs from `mode`

    @property
    def widest(self) -> str:
        """What the table's statements must do: "history" when any row keeps its versions, "ignore" when
        no row is ever updated, else "update"."""
        modes = {self.mode, *(mode for _, mode in self.own)}
        if "history" in modes:
            return "history"
        return "ignore" if modes == {"ignore"} else "update"

    def rows_of(self, mode: str, source: str) -> str:
        """SQL true for a row whose mode is `mode`, `source` being the SQL of its `source` column. The names
        go in as literals ('' for a quote; a name holds no control character: parser/settings)."""
        names = [name for name, own in self.own if (own == mode) != (self.mode == mode)]
        if not names:
            return "TRUE" if self.mode == mode else "FALSE"
        listed = ", ".join("'" + name.replace("'", "''") + "'" for name in names)
        return f"{source} {'NOT IN' if self.mode == mode else 'IN'} ({listed})"


class Target(NamedTuple):
    """Where a flush's rows go: the table, its own columns, the UPDATES modes, the versions table ("history")."""
    table: str
    columns: Sequence[str]
    updates: Updates = Updates()
    versions: Sequence[str] = ()  # the `<table>_versions` table's columns, when a row keeps its versions
    changed_type: str = ""  # PostgreSQL: the type of the table's `changed` column, which `fetched` is cast to


def edited_fields(table: str, fields: Sequence[str]) -> list[str]:
    """The staged fields whose change sets `changed`: a feed entry's EDITABLE_FIELDS; a job's every field."""
    updatable = [f for f in fields if f not in KEPT]
    if table == "items":
        return [f for f in updatable if f in EDITABLE_FIELDS]
    return [f for f in updatable if f != "url"]


def differs(pairs: Sequence[tuple[str, str]], dialect: str, *, filled: bool = True) -> str:
    """SQL true when any (stored, staged) pair differs, NULLs compared as values; with `filled` False, a
    stored NULL given a value is no difference (a column a newer version added, filled at the next poll,
    is no edit at the source)."""
    word = "IS DISTINCT FROM" if dialect == "postgresql" else "IS NOT"
    if filled:
        return " OR ".join(f"{stored} {word} {staged}" for stored, staged in pairs) or "FALSE"
    return " OR ".join(f"({stored} IS NOT NULL AND {stored} {word} {staged})" for stored, staged in pairs) or "FALSE"


def fetched_since(target: Target, fields: Sequence[str], stored: str, staged: str) -> str:
    """SQL true unless the staged row (`staged`: its table or alias) was fetched before the stored row's
    version (`stored`): its `changed`, else its first `fetched`. Of two polls of one entry flushed out of
    order (two daemons of a group), the later stays. A time unknown on either side lets the row through."""
    if "fetched" not in fields or "fetched" not in target.columns:
        return "TRUE"
    typed = (lambda value: f"CAST(CAST({value} AS text) AS {target.changed_type})") if target.changed_type \
        else (lambda value: value)
    last = f"COALESCE({stored}.changed, {typed(stored + '.fetched')})" if "changed" in target.columns \
        else f"{stored}.fetched"
    return f"COALESCE({typed(staged + '.fetched')} >= {last}, TRUE)"


def on_conflict(target: Target, fields: Sequence[str], dialect: str, quote: Callable[[str], str]) -> str:
    """The ON CONFLICT (hash) clause of an INSERT of `fields` into the target (its table quoted by the
    caller); a `changed` of another type than `fetched` (a user's table: one as text, the other a time)
    is given `fetched` cast to its type."""
    updates = target.updates
    if updates.widest == "ignore":
        return "ON CONFLICT (hash) DO NOTHING"
    table, stored = target.table, quote(target.table)
    updatable = [f for f in fields if f not in KEPT]
    if not updatable:
        return "ON CONFLICT (hash) DO NOTHING"
    sets = [f"{quote(f)} = excluded.{quote(f)}" for f in updatable]
    if "stored" in target.columns:  # only where the WHERE below lets the update through: the row changed
        sets.append(f"stored = {NOW[dialect]}")
    if "changed" in target.columns and "fetched" in fields:
        edited = differs([(f"{stored}.{quote(f)}", f"excluded.{quote(f)}") for f in edited_fields(table, fields)],
                         dialect, filled=False)
        seen = f"CAST(CAST(excluded.fetched AS text) AS {target.changed_type})" if target.changed_type \
            else "excluded.fetched"
        sets.append(f"changed = CASE WHEN {edited} THEN {seen} ELSE {stored}.changed END")
    where = differs([(f"{stored}.{quote(f)}", f"excluded.{quote(f)}") for f in updatable], dialect)
    if "source" in fields:  # an entry two feeds share (one link) is the first one's: the other never edits it
        where = f"{stored}.source = excluded.source AND ({where})"
        if (ignored := updates.rows_of("ignore", "excluded.source")) != "FALSE":
            where = f"NOT ({ignored}) AND {where}"
    newer = fetched_since(target, fields, stored, "excluded")
    return f"ON CONFLICT (hash) DO UPDATE SET {', '.join(sets)} WHERE {newer} AND {where}"


def versions_insert(target: Target, staged: str, fields: Sequence[str], dialect: str,
                    quote: Callable[[str], str]) -> str:
    """"history": copy each stored row that a staged row (in the table or subquery `staged`, aliased s,
    typed values, each hash once) is about to edit into `<table>_versions`, with `replaced` the time of the
    statement (NOW), when the row's source keeps its versions."""
    names = [c for c in target.versions if c != "replaced"]
    same = ""
    if "source" in fields:
        same = f"t.source = s.source AND {target.updates.rows_of('history', 's.source')} AND "
    edited = differs([(f"t.{quote(f)}", f"s.{quote(f)}") for f in edited_fields(target.table, fields)], dialect,
                     filled=False)
    return (f"INSERT INTO {quote(target.table + '_versions')} ({', '.join(map(quote, names))}, replaced) "
            f"SELECT {', '.join('t.' + quote(c) for c in names)}, {NOW[dialect]} FROM {quote(target.table)} t "
            f"JOIN {staged} ON t.hash = s.hash WHERE {same}{fetched_since(target, fields, 't', 's')} AND ({edited})")
