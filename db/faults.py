"""What a database error says about a flush, read from the database's own codes (PostgreSQL's
SQLSTATE, SQLite's result code), so that each kind is met in its own way and none is taken for another:
a record's bad value must not hold every good row back, and a database that is away must not send
good rows to quarantine.
"""
from __future__ import annotations

import enum
import sqlite3

from sqlalchemy.exc import DataError, IntegrityError


class Fault(enum.Enum):
    RECORD = "the record's own content"        # set that record aside, store the others
    ID_SEQUENCE = "the id sequence is behind"  # a restore or rows inserted with explicit ids
    CHANGED = "changed underneath"             # the table, a column or the SQLite file: reconnect, create
    LOCKED = "a lock held elsewhere"           # waited DB_TIMEOUT for another connection: retry later
    AWAY = "away or busy"                      # connection, resources, shutdown, anything unknown: retry


# PostgreSQL SQLSTATE classes that blame a value: 22 data exception (too long, bad encoding), 23
# integrity constraint (a user's own unique index or check), 54 program limit exceeded (an index row
# over the btree maximum). 08 connection, 53 resources, 57 operator intervention, 40 rollback, 55 lock
# not available and every other class keep the rows staged: keeping them is always safe.
RECORD_CLASSES = ("22", "23", "54")
# Undefined table, undefined column, no unique index for ON CONFLICT (hash), and a plan cached on a
# connection before the table was made anew.
CHANGED_STATES = ("42P01", "42703", "42P10", "0A000")
LOCKED_STATES = ("55P03",)  # lock_not_available: lock_timeout ran out
# SQLite names these in words only (SQLITE_ERROR carries no finer code); its messages are not translated.
SQLITE_CHANGED_WORDS = ("no such table", "no such column", "has no column named",
                        "ON CONFLICT clause does not match")


def classify(exc: BaseException, key_constraint: str | None = None) -> Fault:
    """The Fault behind `exc` (an SQLAlchemy error). `key_constraint` names the table's primary key
    constraint: a conflict on it is the id sequence's fault, never the record's."""
    error = getattr(exc, "orig", None) or exc
    sqlstate = getattr(error, "sqlstate", None)
    if sqlstate:
        constraint = getattr(getattr(error, "diag", None), "constraint_name", None)
        return _postgresql(sqlstate, constraint, key_constraint)
    if isinstance(error, sqlite3.Error):
        return _sqlite(error)
    # No code: the driver refused a value before sending it (psycopg and a NUL byte), raised through
    # SQLAlchemy or, from a bulk load on the driver's own connection (db/bulk.py), by the driver itself.
    if isinstance(exc, (DataError, IntegrityError)) or _dbapi_names(error) & {"DataError", "IntegrityError"}:
        return Fault.RECORD
    return Fault.AWAY


def _dbapi_names(error: BaseException) -> set[str]:
    """The names of the error's classes: every DBAPI driver has its own DataError (PEP 249)."""
    return {cls.__name__ for cls in type(error).__mro__}


def _postgresql(sqlstate: str, constraint: str | None, key_constraint: str | None) -> Fault:
    if sqlstate == "23505" and key_constraint and constraint == key_constraint:
        return Fault.ID_SEQUENCE
    if sqlstate[:2] in RECORD_CLASSES:
        return Fault.RECORD
    if sqlstate in CHANGED_STATES:
        return Fault.CHANGED
    if sqlstate in LOCKED_STATES:
        return Fault.LOCKED
    return Fault.AWAY


def _sqlite(error: sqlite3.Error) -> Fault:
    name = getattr(error, "sqlite_errorname", "") or ""
    # A trigger's RAISE(ABORT/FAIL/ROLLBACK, ...) is an IntegrityError too, but says whatever its author
    # wrote ("writes paused for maintenance") and carries no code telling a value's fault from a pause;
    # kept staged and retried, as PostgreSQL's RAISE EXCEPTION (SQLSTATE P0001) is: keeping is safe.
    if name == "SQLITE_CONSTRAINT_TRIGGER":
        return Fault.AWAY
    if isinstance(error, (sqlite3.IntegrityError, sqlite3.DataError)) or name == "SQLITE_TOOBIG":
        return Fault.RECORD
    # SQLITE_READONLY_DBMOVED: the file was replaced or removed under an open connection.
    if name.startswith("SQLITE_READONLY") or any(words in str(error) for words in SQLITE_CHANGED_WORDS):
        return Fault.CHANGED
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return Fault.LOCKED
    return Fault.AWAY
