"""Object pages: fields by XPath and CSS, stripped text, empty fields, page links, and the safe parser
(no entities, no network, no huge trees, nothing that is not HTML)."""
from __future__ import annotations

import pytest

from parser.adapters.extract import blank_values, compile_selector, extract_fields
from parser.core.errors import ParseError
from parser.fetch import pages
from parser.fetch.pages import page_links, parse_html
from tests.conftest import Project
from tests.server import LoopbackServer

PRODUCT = """<!DOCTYPE html>
<html><head><title>Shop</title></head><body>
  <div class="product_main">
    <h1>  A Light in the
        Attic  </h1>
    <p class="price_color">£51.77</p>
    <p class="instock availability"><i class="icon-ok"></i>
        In stock (22 available)
    </p>
    <ul class="tags"><li>poetry</li><li> classics </li><li>   </li></ul>
    <a class="cover" href="/media/cover.jpg">cover</a>
  </div>
</body></html>"""


def fields(html: str | bytes, selectors: dict[str, str], content_type: str = "text/html; charset=utf-8"):
    body = html.encode("utf-8") if isinstance(html, str) else html
    doc = parse_html(body, content_type=content_type)
    return extract_fields(doc, {k: compile_selector(v) for k, v in selectors.items()})


def test_xpath_and_css_fields_are_stripped_text():
    got = fields(PRODUCT, {
        "title": "//div[@class='product_main']/h1",
        "price": "css:p.price_color::text",
        "stock": "css:.product_main .availability",
        "tags": "css:ul.tags li",
        "cover": "css:a.cover::attr(href)",
        "tag_count": "count(//ul[@class='tags']/li)",
    })
    assert got.values == {"title": "A Light in the Attic", "price": "£51.77", "stock": "In stock (22 available)",
                          "tags": "poetry\nclassics", "cover": "/media/cover.jpg", "tag_count": "3"}
    assert got.empty == []


def test_a_field_that_matches_nothing_is_empty_and_reported():
    got = fields(PRODUCT, {"title": "//h1", "isbn": "//td[@class='isbn']", "blank": "css:ul.tags li:last-child"})
    assert got.values["isbn"] == "" and got.values["blank"] == ""
    assert got.empty == ["isbn", "blank"]


def test_a_field_matched_only_where_the_page_gave_it_what_a_blank_page_does_not():
    # A constant, a count() and a boolean() have a value on any page, an error page's too: only a
    # value that differs from a blank page's shows the page is the object.
    selectors = {k: compile_selector(v) for k, v in {
        "title": "//div[@class='product_main']/h1", "tags": "count(//ul[@class='tags']/li)",
        "in_stock": "boolean(//p[contains(@class, 'instock')])", "shop": "'My shop'",
        "price": "concat('Price: ', //p[@class='price_color'])"}.items()}
    blank = blank_values(selectors)
    assert blank == {"title": "", "tags": "0", "in_stock": "false", "shop": "My shop", "price": "Price:"}
    product = extract_fields(parse_html(PRODUCT.encode()), selectors, blank)
    assert product.matched == ["title", "tags", "in_stock", "price"]
    maintenance = parse_html(b"<html><head><title>Maintenance</title></head><body><h1>Back soon</h1>"
                             b"<ul class='tags'></ul></body></html>")
    assert extract_fields(maintenance, selectors, blank).matched == []
    partial = parse_html(b"<div class='product_main'><h1>Only a title</h1></div>")
    assert extract_fields(partial, selectors, blank).matched == ["title"]


def test_entities_are_not_expanded_and_external_entities_never_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    page = f"""<?xml version="1.0"?>
<!DOCTYPE html [
  <!ENTITY xxe SYSTEM "file://{secret}">
  <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
  <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
  <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
]>
<html><body><h1>x&xxe;y</h1><p>&c;</p><p class="ok">caf&eacute; &amp; bar</p></body></html>"""
    got = fields(page, {"h1": "//h1", "p": "//p[1]", "ok": "//p[@class='ok']"}, "application/xhtml+xml")
    assert "SECRET" not in got.values["h1"]
    assert len(got.values["p"]) < 100  # no "billion laughs"
    assert got.values["ok"] == "café & bar"  # HTML's own entities are still text


def test_too_deep_a_tree_is_refused_not_silently_cut():
    with pytest.raises(ParseError, match="nesting deeper than a real page"):
        parse_html(b"<html><body>" + b"<div>" * 5000 + b"x", content_type="text/html")


def test_too_many_elements_are_refused(monkeypatch):
    monkeypatch.setattr(pages, "MAX_ELEMENTS", 1000)
    with pytest.raises(ParseError, match="more than 1,000 elements"):
        parse_html(b"<html><body>" + b"<p>x</p>" * 2000, content_type="text/html")


@pytest.mark.parametrize("content_type, body, message", [
    ("application/pdf", b"%PDF-1.4", "not an HTML page: application/pdf"),
    ("application/json", b'{"a": 1}', "not an HTML page: application/json"),
    ("text/html", b"   \n", "empty body"),
])
def test_what_is_not_an_html_page_is_a_parse_error(content_type, body, message):
    with pytest.raises(ParseError, match=message):
        parse_html(body, content_type=content_type)


def test_charset_from_the_header_or_the_meta_tag():
    cyrillic = "<html><head><meta charset='windows-1251'></head><body><h1>Привет</h1></body></html>"
    assert fields(cyrillic.encode("cp1251"), {"h1": "//h1"}, "text/html").values["h1"] == "Привет"
    koi = "<html><body><h1>Привет</h1></body></html>".encode("koi8-r")
    assert fields(koi, {"h1": "//h1"}, "text/html; charset=koi8-r").values["h1"] == "Привет"


def test_page_links_are_absolute_http_only_and_once_each():
    page = parse_html(b"""<html><head><base href="http://shop.test/catalogue/"></head><body>
        <a href="book_1/index.html">1</a> <a href="book_1/index.html">again</a>
        <a href="../index.html">home</a> <a href="#top">top</a> <a href="">empty</a>
        <a href="mailto:a@b.c">mail</a> <a href="javascript:alert(1)">js</a> <a href=" tel:+1 ">tel</a>
        <a href="ftp://shop.test/x">ftp</a> <a href="data:text/html,hi">data</a>
        <a href="//cdn.test/x.html">cdn</a> <map><area href="/area.html"></map>
        <link href="/style.css"><img src="/pic.png"></body></html>""", content_type="text/html")
    assert page_links(page, "http://shop.test/index.html") == [
        "http://shop.test/catalogue/book_1/index.html", "http://shop.test/index.html",
        "http://cdn.test/x.html", "http://shop.test/area.html"]


@pytest.mark.parametrize("selector", ["", "   ", "//h1[", "css:h1..x", "css:::text"])
def test_bad_selectors_are_refused(selector):
    with pytest.raises(ValueError):
        compile_selector(selector)


def test_a_text_node_over_libxml2s_limit_is_read_whole_with_the_fields_after_it():
    # libxml2 without huge_tree stops at 10,000,000 characters in one text node and drops the rest.
    text = "y" * 10_200_000
    got = fields(f"<html><body><div>{text}</div><h2>after</h2></body></html>", {"big": "//div", "after": "//h2"})
    assert got.values == {"big": text, "after": "after"}
    with pytest.raises(ParseError, match="nesting deeper"):  # depth stays capped
        parse_html(b"<html><body>" + b"<div>" * 5000 + b"</body></html>", content_type="text/html")


# Pass 2 does not glue the words on either side of a <br> or a block.
def item_page(n: int) -> bytes:
    return (f"<html><body><h1>Item {n}</h1><div class='desc'>Item number {n}.<br>Second line"
            f"<p>Third</p><ul><li>one</li><li>two</li></ul></div>"
            f"<table class='spec'><tr><td>Weight</td><td>2 kg</td></tr></table></body></html>").encode()


def test_pass_2_puts_a_space_where_a_br_or_a_block_parts_words(server: LoopbackServer, project: Project):
    for n in (1, 2):
        server.route(f"/item/{n}", body=item_page(n), content_type="text/html; charset=utf-8")
    job = {"name": "pages", "template": server.url("/item/{id}"), "values": {"id": {"from": 1, "to": 2}},
           "fields": {"name": "//h1/text()", "desc": "css:div.desc", "spec": "css:table.spec"}}
    project.write_params(LINK_JOBS=[job])
    project.run("--once", "--job", "pages", check=True)
    rows = sorted(project.rows("pages"), key=lambda r: r["name"])
    assert [r["desc"] for r in rows] == [f"Item number {n}. Second line Third one two" for n in (1, 2)]
    assert [r["spec"] for r in rows] == ["Weight 2 kg", "Weight 2 kg"]
