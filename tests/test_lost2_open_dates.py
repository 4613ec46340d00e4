"""Issue 27 case 18: a date-template job with no `to` (up to today). Today's page answered 404 when
pass 1 ran and was published later that day: the open end of the range is asked again at the next
pass 1, as stop_after_misses' misses are, so it is stored then; an older day's 404 stays final."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.shop import HARVEST_FIELDS, item_page


def test_todays_page_published_after_pass_1_is_asked_again_and_stored(server, project):
    today = datetime.now(UTC).date()
    days = [today - timedelta(days=2), today - timedelta(days=1), today]
    path = {day: f"/day/{day.isoformat()}" for day in days}
    server.route(path[days[0]], body=item_page(1), content_type="text/html")
    # days[1] never published (a genuine gap), days[2] (today) not yet: both answer 404.
    job = {"name": "daily", "template": server.url("/day/{day:%Y-%m-%d}"),
           "values": {"day": {"from": days[0].isoformat()}}, "fields": HARVEST_FIELDS}
    project.write_params(LINK_JOBS=[job])
    project.run("--once", check=True)
    assert [r["name"] for r in project.rows("daily")] == ["Item 1"]

    server.route(path[today], body=item_page(3), content_type="text/html")  # published later that day
    project.run("--once", check=True)
    assert [r["name"] for r in project.rows("daily")] == ["Item 1", "Item 3"]
    assert "1 misses at the end of the range asked again" in project.log()
    assert server.hits[path[today]] == 2
    assert server.hits[path[days[1]]] == 1  # before the open end: its 404 stays final
    assert server.hits[path[days[0]]] == 1
