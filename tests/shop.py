"""A small shop served on 127.0.0.1 for the two-pass tests: listings, object pages, a robots.txt that
disallows a folder, an endless calendar, links that must not be followed, and missing pages.

    shop = Shop(server)          # routes added to a LoopbackServer
    shop.add_item(9, on_list=2)  # a new object appears on listing 2

Objects are /item/<n> with <h1 class="name"> and <span class="price"> (item 3 has no price).
"""
from __future__ import annotations

from html import escape
from urllib.parse import urlsplit

from tests.server import LoopbackServer, reply

HARVEST_FIELDS = {"name": "//h1[@class='name']/text()", "price": "css:span.price::text"}


def page(title: str, links: list[str], body: str = "") -> bytes:
    items = "".join(f'<li><a href="{escape(href)}">{escape(href)}</a></li>' for href in links)
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{escape(title)}</title></head>"
            f"<body>{body}<ul>{items}</ul></body></html>").encode()


def item_page(n: int, *, price: bool = True) -> bytes:
    price_html = f'<span class="price"> {n}.99 </span>' if price else ""
    return (f"<html><body><h1 class='name'>\n  Item {n}\n</h1>{price_html}"
            f"<a href='/list/1'>back</a><a href='/item/{n + 100}'>related</a></body></html>").encode()


class Shop:
    def __init__(self, server: LoopbackServer, *, items_per_list: int = 4, lists: int = 2, item_delay: float = 0.0):
        self.server = server
        self.item_delay = item_delay
        self.lists: dict[int, list[str]] = {}
        port = server.port
        server.route("/robots.txt", body=b"User-agent: *\nDisallow: /private/\n", content_type="text/plain")
        server.route("/", content_type="text/html", body=page("Shop", [
            "/list/1", "/calendar/2024-01", "/private/list", "/item/1?utm_source=feed#reviews",
            "mailto:shop@example.com", "javascript:void(0)", "tel:+15550100", "ftp://127.0.0.1/item/7",
            "http://example.org/item/500", f"http://localhost:{port}/item/6", "/about"]))
        server.route("/about", content_type="text/html", body=page("About", ["/item/77"]))
        server.route("/private/list", content_type="text/html", body=page("Private", ["/item/99"]))
        server.route("/private/item/9", content_type="text/html", body=item_page(9))
        n = 1
        for number in range(1, lists + 1):
            self.lists[number] = [f"/item/{i}" for i in range(n, n + items_per_list)]
            n += items_per_list
        self.lists[1].append("/item/404")          # listed, but missing: 404
        self.lists[lists].append("/private/item/9")  # disallowed by robots.txt
        for number in self.lists:
            self._route_list(number)
        for i in range(1, n):
            self.add_item(i)
        server.route("/calendar/*", handler=self._calendar)

    def _route_list(self, number: int) -> None:
        links = [*self.lists[number], f"/list/{number + 1}"]  # the last one's next page is missing
        self.server.route(f"/list/{number}", content_type="text/html", body=page(f"List {number}", links))

    def add_item(self, n: int, *, on_list: int | None = None) -> None:
        self.server.route(f"/item/{n}", content_type="text/html", body=item_page(n, price=n != 3),
                          delay=self.item_delay)
        if on_list is not None:
            self.lists[on_list].append(f"/item/{n}")
            self._route_list(on_list)

    @staticmethod
    def _calendar(h) -> None:
        """An endless calendar: every month links to the next one, for ever."""
        year, month = (int(x) for x in urlsplit(h.path).path.rsplit("/", 1)[1].split("-"))
        nxt = f"{year + month // 12}-{month % 12 + 1:02d}"
        body = page(f"{year}-{month:02d}", [f"/calendar/{nxt}"])
        reply(h, 200, body, {"Content-Type": "text/html"})

    def hosts_seen(self) -> set[str]:
        return {headers.get("Host", "") for _path, headers in self.server.requests}

    def item_hits(self) -> dict[str, int]:
        return {path: n for path, n in self.server.hits.items() if path.startswith("/item/")}
