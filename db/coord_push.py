"""The shared tables of pushed sources (SHARED = True): delivery ids taken (parser_deliveries) and one
WebSub subscription per source (parser_websub), made by db/migrations.py's chain. The daemon side is
parser/group/shared_push.py."""
from __future__ import annotations

from db.coord import Coordinator


class PushTables:
    def __init__(self, coord: Coordinator):
        self.coord = coord
        self.execute = coord.execute
        self.owner = coord.owner

    def create_schema(self) -> None:
        self.coord.create_schema()

    # -- webhooks and WebSub ----------------------------------------------------------------------
    def take_delivery(self, source: str, delivery: str) -> bool:
        """True for a delivery id the group has not taken before (it is taken now); False: a replay."""
        return bool(self.execute("INSERT INTO parser_deliveries (source, delivery) VALUES (%s, %s)"
                                 " ON CONFLICT DO NOTHING RETURNING 1", (source, delivery)))

    def forget_delivery(self, source: str, delivery: str) -> None:
        """The delivery could not be kept after all (the disk refused): its sender's retry is no replay."""
        self.execute("DELETE FROM parser_deliveries WHERE source = %s AND delivery = %s", (source, delivery))

    def prune_deliveries(self, keep: int) -> int:
        """Forget all but the `keep` newest delivery ids (one daemon's deliveries.txt keeps as many; ids
        taken in the same microsecond as the keep-th are kept with it); how many were forgotten. The
        index on `at` finds the cut without sorting the table."""
        return int(self.execute("""
            WITH gone AS (DELETE FROM parser_deliveries WHERE at < (
                SELECT at FROM parser_deliveries ORDER BY at DESC OFFSET %s LIMIT 1) RETURNING 1)
            SELECT count(*) FROM gone""", (max(int(keep) - 1, 0),))[0][0])

    def delivery_seen(self, source: str, delivery: str) -> bool:
        return bool(self.execute("SELECT 1 FROM parser_deliveries WHERE source = %s AND delivery = %s",
                                 (source, delivery)))

    def websub_secret(self, source: str, proposed: str) -> str:
        """The group's secret for a source's subscription: the first daemon's proposal wins."""
        self.execute("INSERT INTO parser_websub (source, secret) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                     (source, proposed))
        return self.execute("SELECT secret FROM parser_websub WHERE source = %s", (source,))[0][0]

    def claim_websub(self, source: str, hold: float) -> bool:
        """This daemon's turn to (re)subscribe: due, and nobody else's turn for `hold` seconds."""
        return bool(self.execute("""
            UPDATE parser_websub SET owner = %(me)s, next_at = now() + make_interval(secs => %(hold)s)
            WHERE source = %(source)s AND next_at <= now() RETURNING 1""",
            {"me": self.owner, "hold": float(hold), "source": source}))

    def websub_requested(self, source: str, hub: str, topic: str) -> None:
        self.execute("UPDATE parser_websub SET hub = %s, topic = %s, requested_at = now() WHERE source = %s",
                     (hub, topic, source))

    def websub_waiting(self, source: str) -> bool:
        """A request of the group's is not verified yet (made by any daemon)."""
        return bool(self.execute("SELECT 1 FROM parser_websub WHERE source = %s AND requested_at IS NOT NULL",
                                 (source,)))

    def websub_verified(self, source: str, lease: float, renew_in: float) -> None:
        self.execute("""
            UPDATE parser_websub SET expires_at = now() + make_interval(secs => %s),
                next_at = now() + make_interval(secs => %s), requested_at = NULL WHERE source = %s""",
            (float(lease), float(renew_in), source))

    def websub_row(self, source: str) -> tuple[str | None, str | None, float] | None:
        """(hub, topic, seconds until the next (re)subscription is due) of a source's subscription."""
        rows = self.execute("SELECT hub, topic, EXTRACT(EPOCH FROM next_at - now()) FROM parser_websub"
                            " WHERE source = %s", (source,))
        return (rows[0][0], rows[0][1], float(rows[0][2])) if rows else None
