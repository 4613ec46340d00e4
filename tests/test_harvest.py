"""The recursive harvest (pass 1) against a shop on 127.0.0.1: robots.txt, allowed domains, schemes,
depth and max_pages bounds, failing pages, Crawl-delay, and resuming a run cut short."""
from __future__ import annotations

import threading
from urllib.parse import urlsplit

import pytest

from linkgen.harvest import Harvest, PageResult, fetch_harvest_page, in_domains
from linkgen.politeness import HostSlots, Robots, host_key
from linkgen.spec import HarvestSpec
from parser.fetch.http import Fetcher
from tests.server import reply
from tests.shop import HARVEST_FIELDS, Shop, page

OBJECTS = r"/item/\d+$"


@pytest.fixture
def shop(server) -> Shop:
    return Shop(server)


@pytest.fixture
def fetcher():
    f = Fetcher(user_agent="parser-test/1.0", timeout=5, deadline=10, max_bytes=1 << 20, max_redirects=3, per_host=4)
    yield f
    f.close()


def harvest_job(server, **harvest) -> dict:
    return {"name": "shop", "harvest": {"root": server.url("/"), "follow": r"/(list|calendar)/", **harvest},
            "objects": OBJECTS, "fields": HARVEST_FIELDS}


def link_lines(project, job: str = "shop") -> list[list[str]]:
    text = (project.staging / "jobs" / job / "links.txt").read_text(encoding="utf-8")
    return [line.split("\t") for line in text.splitlines() if not line.startswith("#")]


def test_harvest_keeps_to_robots_domains_schemes_and_depth(server, shop, project):
    project.write_params(LINK_JOBS=[harvest_job(server, depth=3)])
    proc = project.run("--once", "--links-only")
    assert proc.returncode == 0, proc.stderr

    lines = link_lines(project)
    base = server.url("")
    found = {url[len(base):]: (depth, origin[len(base):]) for url, depth, origin in lines}
    assert found == {
        "/item/1": ("1", "/"),  # from "/item/1?utm_source=feed#reviews", made canonical
        "/item/2": ("2", "/list/1"), "/item/3": ("2", "/list/1"), "/item/4": ("2", "/list/1"),
        "/item/404": ("2", "/list/1"),
        "/item/5": ("3", "/list/2"), "/item/6": ("3", "/list/2"), "/item/7": ("3", "/list/2"),
        "/item/8": ("3", "/list/2"),
    }
    assert len(lines) == len(found)  # each link once
    for url, _depth, _origin in lines:  # never another host, never another scheme
        parts = urlsplit(url)
        assert parts.scheme == "http" and parts.hostname == "127.0.0.1", url
    assert shop.hosts_seen() == {f"127.0.0.1:{server.port}"}  # localhost:port is the same server, not allowed
    hits = server.hits
    assert hits.get("/private/list") is None and hits.get("/private/item/9") is None  # robots.txt
    assert hits.get("/about") is None                 # not matched by follow
    assert hits.get("/list/3") is None                 # three hops away: its links would be too far
    assert hits.get("/calendar/2024-03") is None and hits.get("/calendar/2024-02") == 1  # endless, cut by depth
    assert shop.item_hits() == {}                      # pass 1 only: no object fetched
    assert hits["/robots.txt"] == 1
    run, pages = project.harvest_pages("shop")
    assert (run, len(pages), set(pages.values()), len(lines)) == (1, 5, {"ok"}, 9)  # 5 pages, none failed; 9 links
    assert project.rows("shop") == []


def test_endless_calendar_stops_at_max_pages(server, shop, project):
    project.write_params(LINK_JOBS=[harvest_job(server, depth=1000, max_pages=12, follow="/calendar/")])
    project.run("--once", "--links-only", check=True)
    calendar_pages = [p for p in server.hits if p.startswith("/calendar/")]
    assert len(calendar_pages) == 11  # the root and 11 months: 12 pages
    assert all(n == 1 for p, n in server.hits.items() if p.startswith("/calendar/"))
    assert len(link_lines(project)) == 1
    assert "stopped at max_pages (12)" in project.log()  # why the harvest ended, as the operator reads it


def test_a_failing_page_is_logged_and_the_harvest_goes_on(server, shop, project):
    server.route("/calendar/2024-01", status=500, body=b"oops", content_type="text/plain")
    server.route("/list/2", status=200, body=b"%PDF-1.4 not a page", content_type="application/pdf")
    project.write_params(LINK_JOBS=[harvest_job(server, depth=3)])
    project.run("--once", "--links-only", check=True)
    errors = project.log("errors.log")
    assert f"shop  {server.url('/calendar/2024-01')}  harvest: HTTP 500 Internal Server Error" in errors
    assert f"shop  {server.url('/list/2')}  harvest: not an HTML page: application/pdf" in errors
    assert len(link_lines(project)) == 5  # /item/1..4 and /item/404, as before
    _, pages = project.harvest_pages("shop")
    assert len(pages) == 4 and {url for url, outcome in pages.items() if outcome != "ok"} == \
        {server.url("/calendar/2024-01"), server.url("/list/2")}  # 4 pages fetched, 2 failed


def test_a_rerun_of_pass_1_adds_only_new_links(server, shop, project):
    project.write_params(LINK_JOBS=[harvest_job(server, depth=3)])
    project.run("--once", "--links-only", check=True)
    before = link_lines(project)
    shop.add_item(42, on_list=1)
    project.run("--once", "--links-only", check=True)
    after = link_lines(project)
    assert after[:len(before)] == before
    assert [line[0] for line in after[len(before):]] == [server.url("/item/42")]
    run, pages = project.harvest_pages("shop")
    assert (run, len(pages), set(pages.values()), len(after)) == (2, 5, {"ok"}, 10)  # 5 pages, none failed


def test_unreadable_robots_txt_keeps_the_harvest_off_the_host(server, shop, project):
    server.route("/robots.txt", status=503, body=b"busy", content_type="text/plain")
    project.write_params(LINK_JOBS=[harvest_job(server)])
    project.run("--once", "--links-only", check=True)
    assert "robots.txt could not be read (HTTP 503 Service Unavailable)" in project.log("errors.log")
    assert set(server.hits) == {"/robots.txt"}


def test_fetch_harvest_page_sorts_links_and_drops_what_it_must_not_follow(server, shop, fetcher):
    spec = HarvestSpec(root=server.url("/"), objects=OBJECTS, depth=3, follow="", allowed_domains=("127.0.0.1",))
    robots = Robots(fetcher, "parser-test/1.0")
    result = fetch_harvest_page(server.url("/"), 0, spec, fetcher=fetcher, host_slots=HostSlots(), robots=robots,
                                delay=0)
    assert result.error is None
    assert result.objects == [server.url("/item/1")]
    assert result.pages == [server.url("/list/1"), server.url("/calendar/2024-01"), server.url("/about")]
    assert result.skipped == {"robots": 1, "offsite": 2}  # /private/list; example.org and localhost


def test_a_redirect_out_of_the_allowed_domains_is_not_expanded(server, fetcher):
    server.route("/robots.txt", status=404)
    server.route("/", status=302, headers={"Location": f"http://localhost:{server.port}/elsewhere"})
    server.route("/elsewhere", content_type="text/html", body=page("x", ["/item/1"]))
    spec = HarvestSpec(root=server.url("/"), objects=OBJECTS, allowed_domains=("127.0.0.1",))
    result = fetch_harvest_page(server.url("/"), 0, spec, fetcher=fetcher, host_slots=HostSlots(),
                        robots=Robots(fetcher, "t"), delay=0)
    assert "leaves the allowed domains; not followed" in result.error and result.objects == []
    assert "/elsewhere" not in server.hits  # the redirect was refused before it was requested


def test_pass_2_does_not_follow_an_object_redirect_out_of_the_allowed_domains(server, project):
    server.route("/robots.txt", status=404)
    server.route("/", content_type="text/html", body=page("root", ["/item/1", "/item/2"]))
    server.route("/item/1", content_type="text/html", body=page("Object one", [], body="<h1>Object one</h1>"))
    server.route("/item/2", status=301, headers={"Location": f"http://localhost:{server.port}/item/1"})
    project.write_params(LINK_JOBS=[{"name": "shop", "harvest": {"root": server.url("/"), "depth": 1},
                                     "objects": OBJECTS, "fields": {"title": "//h1"}}])
    project.run("--once", check=True)
    assert [r["url"] for r in project.rows("shop")] == [server.url("/item/1")]
    assert server.hits["/item/1"] == 1  # fetched as itself, never through the redirect
    assert "item/2" in project.log("errors.log") and "leaves the allowed domains" in project.log("errors.log")


def test_crawl_delay_is_read_and_spaces_requests_to_one_host(server, fetcher):
    server.route("/robots.txt", body=b"User-agent: *\nCrawl-delay: 2.5\nDisallow: /x/\n", content_type="text/plain")
    robots = Robots(fetcher, "parser-test/1.0")
    assert robots.crawl_delay(server.url("/a")) == 2.5
    assert not robots.allowed(server.url("/x/1")) and robots.allowed(server.url("/y"))
    assert server.hits["/robots.txt"] == 1  # fetched once per host

    now = [100.0]
    host_slots = HostSlots(clock=lambda: now[0])
    waits = [host_slots.reserve("http://a.test/1", 2.5) for _ in range(3)]
    assert waits == [0.0, 2.5, 5.0]  # three workers asking at once go one delay apart
    assert host_slots.reserve("http://b.test/1", 2.5) == 0.0  # another host is not held up
    now[0] = 110.0
    assert host_slots.reserve("http://a.test/2", 2.5) == 0.0


def test_host_slots_wait_gives_up_when_the_daemon_stops():
    stop = threading.Event()
    stop.set()
    host_slots = HostSlots(stop=stop)
    host_slots.reserve("http://a.test/", 30)
    with pytest.raises(Exception, match="stopping"):
        host_slots.wait("http://a.test/", 30)


def test_a_harvest_cut_short_resumes_where_it_stopped(tmp_path):
    spec = HarvestSpec(root="http://s.test/", objects=OBJECTS, depth=3, allowed_domains=("s.test",))
    clock = lambda: 1_700_000_000.0  # noqa: E731
    first = Harvest(tmp_path, "j", spec, clock=clock)
    first.start(links_now=0)
    assert first.take(10) == [("http://s.test/", 0)]
    first.record(PageResult(url="http://s.test/", depth=0, pages=["http://s.test/a", "http://s.test/b"]))
    assert first.take(1) == [("http://s.test/a", 1)]
    first.record(PageResult(url="http://s.test/a", depth=1, pages=["http://s.test/c"]))
    # Only level 1 is served until it is done: /c (level 2) waits for /b.
    assert first.take(10) == [("http://s.test/b", 1)]
    first.close()  # killed with /b in flight

    again = Harvest(tmp_path, "j", spec, clock=clock)
    assert again.active and again.run == 1 and again.pages_done == 2
    assert again.take(10) == [("http://s.test/b", 1)]
    again.record(PageResult(url="http://s.test/b", depth=1, error="HTTP 500"))
    assert again.take(10) == [("http://s.test/c", 2)]
    again.record(PageResult(url="http://s.test/c", depth=2))
    assert again.finished() and again.failed == 1
    again.end("done")
    assert not Harvest(tmp_path, "j", spec, clock=clock).active


def test_in_domains_accepts_subdomains_only():
    assert in_domains("http://shop.test/x", ("shop.test",))
    assert in_domains("http://www.shop.test/x", ("shop.test",))
    assert not in_domains("http://evilshop.test/x", ("shop.test",))
    assert not in_domains("http://shop.test.evil/x", ("shop.test",))


def test_a_level_of_50000_pages_costs_a_host_check_per_page_taken_not_per_page_queued(tmp_path):
    """The queue is not rescanned at each step: taking a page looks at that page alone, whatever
    waits behind it (the old take() asked about every page of the level at every step)."""
    spec = HarvestSpec(root="http://s.test/", objects=OBJECTS, depth=3, allowed_domains=("s.test",),
                       max_pages=60_000)
    harvest = Harvest(tmp_path, "j", spec, clock=lambda: 1_700_000_000.0)
    harvest.start(links_now=0)
    assert harvest.take(10) == [("http://s.test/", 0)]
    pages = [f"http://s.test/list/{n}" for n in range(50_000)]
    harvest.record(PageResult(url="http://s.test/", depth=0, pages=pages))
    asked = []

    def held_for(host: str) -> float:
        asked.append(host)
        return 0.0

    taken = []
    for _ in range(200):
        batch = harvest.take(2, held_for=held_for)
        taken += batch
        for url, depth in batch:
            harvest.record(PageResult(url=url, depth=depth))
    assert [u for u, _ in taken] == pages[:400] and all(d == 1 for _, d in taken)
    assert len(asked) <= 2 * len(taken)
    assert harvest.waiting == 50_000 - 400 and not harvest.finished()


def test_a_held_host_keeps_its_pages_back_without_holding_up_the_others(tmp_path):
    spec = HarvestSpec(root="http://s.test/", objects=OBJECTS, depth=3, allowed_domains=("s.test",))
    harvest = Harvest(tmp_path, "j", spec, clock=lambda: 1_700_000_000.0)
    harvest.start(links_now=0)
    harvest.take(1)
    pages = ["http://a.s.test/1", "http://b.s.test/1", "http://a.s.test/2", "http://b.s.test/2"]
    harvest.record(PageResult(url="http://s.test/", depth=0, pages=pages))
    held = {host_key("http://a.s.test/")}
    hold = lambda host: 5.0 if host in held else 0.0  # noqa: E731
    assert harvest.take(10, held_for=hold) == [("http://b.s.test/1", 1), ("http://b.s.test/2", 1)]
    assert harvest.level_waiting(hold) == ["http://a.s.test/1"]
    held.clear()  # the hold ends: the held host's pages come back, in their order
    assert harvest.take(10, held_for=hold) == [("http://a.s.test/1", 1), ("http://a.s.test/2", 1)]


@pytest.mark.slow  # the root page's 50,000 links are each parsed, made canonical and checked against robots.txt
def test_a_root_page_with_50000_follow_links_is_harvested_through_the_daemon(server, project):
    follow = 50_000
    server.route("/", body=("<html><body>" + "".join(f'<a href="/list/{n}">{n}</a>' for n in range(follow))
                            + '<a href="/item/root">on the root</a></body></html>').encode(),
                 content_type="text/html")

    def list_page(h) -> None:
        n = h.path.rsplit("/", 1)[1]
        reply(h, 200, f'<html><body><a href="/item/{n}">item {n}</a></body></html>'.encode(),
              {"Content-Type": "text/html"})

    server.route("/list/*", handler=list_page)
    project.write_params(LINK_JOBS=[{"name": "shop", "objects": r"/item/\w+$", "fields": HARVEST_FIELDS,
                                     "harvest": {"root": server.url("/"), "follow": "/list/", "max_pages": 150}}],
                         CONCURRENCY=8, PER_HOST=8)
    run = project.run("--once", "--links-only")
    assert run.returncode == 0, run.stderr
    lines = link_lines(project)
    # The root's object link, then one object on each of the 149 listing pages max_pages let it expand.
    assert len(lines) == 150
    assert {line[0] for line in lines} == {server.url("/item/root")} | {server.url(f"/item/{n}") for n in range(149)}
    _, pages = project.harvest_pages("shop")
    assert len(pages) == 150 and set(pages.values()) == {"ok"}
    assert "stopped at max_pages (150)" in project.log()  # why the harvest ended, as the operator reads it
