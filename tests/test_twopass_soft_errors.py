"""Pass 2 and the soft error: a site that answers 200 with a maintenance or "not found" page for an
object's address. A page where no field of the job matched is a miss, not an object: not stored, a
line in errors.log, the link asked again like after a 5xx, and a miss for stop_after_misses, so an
open range over a site that answers 200 for every id ends. A page where some fields matched is an
object (partial pages are real). End to end against tests/server.py, as a user would see it.
"""
from __future__ import annotations

import pytest

from tests.shop import HARVEST_FIELDS, Shop, page

MAINTENANCE = (b"<!DOCTYPE html><html><head><title>Down for maintenance</title></head><body>"
               b"<h1>We'll be back soon</h1><p>The shop is being updated.</p></body></html>")


@pytest.fixture
def shop(server) -> Shop:
    return Shop(server)


def template_job(server, values, **extra) -> dict:
    return {"name": "pages", "template": server.url("/item/{id}"), "values": {"id": values},
            "fields": HARVEST_FIELDS, **extra}


def last_status(project, url: str) -> str:
    lines = (project.staging / "jobs" / "pages" / "links.status").read_text(encoding="utf-8").splitlines()
    return [line.split("\t") for line in lines if line.count("\t") >= 3 and line.split("\t")[3] == url][-1][1]


def names(project) -> list[str]:
    return sorted(r["name"] for r in project.rows("pages"))


def test_a_maintenance_page_is_not_stored_and_the_object_is_fetched_when_the_site_is_back(server, shop, project):
    server.route("/item/2", body=MAINTENANCE, content_type="text/html")
    project.write_params(LINK_JOBS=[template_job(server, [1, 2, 3])])
    project.run("--once", check=True)

    # Item 3 has no price: a partial page, still an object. Item 2 is the maintenance page: no row.
    assert names(project) == ["Item 1", "Item 3"]
    url = server.url("/item/2")
    assert (f"pages  {url}  no field matched (name, price): looks like an error or maintenance page, not stored "
            "(if every page says so, check the job's fields); attempt 1 of 4, asked again later") \
        in project.log("errors.log")
    assert last_status(project, url) == "retry"
    passes = [r for r in project.rows("runs") if r["source"] == "pages"]  # 3 fetched, 2 new, 1 failed (to retry)
    assert [(r["entries"], r["new"], r["error"]) for r in passes] == \
        [(3, 2, "1 of 3 links failed (errors.log names each)")]
    assert "1 where no field matched" in project.log()  # counted nowhere else

    shop.add_item(2)  # the site is back; --once asks a link to retry again at once
    project.run("--once", check=True)
    assert names(project) == ["Item 1", "Item 2", "Item 3"]
    assert last_status(project, url) == "done"
    assert shop.item_hits() == {"/item/1": 1, "/item/2": 2, "/item/3": 1}


def test_an_open_range_ends_on_a_site_that_answers_200_for_every_id(server, shop, project):
    # Items 1-8 exist; every other id gets the shop's page frame with no object in it, and a 200.
    server.route("/item/*", content_type="text/html", body=page("No such item", ["/", "/list/1"]))
    project.write_params(LINK_JOBS=[template_job(server, {"from": 1}, stop_after_misses=3)])
    proc = project.run("--once", timeout=30)
    assert proc.returncode == 0, proc.stderr

    assert names(project) == [f"Item {n}" for n in range(1, 9)]
    assert shop.item_hits() == {f"/item/{n}": 1 for n in range(1, 12)}  # 9, 10, 11 missed: stop before 12
    errors = project.log("errors.log")
    assert [n for n in range(1, 14) if f"{server.url(f'/item/{n}')}  no field matched" in errors] == [9, 10, 11]


def test_the_misses_that_ended_an_open_range_are_asked_again_after_they_were_given_up(server, shop, project):
    server.route("/item/*", content_type="text/html", body=page("No such item", ["/"]))
    project.write_params(LINK_JOBS=[template_job(server, {"from": 7}, stop_after_misses=2)])
    project.run("--once", timeout=30, check=True)
    assert last_status(project, server.url("/item/9")) == "retry"
    # Three more runs would miss them three more times and give them up: their lines say so now.
    status = project.staging / "jobs" / "pages" / "links.status"
    misses = [line for line in status.read_text(encoding="utf-8").splitlines(keepends=True) if "\tretry\t1\t" in line]
    assert len(misses) == 2
    with status.open("a", encoding="utf-8") as f:
        f.writelines(line.replace("\tretry\t1\t", "\tdead\t4\t") for line in misses)

    shop.add_item(9)
    project.run("--once", timeout=30, check=True)  # pass 1 asks the end of the range again: 9 is there now
    assert names(project) == ["Item 7", "Item 8", "Item 9"]
    assert server.hits["/item/10"] == 2 and server.hits["/item/11"] == 1
    assert "2 misses at the end of the range asked again" in project.log()
