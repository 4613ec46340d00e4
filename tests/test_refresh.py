"""Issue 26 point 6: objects that change. A job's `refresh` fetches a done object again after that long,
with its ETag (a conditional GET); a changed object updates its row (`changed` set), an unchanged one
waits twice as long next time (up to 8x), a 404/410 at two visits in a row marks the row `gone` and keeps
it. The link file of 0.5.1 still loads, its done links due again."""
from __future__ import annotations

import re
import shutil
from datetime import datetime
from pathlib import Path

from linkgen.linkfile import LinkFile, Mark
from tests.process import stop, wait_for

FIXTURE_051 = Path(__file__).parent / "upgrade" / "fixtures_051" / "sqlite" / "staging" / "jobs" / "shop"


def product(price: str) -> bytes:
    return (f"<html><body><h1 class='name'>Teapot</h1><p class='price'>£{price}</p>"
            "<a href='/'>home</a></body></html>").encode()


def shop_job(server, refresh: str = "1s", **extra) -> dict:
    return {"name": "shop", "template": server.url("/item/{n}"), "values": {"n": [1]}, "refresh": refresh,
            "fields": {"name": "css:h1.name::text", "price": {"select": "css:p.price::text", "type": "number"}},
            **extra}


def the_row(project) -> dict | None:
    rows = project.rows("shop")
    assert len(rows) <= 1, rows  # an update changes the row; it never adds one
    return rows[0] if rows else None


def test_a_price_changed_at_the_source_updates_its_row_at_the_next_visit(server, project):
    route = server.route("/item/1", body=product("51.77"), content_type="text/html", etag='"v1"')
    project.write_params(LINK_JOBS=[shop_job(server)], FLUSH_INTERVAL=1)
    proc = project.start()
    try:
        wait_for(lambda: (the_row(project) or {}).get("price") == 51.77, "the first visit's row")
        first = the_row(project)
        assert first["changed"] is None
        route.body, route.etag = product("49.00"), '"v2"'  # the shop lowers its price
        wait_for(lambda: the_row(project)["price"] == 49.0, "the row updated after refresh", timeout=30)
    finally:
        stop(proc)
    row = the_row(project)
    assert row["id"] == first["id"] and row["fetched"] == first["fetched"]  # the same row, first seen then
    assert row["changed"] is not None and row["changed"] >= first["fetched"]
    assert row["gone"] is None
    revisits = [headers for path, headers in server.requests if path == "/item/1"][1:]
    assert revisits and revisits[0].get("If-None-Match") == '"v1"'  # asked conditionally
    assert sum(changed for _, _, changed in project.polls("shop")) == 1  # the one price change, in the runs table


def test_an_unchanged_object_waits_twice_as_long_at_each_visit(server, project):
    server.route("/item/1", body=product("10.00"), content_type="text/html", etag='"same"')
    project.write_params(LINK_JOBS=[shop_job(server)], FLUSH_INTERVAL=1)
    proc = project.start()
    try:
        wait_for(lambda: server.hits.get("/item/1", 0) >= 4, "three revisits", timeout=40)
    finally:
        stop(proc)
    times = [at for at, path in server.times if path == "/item/1"]
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    # After each 304 the wait doubles: refresh (1 s), then 2 s, then 4 s; a visit is never early.
    assert gaps[0] >= 1.0 and gaps[1] >= 2.0 and gaps[2] >= 4.0, gaps
    assert all(h.get("If-None-Match") == '"same"' for p, h in server.requests[1:] if p == "/item/1")
    waits = [line.split("\t")[9] for line in (project.staging / "jobs" / "shop" / "links.status").read_text()
             .splitlines() if not line.startswith("#")]
    assert waits[:4] == ["1", "2", "4", "8"]
    assert the_row(project)["changed"] is None  # a 304 is no change


def test_a_page_gone_at_two_visits_in_a_row_marks_its_row_gone_and_keeps_it(server, project):
    route = server.route("/item/1", body=product("5.00"), content_type="text/html")
    project.write_params(LINK_JOBS=[shop_job(server)], FLUSH_INTERVAL=1)
    proc = project.start()
    try:
        wait_for(lambda: the_row(project) is not None, "the first visit's row")
        route.status, route.body = 404, b"no such product"
        wait_for(lambda: the_row(project)["gone"] is not None, "the row marked gone", timeout=30)
        hits = server.hits["/item/1"]
    finally:
        stop(proc)
    row = the_row(project)
    assert (row["name"], row["price"]) == ("Teapot", 5.0)  # kept as it was, never deleted
    assert hits == 3  # the first visit, and two 404s in a row
    errors = project.log("errors.log")
    assert "asked once more before its row is marked gone" in errors
    assert "gone at two visits in a row" in errors
    assert server.hits["/item/1"] == 3  # gone is final: not asked again
    # pass 2's lines: every revisit in one bucket (changed, unchanged, missing, rows gone, failed), the
    # buckets adding up to the number revisited; the two 404s among them.
    said = [line.split("revisited ", 1)[1].split(";")[0] for line in project.log().splitlines() if "revisited " in line]
    tallies = [(int(text.split(":")[0]), sum(map(int, re.findall(r"(\d+) [a-z]", text.split(":", 1)[1]))))
               for text in said]
    assert tallies and all(revisited == buckets for revisited, buckets in tallies), said
    assert sum(revisited for revisited, _ in tallies) == 2


def harvest_shop(server) -> dict:
    """A shop whose home page lists /item/1 and has an <h1 class='name'> of its own, and a harvest job of it
    with `refresh` whose objects are /item/N."""
    server.route("/", content_type="text/html", body=b"<html><body><h1 class='name'>Acme Shop</h1>"
                                                    b"<a href='/item/1'>teapot</a></body></html>")
    return {"name": "shop", "harvest": {"root": server.url("/")}, "objects": r"/item/\d+$", "refresh": "1s",
            "fields": {"name": "css:h1.name::text", "price": {"select": "css:p.price::text", "type": "number"}}}


def test_a_product_redirected_to_the_home_page_keeps_its_row_and_is_marked_gone(server, project):
    route = server.route("/item/1", body=product("5.00"), content_type="text/html")
    project.write_params(LINK_JOBS=[harvest_shop(server)], FLUSH_INTERVAL=1)
    proc = project.start()
    try:
        wait_for(lambda: the_row(project) is not None, "the first visit's row")
        route.status, route.body, route.headers = 301, b"", {"Location": "/"}  # the shop dropped the product
        wait_for(lambda: the_row(project)["gone"] is not None, "the row marked gone", timeout=30)
        hits = server.hits["/item/1"]
    finally:
        stop(proc)
    row = the_row(project)
    assert (row["name"], row["price"], row["changed"]) == ("Teapot", 5.0, None)  # the home page is not the object
    assert hits == 3  # the first visit, and two redirects in a row
    errors = project.log("errors.log")
    said = f"redirected to {server.url('/')}, which the job's objects pattern does not match"
    assert errors.count(said) == 2, errors
    assert "gone at two visits in a row" in errors


def test_a_link_redirected_to_the_home_page_at_its_first_visit_stores_nothing(server, project):
    server.route("/item/1", status=302, headers={"Location": "/"})
    project.write_params(LINK_JOBS=[harvest_shop(server)])
    proc = project.run("--once")
    assert proc.returncode == 0, proc.stderr
    assert project.rows("shop") == []  # not a row "Acme Shop" with no price
    said = f"redirected to {server.url('/')}, which the job's objects pattern does not match"
    assert said in project.log("errors.log")
    tried = project.run("try", "shop", server.url("/item/1"))  # `try` says so too, as pass 2 would
    assert tried.returncode == 1 and said in tried.stderr, (tried.stdout, tried.stderr)


def test_a_single_404_between_visits_does_not_mark_the_row_gone(tmp_path):
    clock = [1000.0]
    links = LinkFile(tmp_path, "shop", clock=lambda: clock[0], refresh=10)
    links.add_template(["http://127.0.0.1/item/1"])
    links.mark([Mark("http://127.0.0.1/item/1", "done", index=0, etag='"a"', digest="d1")])
    clock[0] += 12
    assert [i for i, _ in links.pending()] == [0]
    links.mark([Mark("http://127.0.0.1/item/1", "missed", "HTTP 404", 0, '"a"')])
    clock[0] += 12
    assert [i for i, _ in links.pending()] == [0]
    links.mark([Mark("http://127.0.0.1/item/1", "revisited", index=0, etag='"b"', digest="d2")])  # back
    clock[0] += 12
    assert [i for i, _ in links.pending()] == [0]
    links.mark([Mark("http://127.0.0.1/item/1", "missed", "HTTP 404", 0, '"b"')])
    assert links.status_at(0) == "done"  # the misses were not in a row
    links.close()


def test_a_051_link_file_loads_and_its_done_links_come_due_after_refresh(tmp_path):
    folder = tmp_path / "shop"
    shutil.copytree(FIXTURE_051, folder)
    before = (folder / "links.status").read_bytes()
    done_at = max(datetime.fromisoformat(line.split("\t")[0]).timestamp()
                  for line in before.decode().splitlines() if "\tdone\t" in line)
    clock = [done_at + 60]
    links = LinkFile(folder, "shop", clock=lambda: clock[0], refresh=3600)
    done = links.counts()["done"]
    assert done > 0 and not list(links.pending(hand_out=False))  # none due an hour before refresh ends
    clock[0] = done_at + 3602
    handed = list(links.pending())  # (index, url): the links a revisit fetches
    due = [index for index, _url in handed]
    assert len(due) == done
    assert links.revisit(due[0]).wait == 1 and links.revisit(due[0]).etag == ""  # 0.5.1 kept no validators
    links.mark([Mark(url, "same", "unchanged", index, '"e"') for index, url in handed])
    links.close()
    assert (folder / "links.status").read_bytes().startswith(before)  # appended to, never rewritten
    again = LinkFile(folder, "shop", clock=lambda: clock[0], refresh=3600)
    assert again.revisit(due[0]).wait == 2 and again.revisit(due[0]).etag == '"e"'
    assert not list(again.pending(hand_out=False))
    again.close()
    without = LinkFile(folder, "shop", clock=lambda: clock[0] + 10**6)  # a job without refresh
    assert not list(without.pending()) and without.revisit(0) is None
    without.close()


def test_bad_refresh_and_updates_fail_at_start_naming_the_setting(server, project):
    for job, said in ((shop_job(server, refresh="soon"), "refresh must be a time with its unit"),
                      (shop_job(server, refresh=-5), "refresh must be a number of seconds above 0"),
                      (shop_job(server, updates="always"), "updates must be one of 'update', 'history', 'ignore'")):
        project.write_params(LINK_JOBS=[job])
        proc = project.run("--once")
        assert proc.returncode == 2, proc.stderr
        assert "LINK_JOBS[0] ('shop')" in proc.stderr and said in proc.stderr, proc.stderr
        assert not project.rows("shop")


def test_postgresql_a_changed_price_updates_the_row_and_two_404s_mark_it_gone(server, project, pg_url):
    import psycopg

    def row() -> tuple | None:
        with psycopg.connect(pg_url) as con:
            found = con.execute("SELECT to_regclass('shop')").fetchone()[0]
            rows = con.execute("SELECT price, changed, gone FROM shop").fetchall() if found else []
        assert len(rows) <= 1, rows
        return rows[0] if rows else None

    route = server.route("/item/1", body=product("51.77"), content_type="text/html", etag='"v1"')
    project.write_params(LINK_JOBS=[shop_job(server)], FLUSH_INTERVAL=1,
                         DB_URL=pg_url.replace("postgresql://", "postgresql+psycopg://"))
    proc = project.start()
    try:
        wait_for(lambda: row() is not None, "the first visit's row")
        route.body, route.etag = product("49.00"), '"v2"'
        wait_for(lambda: row()[0] == 49.0, "the row updated after refresh")
        route.status, route.etag = 404, None
        wait_for(lambda: row()[2] is not None, "the row marked gone")
    finally:
        stop(proc)
    price, changed, gone = row()
    assert price == 49.0 and changed is not None and gone >= changed  # timestamptz both
