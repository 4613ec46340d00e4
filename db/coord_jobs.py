"""The shared tables of two-pass jobs (SHARED = True): the link frontier (parser_links), pass 1's
turn and last run (an advisory lock per job, parser_jobs) and per-host politeness (parser_hosts).
The daemon side is parser/group/shared_jobs.py; the connection and the schema are db/coord.py's."""
from __future__ import annotations

from collections.abc import Sequence

from db.coord import Coordinator

# A link pass 2 may fetch (retries only once due, unless any_time). The first condition is the
# partial index's own, spelled out so the planner uses it instead of walking the done links.
OPEN = ("status IN ('pending', 'retry', 'refused')"
        " AND (status <> 'retry' OR %(any_time)s OR next_at <= now())")


class JobTables:
    def __init__(self, coord: Coordinator):
        self.coord = coord
        self.execute = coord.execute
        self.owner = coord.owner

    # -- two-pass jobs: the link frontier -------------------------------------------------------
    def add_links(self, job: str, links: Sequence[tuple[str, int | None, str]]) -> list[str]:
        """Insert (url, depth, origin) rows the job lacks; return the URLs that were new."""
        if not links:
            return []
        rows = self.execute("""
            INSERT INTO parser_links (job, url, depth, origin)
            SELECT %(job)s, u, d, o FROM unnest(%(urls)s::text[], %(depths)s::int[], %(origins)s::text[])
                 WITH ORDINALITY AS t(u, d, o, n) ORDER BY n
            ON CONFLICT (job, url) DO NOTHING RETURNING url""",
            {"job": job, "urls": [u for u, _, _ in links], "depths": [d for _, d, _ in links],
             "origins": [o for _, _, o in links]})
        return [r[0] for r in rows]

    def claim_links(self, job: str, limit: int, lease: float, *, any_time: bool = False) -> list[tuple[int, str]]:
        """Up to `limit` links to fetch (pending, refused, retries due; all retries with any_time),
        leased to this daemon, in the order they were found."""
        rows = self.execute(f"""
            UPDATE parser_links SET lease_owner = %(me)s, lease_until = now() + make_interval(secs => %(lease)s)
            WHERE id IN (SELECT id FROM parser_links
                         WHERE job = %(job)s AND ({OPEN})
                               AND (lease_until IS NULL OR lease_until < now())
                         ORDER BY id LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
            RETURNING id, url""",
            {"me": self.owner, "lease": float(lease), "job": job, "limit": limit, "any_time": any_time})
        return sorted(rows)

    def open_links(self, job: str, limit: int) -> list[tuple[int, str]]:
        """Some links still to fetch, claimed or not (to tell whether one is on a host not held)."""
        return self.execute(f"SELECT id, url FROM parser_links WHERE job = %(job)s AND ({OPEN})"
                            " ORDER BY id LIMIT %(limit)s", {"job": job, "limit": limit, "any_time": True})

    def extend_link_leases(self, ids: Sequence[int], lease: float) -> set[int]:
        """Renew this daemon's leases on `ids`; return those still its own (a lease that ended and
        went to another daemon is that daemon's link now)."""
        if not ids:
            return set()
        rows = self.execute("UPDATE parser_links SET lease_until = now() + make_interval(secs => %s)"
                            " WHERE id = ANY(%s) AND lease_owner = %s AND status IN ('pending', 'retry', 'refused')"
                            " RETURNING id", (float(lease), list(ids), self.owner))
        return {r[0] for r in rows}

    def link_attempts(self, ids: Sequence[int]) -> dict[int, int]:
        return dict(self.execute("SELECT id, attempts FROM parser_links WHERE id = ANY(%s)", (list(ids),)))

    def mark_links(self, marks: Sequence[tuple[int, str, int, str, float]]) -> None:
        """(id, status, attempts, detail, seconds until it may be fetched again) per link; leases end."""
        if marks:
            self.execute("""
                UPDATE parser_links l SET status = m.status, attempts = m.attempts, detail = m.detail,
                    marked_at = now(), next_at = now() + make_interval(secs => m.wait),
                    lease_owner = NULL, lease_until = NULL
                FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::text[], %s::float8[])
                     AS m(id, status, attempts, detail, wait)
                WHERE l.id = m.id""",
                ([m[0] for m in marks], [m[1] for m in marks], [m[2] for m in marks], [m[3] for m in marks],
                 [m[4] for m in marks]))

    def release_links(self, job: str) -> None:
        self.execute("UPDATE parser_links SET lease_owner = NULL, lease_until = NULL"
                     " WHERE job = %s AND lease_owner = %s", (job, self.owner))

    def link_counts(self, job: str) -> dict[str, int]:
        return dict(self.execute("SELECT status, count(*) FROM parser_links WHERE job = %s GROUP BY status", (job,)))

    def link_rows(self, job: str, *, urls: Sequence[str] | None = None,
                  ids: Sequence[int] | None = None) -> list[tuple[int, str, str]]:
        """(id, url, status) of the given links."""
        if urls is not None:
            return self.execute("SELECT id, url, status FROM parser_links WHERE job = %s AND url = ANY(%s)",
                                (job, list(urls)))
        return self.execute("SELECT id, url, status FROM parser_links WHERE job = %s AND id = ANY(%s)",
                            (job, list(ids or ())))

    def link_count(self, job: str) -> int:
        return int(self.execute("SELECT count(*) FROM parser_links WHERE job = %s", (job,))[0][0])

    # -- two-pass jobs: pass 1 ------------------------------------------------------------------
    def try_job_lock(self, job: str) -> bool:
        """Session-level: held until released or this connection ends (a dead daemon's goes with it)."""
        return bool(self.execute("SELECT pg_try_advisory_lock(hashtext('parser-job:' || %s))", (job,))[0][0])

    def release_job_lock(self, job: str) -> None:
        self.execute("SELECT pg_advisory_unlock(hashtext('parser-job:' || %s))", (job,))

    def seconds_since_pass1(self, job: str) -> float | None:
        rows = self.execute("SELECT EXTRACT(EPOCH FROM now() - pass1_at) FROM parser_jobs WHERE job = %s", (job,))
        return float(rows[0][0]) if rows and rows[0][0] is not None else None

    def pass1_finished(self, job: str) -> None:
        self.execute("INSERT INTO parser_jobs (job, pass1_at) VALUES (%s, now())"
                     " ON CONFLICT (job) DO UPDATE SET pass1_at = now()", (job,))

    # -- per-host politeness for the whole group --------------------------------------------------
    def reserve_host(self, host: str, delay: float) -> float | None:
        """Book the host's next free moment, `delay` after the one before; return the seconds to wait
        for it, or None (nothing booked) while the host is held (for every request, or for the crawl)."""
        rows = self.execute("""
            INSERT INTO parser_hosts AS h (host, next_at) VALUES (%(host)s, now() + make_interval(secs => %(d)s))
            ON CONFLICT (host) DO UPDATE SET next_at = GREATEST(h.next_at, now()) + make_interval(secs => %(d)s)
                WHERE (h.held_until IS NULL OR h.held_until <= now())
                  AND (h.crawl_held_until IS NULL OR h.crawl_held_until <= now())
            RETURNING EXTRACT(EPOCH FROM next_at - now()) - %(d)s""", {"host": host, "d": float(delay)})
        return max(0.0, float(rows[0][0])) if rows else None

    def hold_host(self, host: str, seconds: float, *, crawl_only: bool = False) -> None:
        """No request to the host for `seconds`; with crawl_only, no request of the jobs (a source's
        Retry-After: parser/fetch/host_slots.py)."""
        column = "crawl_held_until" if crawl_only else "held_until"
        self.execute(f"""
            INSERT INTO parser_hosts AS h (host, {column}) VALUES (%(host)s, now() + make_interval(secs => %(s)s))
            ON CONFLICT (host) DO UPDATE SET {column} = GREATEST(h.{column}, excluded.{column})""",
            {"host": host, "s": float(seconds)})

    def host_holds(self, *, crawl_only: bool = False) -> dict[str, float]:
        """host -> seconds it is still held, for every host held now (crawl_only: the crawl's holds)."""
        column = "crawl_held_until" if crawl_only else "held_until"
        return {h: float(s) for h, s in self.execute(
            f"SELECT host, EXTRACT(EPOCH FROM {column} - now()) FROM parser_hosts WHERE {column} > now()")}
