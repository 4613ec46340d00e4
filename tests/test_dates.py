"""parser/core/dates.py's read_date at a leap second: the next second (UTC 23:59:60 only; second 60 anywhere
else is no date), and a feed dated so stores that date through the daemon."""
from __future__ import annotations

from parser.core.dates import read_date
from tests.conftest import Project
from tests.feeds import raw_rss
from tests.server import LoopbackServer


def test_a_leap_second_is_the_next_second_and_second_60_elsewhere_no_date():
    assert read_date("2016-12-31T23:59:60Z").iso == "2017-01-01T00:00:00Z"
    assert read_date("Sat, 31 Dec 2016 23:59:60 +0000").iso == "2017-01-01T00:00:00Z"
    assert read_date("2017-01-01T00:59:60+01:00").iso == "2017-01-01T00:00:00Z"  # 23:59:60 UTC in Paris
    assert read_date("2015-06-30T23:59:60.250Z").iso == "2015-07-01T00:00:00Z"
    assert read_date("2016-12-31T23:58:60Z").iso == ""  # no leap second is inserted there
    assert read_date("2016-12-31T23:59:61Z").iso == ""


def test_a_feed_dated_at_a_leap_second_stores_the_date(server: LoopbackServer, project: Project):
    server.route("/feed.xml", body=raw_rss([("http://example.com/leap", "Sat, 31 Dec 2016 23:59:60 GMT")]))
    project.write_params(SOURCES=[{"name": "leap", "url": server.url("/feed.xml")}])
    project.run("--once", check=True)
    assert [r["published"] for r in project.rows()] == ["2017-01-01T00:00:00Z"]
