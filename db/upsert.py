"""How a staged row meets the row already stored under its hash: the SQL of a flush's conflict.

UPDATES (parser/settings): "ignore" stores a hash once and never touches it again (0.5's rule); "update"
(the default) overwrites the stored row's columns with the staged ones when any of them differs, and sets
`changed` to the staged row's `fetched` when a value the user sees is replaced by another (title, content,
summary, updated for items; every field of a job's object; a value filled where there was none, as after an
upgrade, is no edit); "history" does the same after copying the row
as it was into `<table>_versions`. The first `fetched` stays: it says when the entry was first seen.

Loading a batch twice (a crash between the commit and the batch's removal) changes nothing the second
time: the staged values equal the stored ones, so no row matches the WHERE and nothing is written.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from parser.core.record import EDITABLE_FIELDS

MODES = ("update", "history", "ignore")
KEPT = frozenset({"id", "hash", "source", "fetched", "changed"})  # never overwritten by an update


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


def on_conflict(table: str, fields: Sequence[str], columns: Sequence[str], mode: str, dialect: str,
                quote: Callable[[str], str], changed_type: str = "") -> str:
    """The ON CONFLICT (hash) clause of an INSERT into `table` (quoted by the caller) of `fields`;
    `columns`: the table's own (is there a `changed`?); `changed_type`: PostgreSQL's type of `changed`, which
    `fetched` is cast to (a user's table may hold one as text and the other as a time)."""
    if mode == "ignore":
        return "ON CONFLICT (hash) DO NOTHING"
    target = quote(table)
    updatable = [f for f in fields if f not in KEPT]
    if not updatable:
        return "ON CONFLICT (hash) DO NOTHING"
    sets = [f"{quote(f)} = excluded.{quote(f)}" for f in updatable]
    if "changed" in columns and "fetched" in fields:
        edited = differs([(f"{target}.{quote(f)}", f"excluded.{quote(f)}") for f in edited_fields(table, fields)],
                         dialect, filled=False)
        seen = f"CAST(CAST(excluded.fetched AS text) AS {changed_type})" if changed_type else "excluded.fetched"
        sets.append(f"changed = CASE WHEN {edited} THEN {seen} ELSE {target}.changed END")
    where = differs([(f"{target}.{quote(f)}", f"excluded.{quote(f)}") for f in updatable], dialect)
    if "source" in fields:  # an entry two feeds share (one link) is the first one's: the other never edits it
        where = f"{target}.source = excluded.source AND ({where})"
    return f"ON CONFLICT (hash) DO UPDATE SET {', '.join(sets)} WHERE {where}"


def versions_insert(table: str, versions: str, staged: str, fields: Sequence[str], kept: Sequence[str],
                    dialect: str, quote: Callable[[str], str], now: str) -> str:
    """"history": copy each stored row that a staged row (in the table or subquery `staged`, aliased s,
    typed values) is about to edit into `versions`, with `replaced` = `now` (an SQL expression). `kept`:
    the columns the versions table has."""
    names = [c for c in kept if c != "replaced"]
    same = "t.source = s.source AND " if "source" in fields else ""
    edited = differs([(f"t.{quote(f)}", f"s.{quote(f)}") for f in edited_fields(table, fields)], dialect, filled=False)
    return (f"INSERT INTO {quote(versions)} ({', '.join(map(quote, names))}, replaced) "
            f"SELECT {', '.join('t.' + quote(c) for c in names)}, {now} FROM {quote(table)} t "
            f"JOIN {staged} ON t.hash = s.hash WHERE {same}({edited})")
