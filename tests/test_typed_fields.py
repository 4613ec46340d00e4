"""Issue 26 point 3, a job's typed fields: `{"select": ..., "type": "number" | "date" | "text" | "list"}` gives
a typed column (REAL / double precision, ISO text / timestamptz, JSON text / jsonb); a value that does not
convert is NULL with an errors.log line naming the job, the field, the link and the value; a plain string
field stays text. An unknown type fails at start naming the field."""
from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest

from parser.adapters.field_types import NotConvertedError, read_number
from tests.feeds import rss


def product(price: str, when: str, tags: list[str]) -> bytes:
    items = "".join(f"<li class='tag'>{t}</li>" for t in tags)
    return (f"<html><body><h1>Teapot</h1><p class='price'>{price}</p><time>{when}</time><ul>{items}</ul>"
            f"<p class='sku'>00123</p></body></html>").encode()


def typed_job(server) -> dict:
    return {"name": "shop", "template": server.url("/item/{n}"), "values": {"n": [1, 2, 3]},
            "fields": {"name": "css:h1::text", "sku": "css:p.sku::text",
                       "price": {"select": "css:p.price::text", "type": "number"},
                       "listed": {"select": "css:time::text", "type": "date"},
                       "tags": {"select": "css:li.tag::text", "type": "list"},
                       "label": {"select": "css:h1::text", "type": "text"}}}


def serve(server) -> None:
    server.route("/item/1", content_type="text/html",
                 body=product("£51.77", "20 May 2024 10:30 +0200", ["tea", "pots"]))
    server.route("/item/2", content_type="text/html", body=product("1.234,50 €", "2024-06-01", ["sale"]))
    server.route("/item/3", content_type="text/html", body=product("call us", "someday", []))


def by_url(rows: list[dict]) -> dict[str, dict]:
    return {row["url"].rsplit("/", 1)[1]: row for row in rows}


def test_typed_fields_are_typed_columns_in_sqlite(server, project):
    serve(server)
    project.write_params(LINK_JOBS=[typed_job(server)])
    project.run("--once", check=True)
    con = sqlite3.connect(project.db_path)
    try:
        declared = {row[1]: row[2] for row in con.execute("PRAGMA table_info(shop)")}
        stored = {row[0]: row[1:] for row in con.execute(
            "SELECT url, typeof(price), typeof(listed), json_array_length(tags), typeof(sku) FROM shop")}
    finally:
        con.close()
    assert (declared["price"], declared["sku"], declared["label"]) == ("REAL", "TEXT", "TEXT")
    rows = by_url(project.rows("shop"))
    assert (rows["1"]["price"], rows["2"]["price"], rows["3"]["price"]) == (51.77, 1234.5, None)
    assert (rows["1"]["listed"], rows["2"]["listed"], rows["3"]["listed"]) == \
        ("2024-05-20T08:30:00Z", "2024-06-01T00:00:00Z", None)
    assert (rows["1"]["tags"], rows["2"]["tags"], rows["3"]["tags"]) == ('["tea","pots"]', '["sale"]', None)
    assert rows["1"]["sku"] == "00123"  # a plain string field stays text: its leading zeros kept
    assert stored[server.url("/item/1")] == ("real", "text", 2, "text")
    errors = project.log("errors.log")
    assert f"shop  {server.url('/item/3')}  field 'price' (number): 'call us' is not a number; stored as NULL" \
        in errors
    assert f"shop  {server.url('/item/3')}  field 'listed' (date): 'someday' is not a date; stored as NULL" in errors
    assert errors.count("stored as NULL") == 2  # the empty list is no error: nothing matched


def test_typed_fields_are_typed_columns_in_postgresql(server, project, pg_url):
    import psycopg
    serve(server)
    project.write_params(LINK_JOBS=[typed_job(server)], DB_URL=pg_url.replace("postgresql://", "postgresql+psycopg://"))
    project.run("--once", check=True)
    with psycopg.connect(pg_url) as con:
        types = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                                 "WHERE table_name = 'shop'").fetchall())
        rows = {url.rsplit("/", 1)[1]: rest for url, *rest in
                con.execute("SELECT url, price, listed, tags, sku, label FROM shop").fetchall()}
    assert (types["price"], types["listed"], types["tags"], types["sku"]) == \
        ("double precision", "timestamp with time zone", "jsonb", "text")
    assert rows["1"] == [51.77, datetime(2024, 5, 20, 8, 30, tzinfo=UTC), ["tea", "pots"], "00123", "Teapot"]
    assert rows["2"][:3] == [1234.5, datetime(2024, 6, 1, tzinfo=UTC), ["sale"]]
    assert rows["3"][:3] == [None, None, None]
    assert "field 'price' (number): 'call us' is not a number" in project.log("errors.log")


def test_an_unknown_type_fails_at_start_naming_the_field(server, project):
    job = typed_job(server)
    job["fields"]["price"] = {"select": "css:p.price::text", "type": "money"}
    project.write_params(LINK_JOBS=[job])
    proc = project.run("--once")
    assert proc.returncode == 2
    assert "LINK_JOBS[0] ('shop'): fields['price']: type must be one of 'number', 'date', 'text', 'list', " \
           "got 'money'" in proc.stderr
    job["fields"]["price"] = {"selector": "css:p.price::text", "type": "number"}
    project.write_params(LINK_JOBS=[job])
    proc = project.run("--once")
    assert proc.returncode == 2 and "fields['price']: unknown key 'selector', did you mean 'select'?" in proc.stderr


@pytest.mark.parametrize(("text", "number"), [
    ("£51.77", "51.77"), ("1,234.50", "1234.50"), ("1.234,50", "1234.50"), ("12,5", "12.5"), ("1,234", "1234"),
    ("1.234", "1.234"), ("$1 234 567.5", "1234567.5"), ("-3.5 %", "-3.5"), ("51.77 EUR", "51.77"),
    ("1\u00a0234,5", "1234.5"), ("1.234.567", "1234567"), ("0,500", "0.500"), ("€ 0.99", "0.99")])
def test_the_numbers_a_price_field_reads(text, number):
    assert read_number(text) == number


@pytest.mark.parametrize("text", ["call us", "£10 - £20", "3 for 2", "1,23,4", "12.34.5", "1 2"])
def test_what_is_no_number(text):
    with pytest.raises(NotConvertedError):
        read_number(text)


def notice(n: int) -> bytes:
    return (f"<html><body><h1>Notice {n}</h1><p class='on'>Published on {n} March 2024</p>"
            f"<p class='in'>Tea, pots</p><p class='rev'>rev. {n}</p><p class='at'>2024-03-0{n}</p>"
            "</body></html>").encode()


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_a_jobs_fields_named_like_the_feeds_typed_columns_are_text_unless_the_job_types_them(
        server, project, database, request):
    """`published`, `updated`, `categories` and `enclosures` are times and lists in the feeds' table; in a
    job's table they are the job's own fields, text unless the job says a type (`updated` here)."""
    for n in (1, 2, 3):
        server.route(f"/notice/{n}", content_type="text/html", body=notice(n))
    fields = {"title": "css:h1::text", "published": "css:p.on::text", "categories": "css:p.in::text",
              "enclosures": "css:p.rev::text", "updated": {"select": "css:p.at::text", "type": "date"}}
    job = {"name": "notices", "template": server.url("/notice/{n}"), "values": {"n": [1, 2, 3]}, "fields": fields}
    pg = request.getfixturevalue("pg_url") if database == "postgresql" else None
    db_url = pg.replace("postgresql://", "postgresql+psycopg://") if pg else "sqlite:///db/items.db"
    project.write_params(LINK_JOBS=[job], DB_URL=db_url)
    project.run("--once", check=True)
    query = "SELECT url, published, categories, enclosures, updated FROM notices ORDER BY url"
    if pg:
        import psycopg
        with psycopg.connect(pg) as con:
            rows = [(url, *rest) for url, *rest in con.execute(query).fetchall()]
    else:
        con = sqlite3.connect(project.db_path)
        try:
            rows = con.execute(query).fetchall()
        finally:
            con.close()
    updated = [datetime(2024, 3, n, tzinfo=UTC) if pg else f"2024-03-0{n}T00:00:00Z" for n in (1, 2, 3)]
    assert rows == [(server.url(f"/notice/{n}"), f"Published on {n} March 2024", "Tea, pots", f"rev. {n}",
                     updated[n - 1]) for n in (1, 2, 3)]
    assert not (project.staging / "quarantine.jsonl").exists()  # no record set aside


# Issue 27 case 14: a `published` column a user altered to timestamptz (as docs/design.md says is honoured)
# takes undated entries: what an entry lacks is NULL on the way in, never '' that the cast refuses and
# sends the records to quarantine (0 of 5 were stored).
@pytest.mark.postgres
def test_undated_entries_go_into_a_users_timestamptz_column(server, project, pg_url):
    import psycopg
    undated = [{"title": f"Undated {n}", "link": f"http://example.com/u/{n}"} for n in range(5)]
    server.route("/feed.xml", body=rss(undated[:1]))
    project.write_params(DB_URL=pg_url, SOURCES=[{"name": "u", "url": server.url("/feed.xml")}])
    project.run("--once", check=True)  # the table made; then the user's own change of a column's type
    with psycopg.connect(pg_url) as con:
        con.execute("ALTER TABLE items ALTER COLUMN published TYPE timestamptz "
                    "USING NULLIF(published::text, '')::timestamptz")
    server.route("/feed.xml", body=rss(undated))
    project.run("--once", check=True)
    with psycopg.connect(pg_url) as con:
        rows = con.execute("SELECT title, published FROM items ORDER BY id").fetchall()
    assert rows == [(f"Undated {n}", None) for n in (0, 1, 2, 3, 4)]
    assert not (project.staging / "quarantine.jsonl").exists()
