"""The SQL of several daemons sharing one PostgreSQL (SHARED = True): the connection, and the sources'
schedule and state, with leases. The shared tables are made by the chain of db/migrations.py.
Jobs' tables are db/coord_jobs.py's, pushed sources' db/coord_push.py's; the daemon-side classes are
parser/group/shared*.py. Nothing here knows about feeds.

One row per source. A daemon claims due rows in a batch: the claim moves `due_at` an interval on (or
to the end of the lease, if later), so a claimed row is not due for anyone else, and a daemon that
dies (kill -9, a lost machine) leaves rows that come due again then: never within the interval of a
request it may have sent. When a poll is done, its daemon writes the
state and the next due time and clears the lease, but only while the lease is still its own.

Times are the database's clock (now()): the daemons' machines may disagree about the time of day,
the database is the one clock they share. Plain psycopg (not SQLAlchemy): SKIP LOCKED, advisory
locks and COPY are PostgreSQL's own, and the few statements read better as SQL.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import psycopg
import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from db import migrations
from parser.core.errors import SchemaRefusedError, StorageError

log = logging.getLogger("parser")

# A host slot nobody holds: never taken, given back, its hold over, or its holder's connection gone.
SLOT_FREE = "(owner IS NULL OR until < now() OR NOT EXISTS (SELECT 1 FROM pg_stat_get_activity(pid)))"
HOLD_LEFT = "COALESCE(GREATEST(EXTRACT(EPOCH FROM hold_until - now()), 0), 0)"


def conninfo(db_url: str) -> str:
    """An SQLAlchemy PostgreSQL URL (postgresql+psycopg://...) as psycopg's connection string."""
    scheme, _, rest = db_url.partition("://")
    if not scheme.startswith("postgres"):
        raise StorageError(f"SHARED needs a PostgreSQL DB_URL, got {scheme}://...")
    return "postgresql://" + rest


def daemon_id() -> str:
    """Who holds a lease: readable in the table (host and pid), unique across restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def listing_digest(listed: Iterable[tuple[str, bool]]) -> str:
    """One short text per set of (name, enabled): two daemons with the same sources, the same digest."""
    text = "\n".join(sorted(f"{name}\t{int(bool(on))}" for name, on in set(listed)))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Claimed:
    name: str
    state: dict
    hold_left: float = 0.0  # seconds of a Retry-After hold still to run (0: none)


class Coordinator:
    """One autocommit connection to the shared database, reopened after it drops. Main thread only."""

    def __init__(self, db_url: str, owner: str | None = None):
        self.conninfo = conninfo(db_url)
        self.owner = owner or daemon_id()
        self._conn: psycopg.Connection | None = None

    def conn(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            try:
                self._conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10,
                                             application_name="parser-shared")
            except psycopg.Error as exc:
                raise StorageError(f"shared database unreachable: {str(exc).strip()[:300]}") from None
        return self._conn

    def execute(self, sql: str, params: Sequence | dict | None = None) -> list[tuple]:
        try:
            cur = self.conn().execute(sql, params)
            return cur.fetchall() if cur.description else []
        except psycopg.Error as exc:
            raise StorageError(f"shared database: {str(exc).strip().splitlines()[0][:300]}") from None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def create_schema(self) -> None:
        """The chain of schema steps (db/migrations.py) with the group's tables, run once by whichever
        daemon comes first (one lock, a transaction a step). A database of this version is only read
        (the record, no lock): a CREATE INDEX or ALTER TABLE takes table locks even when there is
        nothing to do, and a daemon starting beside running ones then deadlocked with their writes."""
        engine = sa.create_engine("postgresql+psycopg://", poolclass=NullPool, creator=lambda: psycopg.connect(
            self.conninfo, connect_timeout=10, application_name="parser-shared"))
        try:
            migrations.run(engine, group=True)
        except SchemaRefusedError:
            raise
        except (SQLAlchemyError, psycopg.Error) as exc:
            error = getattr(exc, "orig", None) or exc
            raise StorageError(f"cannot prepare the shared tables: {str(error).strip()[:300]}") from None
        finally:
            engine.dispose()

    # -- sources ----------------------------------------------------------------------------------
    def sync_sources(self, sources: Iterable[tuple[str, str, float, bool]], alive: float = 900.0) -> None:
        """Upsert (name, url, interval, enabled) as params.py has them; a source whose url changed
        loses its state (its validators were the old address's) and is due at once. The file is
        also this daemon's listing: a source is enabled while a daemon seen within `alive` seconds
        lists it enabled, so a source no longer in any running daemon's file is disabled (its state
        kept in case it comes back), and one machine's older file does not disable it for the rest."""
        rows = list(sources)
        try:
            with self.conn().transaction():
                cur = self.conn().cursor()
                cur.execute("CREATE TEMP TABLE wanted (name text, url text, interval_s double precision,"
                            " enabled boolean) ON COMMIT DROP")
                with cur.copy("COPY wanted (name, url, interval_s, enabled) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
                self._list(cur, listing_digest((r[0], r[3]) for r in rows), alive)
                cur.execute("""
                    INSERT INTO parser_sources AS s (name, url, interval_s, enabled)
                    SELECT name, url, interval_s, enabled FROM wanted
                    ON CONFLICT (name) DO UPDATE SET
                        interval_s = excluded.interval_s, url = excluded.url,
                        state = CASE WHEN s.url = excluded.url THEN s.state ELSE '{}' END,
                        due_at = CASE WHEN s.url = excluded.url
                                      THEN LEAST(s.due_at, now() + make_interval(secs => excluded.interval_s))
                                      ELSE now() END
                    WHERE (s.url, s.interval_s) IS DISTINCT FROM (excluded.url, excluded.interval_s)""")
                cur.execute("""
                    UPDATE parser_sources s SET enabled = EXISTS (
                        SELECT 1 FROM parser_listings l WHERE l.name = s.name AND l.enabled)
                    WHERE enabled IS DISTINCT FROM EXISTS (
                        SELECT 1 FROM parser_listings l WHERE l.name = s.name AND l.enabled)""")
        except psycopg.Error as exc:
            raise StorageError(f"cannot write the sources to the shared database: {str(exc).strip()[:300]}") from None

    def _list(self, cur: psycopg.Cursor, digest: str, alive: float) -> None:
        """This daemon's listing (the temp table `wanted`) in place of its last one; the listings of
        daemons not seen for `alive` seconds (killed, or their machine lost) go."""
        cur.execute("DELETE FROM parser_daemons WHERE seen_at < now() - make_interval(secs => %s)", (float(alive),))
        cur.execute("INSERT INTO parser_daemons (owner, digest) VALUES (%s, %s) ON CONFLICT (owner)"
                    " DO UPDATE SET seen_at = now(), digest = excluded.digest", (self.owner, digest))
        cur.execute("DELETE FROM parser_listings WHERE owner = %s", (self.owner,))
        cur.execute("INSERT INTO parser_listings (name, owner, enabled) SELECT DISTINCT ON (name) name, %s,"
                    " enabled FROM wanted", (self.owner,))

    def seen(self, alive: float) -> tuple[tuple[str, str], ...]:
        """This daemon is still running (its listing counts); the (owner, digest) of every other
        daemon seen within `alive` seconds: a change means the group's files changed."""
        self.execute("UPDATE parser_daemons SET seen_at = now() WHERE owner = %s", (self.owner,))
        return tuple(self.execute(
            "SELECT owner, digest FROM parser_daemons WHERE owner <> %s AND seen_at >= now() - make_interval("
            "secs => %s) ORDER BY owner", (self.owner, float(alive))))

    def disagreement(self, alive: float, show: int = 5) -> tuple[tuple[int, list[str]], tuple[int, list[str]]]:
        """How this daemon's file and the other running daemons' differ: (how many, the first `show`)
        of the sources they enable and this file lacks or disables, then of those this file enables
        and none of them does (none when this daemon is alone)."""
        others = ("SELECT 1 FROM parser_listings o JOIN parser_daemons d USING (owner) WHERE o.name = {n}"
                  " AND o.enabled AND o.owner <> %(me)s AND d.seen_at >= now() - make_interval(secs => %(alive)s)")
        mine = "SELECT 1 FROM parser_listings m WHERE m.name = {n} AND m.enabled AND m.owner = %(me)s"
        theirs_only = (f"SELECT DISTINCT o.name FROM parser_listings o JOIN parser_daemons d USING (owner)"
                       f" WHERE o.enabled AND o.owner <> %(me)s AND d.seen_at >= now() - make_interval(secs =>"
                       f" %(alive)s) AND NOT EXISTS ({mine.format(n='o.name')})")
        mine_only = (f"SELECT m.name FROM parser_listings m WHERE m.owner = %(me)s AND m.enabled"
                     f" AND NOT EXISTS ({others.format(n='m.name')})"
                     f" AND EXISTS (SELECT 1 FROM parser_daemons WHERE owner <> %(me)s"
                     f" AND seen_at >= now() - make_interval(secs => %(alive)s))")
        params = {"me": self.owner, "alive": float(alive)}
        found = []
        for query in (theirs_only, mine_only):
            count = self.execute(f"SELECT count(*) FROM ({query}) q", params)[0][0]
            names = [r[0] for r in self.execute(f"SELECT name FROM ({query}) q ORDER BY name LIMIT {int(show)}",
                                                params)] if count else []
            found.append((int(count), names))
        return found[0], found[1]

    def unlist(self) -> None:
        """This daemon stops: its listing no longer keeps sources enabled (the next sync decides)."""
        self.execute("DELETE FROM parser_daemons WHERE owner = %s", (self.owner,))

    def claim_sources(self, limit: int, lease: float, names: Sequence[str] | None = None) -> list[Claimed]:
        """Up to `limit` due sources, leased to this daemon for `lease` seconds (all enabled sources,
        or only `names`). SKIP LOCKED: two daemons claiming at once get different rows, neither waits."""
        only = "name = ANY(%(names)s)" if names is not None else "enabled"
        rows = self.execute(f"""
            UPDATE parser_sources s
            SET lease_owner = %(me)s, lease_until = now() + make_interval(secs => %(lease)s),
                due_at = now() + make_interval(secs => GREATEST(%(lease)s, s.interval_s))
            WHERE s.name IN (SELECT name FROM parser_sources
                             WHERE {only} AND due_at <= now()
                             ORDER BY due_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
            RETURNING s.name, s.state, {HOLD_LEFT}""",
            {"me": self.owner, "lease": float(lease), "limit": limit, "names": list(names or ())})
        return [Claimed(name, state, float(hold)) for name, state, hold in rows]

    def claim_source(self, name: str, lease: float) -> Claimed | None:
        """One source, due or not, unless another daemon holds its lease (this one's may be renewed)."""
        rows = self.execute(f"""
            UPDATE parser_sources
            SET lease_owner = %(me)s, lease_until = now() + make_interval(secs => %(lease)s),
                due_at = now() + make_interval(secs => GREATEST(%(lease)s, interval_s))
            WHERE name = %(name)s AND (lease_owner IS NULL OR lease_owner = %(me)s OR lease_until < now())
            RETURNING name, state, {HOLD_LEFT}""", {"me": self.owner, "lease": float(lease), "name": name})
        return Claimed(rows[0][0], rows[0][1], float(rows[0][2])) if rows else None

    def finish_sources(self, done: Sequence[tuple[str, dict, float, float]]) -> int:
        """(name, state, seconds until due, seconds of a Retry-After hold) per polled source: state
        written, lease cleared. A lease that ended and went to another daemon is left to it. Returns
        how many were still ours."""
        if not done:
            return 0
        rows = self.execute("""
            UPDATE parser_sources s
            SET state = d.state, due_at = now() + make_interval(secs => d.due_in), polled_at = now(),
                hold_until = CASE WHEN d.hold > 0 THEN now() + make_interval(secs => d.hold) END,
                lease_owner = NULL, lease_until = NULL
            FROM (SELECT * FROM unnest(%(names)s::text[], %(states)s::jsonb[], %(due)s::float8[],
                                       %(holds)s::float8[]) AS t(name, state, due_in, hold)) d
            WHERE s.name = d.name AND s.lease_owner = %(me)s
            RETURNING s.name""",
            {"names": [d[0] for d in done], "states": [json.dumps(d[1]) for d in done],
             "due": [max(0.0, d[2]) for d in done], "holds": [max(0.0, d[3]) for d in done], "me": self.owner})
        return len(rows)

    def renew_sources(self, lease: float) -> int:
        """Every lease this daemon holds, renewed: a cycle longer than expected keeps its sources."""
        rows = self.execute("""
            UPDATE parser_sources SET lease_until = now() + make_interval(secs => %(lease)s),
                due_at = GREATEST(due_at, now() + make_interval(secs => %(lease)s))
            WHERE lease_owner = %(me)s RETURNING name""", {"me": self.owner, "lease": float(lease)})
        return len(rows)

    def release_sources(self) -> int:
        """This daemon's leases given back (it stops): due an interval from now (not at the lease's
        end), since a request may have gone out before the stop, and counts as a poll."""
        rows = self.execute("UPDATE parser_sources SET lease_owner = NULL, lease_until = NULL,"
                            " due_at = LEAST(due_at, now() + make_interval(secs => interval_s))"
                            " WHERE lease_owner = %s RETURNING name", (self.owner,))
        return len(rows)

    def take_rate(self, source: str, burst: int, per_second: float, max_wait: float) -> float | None:
        """One request of a source's rate budget: seconds to wait before sending it, or None (nothing
        taken) when that would be longer than max_wait. The row lock of the upsert orders daemons."""
        rows = self.execute("""
            INSERT INTO parser_rates AS r (source, tokens, stamp) VALUES (%(source)s, %(burst)s - 1, now())
            ON CONFLICT (source) DO UPDATE SET
                tokens = LEAST(%(burst)s, r.tokens + EXTRACT(EPOCH FROM now() - r.stamp) * %(rate)s) - 1,
                stamp = now()
            WHERE (1 - LEAST(%(burst)s, r.tokens + EXTRACT(EPOCH FROM now() - r.stamp) * %(rate)s)) / %(rate)s
                  <= %(max_wait)s
            RETURNING tokens""",
            {"source": source, "burst": float(burst), "rate": float(per_second), "max_wait": float(max_wait)})
        return max(0.0, -float(rows[0][0]) / per_second) if rows else None

    def rate_free_in(self, source: str, burst: int, per_second: float) -> float:
        """Seconds until the source's budget allows a request, taking nothing."""
        rows = self.execute("""
            SELECT (1 - LEAST(%(burst)s, tokens + EXTRACT(EPOCH FROM now() - stamp) * %(rate)s)) / %(rate)s
            FROM parser_rates WHERE source = %(source)s""",
            {"source": source, "burst": float(burst), "rate": float(per_second)})
        return max(0.0, float(rows[0][0])) if rows else 0.0

    # -- PER_HOST slots ----------------------------------------------------------------------------
    def take_host_slot(self, host: str, per_host: int, hold: float, waiting: bool = False) -> int | None:
        """One of the host's `per_host` slots, held for at most `hold` seconds, or None when every one
        is taken or promised to workers waiting longer; a None with `waiting` puts this worker in the
        line. The rows are made the first time a host is asked for (one more statement)."""
        take = f"""
            UPDATE parser_host_slots SET owner = %(me)s, pid = pg_backend_pid(),
                until = now() + make_interval(secs => %(hold)s)
            WHERE (host, slot) = (SELECT host, slot FROM parser_host_slots
                                  WHERE host = %(host)s AND slot < %(n)s AND {SLOT_FREE}
                                  LIMIT 1 FOR UPDATE SKIP LOCKED)
              AND (SELECT count(*) FROM parser_host_waits
                   WHERE host = %(host)s AND owner <> %(me)s AND seen > now() - interval '1 second'
                     AND since < COALESCE((SELECT since FROM parser_host_waits WHERE host = %(host)s
                                           AND owner = %(me)s), 'infinity'))
                  < (SELECT count(*) FROM parser_host_slots WHERE host = %(host)s AND slot < %(n)s AND {SLOT_FREE})
            RETURNING slot"""
        params = {"me": self.owner, "hold": float(hold), "host": host, "n": per_host}
        rows = self.execute(take, params)
        if not rows:
            made = self.execute("INSERT INTO parser_host_slots (host, slot)"
                                " SELECT %(host)s, generate_series(0, %(n)s - 1)"
                                " ON CONFLICT DO NOTHING RETURNING slot", params)
            if made:
                rows = self.execute(take, params)
        if rows and waiting:
            self.stop_waiting(host)
        elif not rows and waiting:
            self.execute("INSERT INTO parser_host_waits AS w (host, owner) VALUES (%(host)s, %(me)s)"
                         " ON CONFLICT (host, owner) DO UPDATE SET seen = now(),"
                         " since = CASE WHEN w.seen < now() - interval '1 second' THEN now() ELSE w.since END",
                         params)
        return rows[0][0] if rows else None

    def stop_waiting(self, host: str) -> None:
        """This worker out of the host's line (it has a slot, or gave up)."""
        self.execute("DELETE FROM parser_host_waits WHERE host = %s AND owner = %s", (host, self.owner))

    def free_host_slot(self, host: str, slot: int) -> None:
        """A slot taken by take_host_slot given back (unless its hold ran out and another took it)."""
        self.execute("UPDATE parser_host_slots SET owner = NULL, pid = NULL, until = NULL"
                     " WHERE host = %s AND slot = %s AND owner = %s", (host, slot, self.owner))

    def source_states(self) -> list[tuple[str, dict, float, float]]:
        """(name, state, seconds until due, seconds of a hold left) of every source, for `status`."""
        return [(n, st, float(d), float(h)) for n, st, d, h in self.execute(
            f"SELECT name, state, EXTRACT(EPOCH FROM due_at - now()), {HOLD_LEFT} FROM parser_sources")]

    def seconds_to_next_source(self, names: Sequence[str] | None = None) -> float | None:
        """Seconds until the soonest source comes due (0 when one is), None when there is none."""
        only = "name = ANY(%(names)s)" if names is not None else "enabled"
        rows = self.execute(f"SELECT EXTRACT(EPOCH FROM min(due_at) - now()) FROM parser_sources WHERE {only}",
                            {"names": list(names or ())})
        value = rows[0][0] if rows else None
        return None if value is None else max(0.0, float(value))


class PerThread:
    """A Coordinator per thread (worker and listener threads each query the shared tables)."""

    def __init__(self, db_url: str):
        self.db_url = db_url
        self._local = threading.local()
        self._all: list[Coordinator] = []
        self._lock = threading.Lock()

    def get(self) -> Coordinator:
        coord = getattr(self._local, "coord", None)
        if coord is None:
            coord = self._local.coord = Coordinator(self.db_url)
            with self._lock:
                self._all.append(coord)
        return coord

    def close(self) -> None:
        with self._lock:
            for coord in self._all:
                coord.close()
