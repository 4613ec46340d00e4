"""Both passes of the two-pass jobs in-process (parser/jobs/runner.py's JobRunner on a real Scheduler and
Fetcher, against the shop on 127.0.0.1), driven through the calls the daemon's loop makes of a
technique (parser/collectors.py: offer, stage, finished, keep_finished, sinks). Pass 1 writes the link
file (a template, or a harvest that follows listings), pass 2 fetches each link once and stages one
record per object, and a flush stores them. The same runs through run_daemon.py are in
test_twopass_e2e.py; these show the passes themselves, without a process."""
from __future__ import annotations

import logging
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from db.store import Database
from parser.fetch.host_slots import HostSlots
from parser.fetch.http import Fetcher
from parser.fetch.scheduler import Scheduler
from parser.jobs.job_pace import OneShot
from parser.jobs.runner import JobLoop, JobParts, JobRunner
from parser.settings.params import Settings, settings_from_dict
from tests.conftest import link_statuses
from tests.shop import HARVEST_FIELDS, Shop, item_page


@pytest.fixture
def shop(server) -> Shop:
    return Shop(server)


def job_settings(folder: Path, *jobs: dict) -> Settings:
    return settings_from_dict({"LINK_JOBS": list(jobs), "DB_URL": "sqlite:///db/items.db"}, folder / "params.py")


def run_jobs_once(settings: Settings) -> None:
    """What `run_daemon.py --once` does with the jobs, on the loop's calls alone: offer until the
    scheduler is idle and the jobs are finished, staging after every absorb; then one flush."""
    stop = threading.Event()
    fetcher = Fetcher(user_agent=settings.user_agent, timeout=settings.timeout, deadline=settings.deadline,
                      max_bytes=settings.max_bytes, max_redirects=settings.max_redirects,
                      per_host=settings.per_host, pool_size=settings.concurrency,
                      slots=HostSlots(settings.per_host, stop=stop))
    scheduler = Scheduler(settings.concurrency, settings.per_host)
    runner = JobRunner(settings, list(settings.link_jobs), JobLoop(fetcher, scheduler, stop),
                       parts=JobParts(pace=OneShot()))
    runner.open()
    db = Database(settings.db_url)
    try:
        while True:
            runner.offer()
            if scheduler.idle() and runner.finished():
                break
            scheduler.dispatch()
            scheduler.absorb(0.1)
            runner.stage()
        runner.keep_finished()
        for sink in runner.sinks():
            sink.flush(db)
    finally:
        runner.close()
        scheduler.close()
        db.close()


def stored(folder: Path, table: str) -> dict[str, dict]:
    """path of the object's URL -> its row."""
    db = Database(f"sqlite:///{folder / 'db' / 'items.db'}")
    try:
        with db.engine.connect() as conn:
            rows = [dict(r._mapping) for r in conn.exec_driver_sql(f"SELECT * FROM {table} ORDER BY id")]
    finally:
        db.close()
    return {"/" + r["url"].split("/", 3)[3]: r for r in rows}


def test_a_harvest_finds_the_objects_and_pass_2_stores_each_once_with_its_fields(server, shop, tmp_path, caplog):
    harvest = {"root": server.url("/"), "follow": r"/(list|calendar)/", "depth": 3}
    settings = job_settings(tmp_path, {"name": "shop", "harvest": harvest, "objects": r"/item/\d+$",
                                       "fields": HARVEST_FIELDS})
    with caplog.at_level(logging.INFO):
        run_jobs_once(settings)
    rows = stored(tmp_path, "shop")
    assert set(rows) == {f"/item/{n}" for n in range(1, 9)}
    assert rows["/item/5"]["name"] == "Item 5" and rows["/item/5"]["price"] == "5.99"
    assert rows["/item/3"]["price"] is None  # no price on the page: NULL, and counted
    # Pass 2's tally as its links and rows keep it: the 9 links fetched, 8 stored new, the 404 gone for good,
    # none to retry, given up or pending (links.status); one object without a price, no other field empty.
    ends = link_statuses(tmp_path / "staging", "shop")
    assert Counter(ends.values()) == {"done": 8, "gone": 1} and ends[server.url("/item/404")] == "gone", ends
    assert Counter(field for row in rows.values() for field in HARVEST_FIELDS if row[field] is None) == {"price": 1}
    assert f"shop  {server.url('/item/404')}  HTTP 404 Not Found; not asked again" in caplog.text
    assert shop.item_hits() == {f"/item/{n}": 1 for n in [*range(1, 9), 404]}

    shop.add_item(9, on_list=2)  # a second run: the listings again, no object twice, the new one stored
    run_jobs_once(settings)
    assert shop.item_hits() == {f"/item/{n}": 1 for n in [*range(1, 10), 404]}
    assert set(stored(tmp_path, "shop")) == {f"/item/{n}" for n in range(1, 10)}


def test_a_template_range_writes_its_links_and_a_missing_object_is_gone_for_good(server, shop, tmp_path):
    settings = job_settings(tmp_path, {"name": "pages", "template": server.url("/item/{id}"),
                                       "values": {"id": {"from": 1, "to": 10}}, "fields": HARVEST_FIELDS})
    run_jobs_once(settings)
    assert set(stored(tmp_path, "pages")) == {f"/item/{n}" for n in range(1, 9)}
    link_file = (tmp_path / "staging" / "jobs" / "pages" / "links.txt").read_text(encoding="utf-8")
    links = [line.split("\t")[0] for line in link_file.splitlines() if line and not line.startswith("#")]
    assert links == [server.url(f"/item/{n}") for n in range(1, 11)]
    assert link_statuses(tmp_path / "staging", "pages")[server.url("/item/10")] == "gone"
    run_jobs_once(settings)
    assert shop.item_hits() == {f"/item/{n}": 1 for n in range(1, 11)}  # 404s are final too
    assert len(stored(tmp_path, "pages")) == 8


# Issue 27 case 18: a date-template job with no `to` (up to today). Today's page answered 404 when
# pass 1 ran and was published later that day: the open end of the range is asked again at the next
# pass 1, as stop_after_misses' misses are, so it is stored then; an older day's 404 stays final.
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
