"""Links whose query escapes are in a legacy charset (issue 27, case 4): `item.php?name=%82%A0` is
Shift_JIS for あ, and `%82%A2` for い. Both are stored as written, under keys of their own; every other
link keeps the key it had (hashes of earlier versions still match)."""
from __future__ import annotations

import pytest

from parser.core.record import record_hash
from parser.core.urls import canonical_url
from parser.pipeline.identity import Identity
from tests.feeds import BASE_TIME, rss

# Query values as servers in each charset write them: the same two words, two items.
LEGACY = {
    "shift_jis": ("%82%A0", "%82%A2"),   # あ, い
    "euc-kr": ("%B0%A1", "%B3%AA"),      # 가, 나
    "gbk": ("%C4%E3", "%BA%C3"),         # 你, 好
    "latin-1": ("caf%E9", "na%EFve"),    # café, naïve
}

# Keys as 04bfd87 computed them (UNIQUE_FIELDS "auto", HASH sha224): an upgrade must not move them.
KEPT_KEYS = {
    "https://blog.example/2024/05/post-1": "09e194a0fee8d6f005c7b6afeac301d6b7ee351a64724a03b2a5efe7",
    "http://Shop.Example:80/item.php?id=7&utm_source=x&b=2#top":
        "f37d746076e00a67a10a2b10d50def08abc530432d6d57d5bd42669a",
    "https://ja.example/%E8%A8%98%E4%BA%8B?q=%E3%81%82": "083150e0a5166a4ce6af0ad469e2515458dc385e02c9c5981c9c248a",
    "https://ja.example/記事?q=あ&fbclid=1": "083150e0a5166a4ce6af0ad469e2515458dc385e02c9c5981c9c248a",
    "http://news.example/a?x=a+b&y=%20&z=%7e": "d2b85840868460a32b6fd22f8e981af9402053ab4700f5b31c361822",
    "https://ex.example/café": "5f24dcef1e0a7ecbb778e2bb25d9af33eb5839733f2694d21df49868",
}


def keys(links: list[str]) -> list[str]:
    records = [{"source": "s", "link": canonical_url(u, exact=True), "guid": canonical_url(u, exact=True)}
               for u in links]
    return Identity("auto", "sha224").identify(records).keys


@pytest.mark.parametrize("charset", sorted(LEGACY))
def test_two_values_in_a_legacy_charset_are_two_links_kept_as_written(charset):
    first, second = (f"http://shop.example/item.php?name={v}&utm_source=feed" for v in LEGACY[charset])
    assert canonical_url(first) == f"http://shop.example/item.php?name={LEGACY[charset][0]}"
    assert canonical_url(first, exact=True) == f"http://shop.example/item.php?name={LEGACY[charset][0]}&utm_source=feed"
    assert len(set(keys([first]) + keys([second]))) == 2


def test_ordinary_and_utf8_links_keep_their_keys():
    for link, key in KEPT_KEYS.items():
        assert keys([link]) == [key], link
        assert record_hash({"link": canonical_url(link)}, ("link",), "sha224") == key


def test_the_next_days_item_in_shift_jis_is_stored_not_taken_for_a_duplicate(server, project):
    """The daemon end to end: day one's あ, then day two's い beside it; both rows, links as written."""
    def item(value: str, n: int) -> dict:
        return {"title": f"Item {n}", "link": f"http://shop.example/item.php?name={value}", "date": BASE_TIME,
                "description": f"item {n}"}
    a, i = LEGACY["shift_jis"]
    server.route("/feed.xml", body=rss([item(a, 1)]))
    project.write_params(SOURCES=[{"name": "shop", "url": server.url("/feed.xml")}])
    project.run("--once", check=True)
    server.route("/feed.xml", body=rss([item(i, 2), item(a, 1)]))
    project.run("--once", check=True)
    assert [r["link"] for r in project.rows()] == ["http://shop.example/item.php?name=%82%A0",
                                                   "http://shop.example/item.php?name=%82%A2"]
    assert "%EF%BF%BD" not in project.log()
