"""URL templates: lists, number and date ranges, open ranges with stop_after_misses, and how LINK_JOBS
settings are checked (messages that name the job and the key)."""
from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from linkgen.templates import DateRange, ListValues, NumberRange, count_links, expand, parse_values, placeholders
from parser.core.errors import SettingsError
from parser.settings.params import settings_from_dict

TODAY = date(2024, 3, 5)
FIELDS = {"title": "//h1/text()"}


def urls(template, values, **kwargs):
    return [link.url for link in expand(template, values, today=TODAY, **kwargs)]


def test_product_of_lists_and_ranges_in_placeholder_order():
    values = {"cat": parse_values(["books", "music"]), "id": parse_values(range(1, 4))}
    assert urls("http://s/{cat}/{id}", values) == [
        "http://s/books/1", "http://s/books/2", "http://s/books/3",
        "http://s/music/1", "http://s/music/2", "http://s/music/3"]
    assert count_links(values, TODAY) == 6


def test_number_range_dict_is_inclusive_with_step_and_padding():
    values = {"id": parse_values({"from": 5, "to": 11, "step": 3})}
    assert values["id"] == NumberRange(5, 11, 3)
    assert urls("http://s/item/{id:04d}.html", values) == [
        "http://s/item/0005.html", "http://s/item/0008.html", "http://s/item/0011.html"]


def test_date_range_by_day_crosses_month_and_leap_day():
    values = {"day": parse_values({"from": "2024-02-27", "to": "2024-03-01"})}
    assert urls("http://s/archive/{day:%Y/%m/%d}/", values) == [
        "http://s/archive/2024/02/27/", "http://s/archive/2024/02/28/",
        "http://s/archive/2024/02/29/", "http://s/archive/2024/03/01/"]


def test_date_range_by_month_runs_to_today_when_open():
    values = {"month": parse_values({"from": date(2023, 11, 20), "by": "month"})}
    assert values["month"] == DateRange(date(2023, 11, 1), None, "month")
    assert urls("http://s/{month:%Y-%m}", values) == [
        "http://s/2023-11", "http://s/2023-12", "http://s/2024-01", "http://s/2024-02", "http://s/2024-03"]
    assert count_links(values, TODAY) == 5


def test_open_range_walks_until_k_links_in_a_row_are_not_confirmed():
    values = {"id": parse_values({"from": 1})}
    good = {f"http://s/{n}" for n in (1, 2, 3, 5)}  # 4 is a gap, 6.. do not exist
    made = list(expand("http://s/{id}", values, today=TODAY, stop_after_misses=3, is_good=good.__contains__))
    assert [m.url for m in made] == [f"http://s/{n}" for n in range(1, 9)]
    # The three after the last good one end the walk; they are probes, asked again on a later pass 1.
    assert [m.url for m in made if m.probe] == ["http://s/6", "http://s/7", "http://s/8"]


def test_open_range_with_nothing_confirmed_yet_gives_the_first_window():
    values = {"id": parse_values({"from": 10, "step": 10})}
    assert urls("http://s/{id}", values, stop_after_misses=2) == ["http://s/10", "http://s/20"]


def test_stop_after_misses_walks_each_combination_of_the_other_values():
    values = {"cat": parse_values(["a", "b"]), "id": parse_values({"from": 1, "to": 100})}
    good = {"http://s/a/1", "http://s/a/2", "http://s/b/1"}
    made = urls("http://s/{cat}/{id}", values, stop_after_misses=1, is_good=good.__contains__)
    assert made == ["http://s/a/1", "http://s/a/2", "http://s/a/3", "http://s/b/1", "http://s/b/2"]


@pytest.mark.parametrize("raw, message", [
    ([], "not be empty"),
    ([1.5], "strings or whole numbers"),
    (range(3, 3), "empty"),
    ({"to": 3}, "needs 'from'"),
    ({"from": 1, "step": 0}, "step must be a whole number above 0"),
    ({"from": 5, "to": 1}, "'to' must be a whole number not below 'from'"),
    ({"from": "2024-13-01"}, "'from' must be a whole number or a date"),
    ({"from": "2024-01-01", "by": "week"}, "'by' must be 'day' or 'month'"),
    ({"from": "2024-01-01", "step": 2}, "takes 'by'"),
    ({"from": 1, "upto": 3}, "unknown key 'upto'"),
    ("1-10", "must be a list, a range(...) or a dict"),
])
def test_bad_values_say_what_is_wrong(raw, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_values(raw)


def test_placeholders_in_order_and_refuses_attribute_access():
    assert placeholders("http://s/{b}/{a:03d}/{b}") == ["b", "a"]
    with pytest.raises(ValueError, match="plain name"):
        placeholders("http://s/{a.__class__}")
    assert parse_values(("x", 2)) == ListValues(("x", 2))


# -- LINK_JOBS settings ------------------------------------------------------------------------------

def load(jobs) -> object:
    return settings_from_dict({"LINK_JOBS": jobs}, Path("/tmp/params.py"))


def problems(jobs) -> str:
    with pytest.raises(SettingsError) as info:
        load(jobs)
    return str(info.value)


def test_a_valid_template_job_becomes_a_frozen_link_job():
    settings = load([{"name": "pages", "template": "http://s/item/{id}", "values": {"id": range(1, 11)},
                      "fields": FIELDS, "delay": 0.5}])
    (job,) = settings.link_jobs
    assert job.name == "pages" and job.values["id"] == NumberRange(1, 10, 1)
    assert job.columns == ("url", "fetched", "title") and job.unique_fields == ("url",)
    assert job.delay == 0.5 and job.interval == 86400
    with pytest.raises(AttributeError):
        job.name = "other"


def test_a_harvest_job_defaults_to_the_roots_host():
    (job,) = load([{"name": "shop", "harvest": {"root": "http://Shop.example/"}, "objects": r"/item/\d+",
                    "fields": FIELDS}]).link_jobs
    assert job.harvest.allowed_domains == ("shop.example",)
    assert (job.harvest.depth, job.harvest.max_pages, job.harvest.follow) == (3, 1000, "")


@pytest.mark.parametrize("job, message", [
    ({"name": "x", "fields": FIELDS}, "LINK_JOBS[0] ('x'): needs exactly one of 'template'"),
    ({"name": "Bad-Name", "template": "http://s/{id}", "values": {"id": [1]}, "fields": FIELDS},
     "name must be a table name"),
    ({"name": "items", "template": "http://s/{id}", "values": {"id": [1]}, "fields": FIELDS}, "feeds' table"),
    ({"name": "x", "template": "http://s/{id}", "values": {"id": [1]}, "fields": {"title": "//h1["}},
     "LINK_JOBS[0] ('x'): fields['title'] is not a valid XPath"),
    ({"name": "x", "template": "http://s/{id}", "values": {"id": [1]}, "fields": {"t": "css:h1..a"}},
     "fields['t'] is not a valid CSS selector"),
    ({"name": "x", "template": "http://s/{id}", "values": {"id": [1]}, "fields": {"url": "//a"}},
     "'url' is filled by the parser itself"),
    ({"name": "x", "template": "http://s/{id}", "values": {}, "fields": FIELDS},
     "values has no entry for the template's placeholder {id}"),
    ({"name": "x", "template": "http://s/{id}", "values": {"id": [1], "page": [2]}, "fields": FIELDS},
     "values['page'] is not used by the template"),
    ({"name": "x", "template": "http://s/{id}", "values": {"id": {"from": 1}}, "fields": FIELDS},
     "values['id'] has no 'to': an open-ended range needs stop_after_misses"),
    ({"name": "x", "template": "http://s/{c}", "values": {"c": ["a"]}, "stop_after_misses": 3, "fields": FIELDS},
     "stop_after_misses needs exactly one number range in values, found 0"),
    ({"name": "x", "template": "ftp://s/{id}", "values": {"id": [1]}, "fields": FIELDS}, "must give http(s) URLs"),
    ({"name": "x", "template": "http://s/{id}", "values": {"id": {"from": 1, "to": 10**8}}, "fields": FIELDS},
     "more than 10,000,000"),
    ({"name": "x", "template": "http://s/{id}", "values": {"id": [1]}, "fields": FIELDS, "intervall": 5},
     "unknown key 'intervall', did you mean 'interval'?"),
    ({"name": "x", "template": "http://s/{id}", "values": {"id": [1]}, "fields": FIELDS, "delay": -1},
     "delay must be a number of seconds, 0 or more"),
    ({"name": "x", "template": "http://s/{id}", "values": {"id": [1]}, "fields": FIELDS,
      "unique_fields": ["price"]}, "unique_fields must be a non-empty list of columns (url, fetched, title)"),
    ({"name": "x", "harvest": {"root": "http://s/"}, "fields": FIELDS}, "needs 'objects'"),
    ({"name": "x", "harvest": {"root": "http://s/", "depth": 0}, "objects": "/i/", "fields": FIELDS},
     "harvest: depth must be a whole number, 1 or more"),
    ({"name": "x", "harvest": {"root": "http://s/", "follow": "("}, "objects": "/i/", "fields": FIELDS},
     "harvest: follow is not a valid regex"),
    ({"name": "x", "harvest": {"root": "http://s/", "allowed_domains": ["http://s"]}, "objects": "/i/",
      "fields": FIELDS}, "allowed_domains must be a non-empty list of host names"),
    ({"name": "x", "harvest": {"root": "mailto:a@b"}, "objects": "/i/", "fields": FIELDS},
     "harvest: root must be an http(s) URL"),
])
def test_bad_jobs_are_reported_with_the_job_and_the_key(job, message):
    assert message in problems([job])


def test_duplicate_job_names_are_refused():
    job = {"name": "x", "template": "http://s/{id}", "values": {"id": [1]}, "fields": FIELDS}
    assert "LINK_JOBS[1] ('x'): duplicate job name 'x'" in problems([job, job])
