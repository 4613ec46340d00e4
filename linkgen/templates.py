"""URL templates: `http://site/item/{id}` over lists, number ranges and date ranges.

The links are the product of the values, in the template's placeholder order. Placeholders use
str.format, so a number can be padded (`{id:05d}`) and a date formatted (`{day:%Y/%m/%d}`).
A number range may be open-ended (no `to`) when the job sets stop_after_misses: it is walked
from its start and stops after that many consecutive misses (links that are not known good).
A date range without `to` runs up to today; its open end (open_end) is asked again at each pass 1,
since today's page may be published after pass 1 asked for it.
"""
from __future__ import annotations

import itertools
import string
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

PERIODS = ("day", "month")
MAX_LIST = 10_000_000  # values of a range counting down, held as a list (a job's own cap on links)


@dataclass(frozen=True)
class ListValues:
    items: tuple[str | int, ...]


@dataclass(frozen=True)
class NumberRange:
    start: int
    last: int | None  # inclusive; None: open-ended
    step: int = 1


@dataclass(frozen=True)
class DateRange:
    start: date
    last: date | None  # inclusive; None: up to today, whenever pass 1 runs
    by: str = "day"


Values = ListValues | NumberRange | DateRange


@dataclass(frozen=True)
class TemplateLink:
    url: str
    probe: bool = False  # a trailing miss of an open range: asked again when pass 1 runs again


def placeholders(template: str) -> list[str]:
    """The placeholder names of `template`, in order, each once; ValueError for a malformed one."""
    names: list[str] = []
    for _text, name, _spec, _conv in string.Formatter().parse(template):
        if name is None:
            continue
        if not name.isidentifier():
            raise ValueError(f"placeholder {{{name}}} must be a plain name like {{id}}")
        if name not in names:
            names.append(name)
    return names


def parse_values(raw: Any) -> Values:
    """One entry of a job's `values`: a list, a range(), or a dict with from/to (and step or by).

    ValueError says what is wrong with it.
    """
    if isinstance(raw, range):
        # bool() and [-1], not len(): len() of a range longer than a C integer raises OverflowError.
        if not raw:
            raise ValueError("the range is empty")
        if raw.step > 0:
            return NumberRange(raw.start, raw[-1], raw.step)
        if _range_length(raw.start, raw[-1], raw.step) > MAX_LIST:  # counting down is kept as a list
            raise ValueError(f"a range counting down holds at most {MAX_LIST:,} values")
        return ListValues(tuple(raw))
    if isinstance(raw, (list, tuple)):
        if not raw or not all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in raw):
            raise ValueError("a list must hold strings or whole numbers and not be empty")
        return ListValues(tuple(raw))
    if not isinstance(raw, Mapping):
        raise ValueError(f"must be a list, a range(...) or a dict with 'from', got {type(raw).__name__}")
    unknown = [k for k in raw if k not in ("from", "to", "step", "by")]
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (known: from, to, step, by)")
    if "from" not in raw:
        raise ValueError("a range needs 'from'")
    start = raw["from"]
    if isinstance(start, int) and not isinstance(start, bool):
        step = raw.get("step", 1)
        last = raw.get("to")
        if "by" in raw:
            raise ValueError("'by' is for date ranges; a number range takes 'step'")
        if not (isinstance(step, int) and not isinstance(step, bool) and step > 0):
            raise ValueError(f"step must be a whole number above 0, got {step!r}")
        if last is not None and (not isinstance(last, int) or isinstance(last, bool) or last < start):
            raise ValueError(f"'to' must be a whole number not below 'from', got {last!r}")
        return NumberRange(start, last, step)
    first = _date(start)
    if first is None:
        raise ValueError(f"'from' must be a whole number or a date ('2024-01-31'), got {start!r}")
    if "step" in raw:
        raise ValueError("a date range takes 'by' ('day' or 'month'), not 'step'")
    by = raw.get("by", "day")
    if by not in PERIODS:
        raise ValueError(f"'by' must be 'day' or 'month', got {by!r}")
    last = None
    if raw.get("to") is not None:
        last = _date(raw["to"])
        if last is None or last < first:
            raise ValueError(f"'to' must be a date not before 'from', got {raw['to']!r}")
    if by == "month":
        first = first.replace(day=1)
        last = last.replace(day=1) if last else None
    return DateRange(first, last, by)


def _date(value: Any) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            return None
    return None


def sequence(values: Values, today: date) -> Iterator[Any]:
    """The values of one placeholder in order (an open number range never ends)."""
    if isinstance(values, ListValues):
        yield from values.items
    elif isinstance(values, NumberRange):
        numbers = itertools.count(values.start, values.step)
        if values.last is None:
            yield from numbers
        else:
            yield from range(values.start, values.last + 1, values.step)
    else:
        day, last = values.start, values.last or today
        while day <= last:
            yield day
            day = _next_month(day) if values.by == "month" else date.fromordinal(day.toordinal() + 1)


def open_end(values: Mapping[str, Values], since: date, today: date) -> dict[str, Values] | None:
    """The values narrowed to the open end of a date range without `to`: the periods from `since`
    (the previous pass 1) up to today, the others as they are. Their links may have been asked
    before they were published. None when no date range is open or another range never ends."""
    narrowed = dict(values)
    for name, v in values.items():
        if isinstance(v, DateRange) and v.last is None:
            first = date(since.year, since.month, 1) if v.by == "month" else since
            if v.by == "month" and first <= v.start:
                first = v.start  # the range's first month counts from its own first day
            narrowed[name] = DateRange(max(v.start, first), today, v.by)
    if narrowed == dict(values) or count_links(narrowed, today) is None:
        return None
    return narrowed


def _next_month(day: date) -> date:
    return date(day.year + day.month // 12, day.month % 12 + 1, 1)


def count_links(values: Mapping[str, Values], today: date) -> int | None:
    """How many links a closed template gives (None when a range is open-ended)."""
    total = 1
    for v in values.values():
        if isinstance(v, ListValues):
            total *= len(v.items)
        elif isinstance(v, NumberRange):
            if v.last is None:
                return None
            total *= _range_length(v.start, v.last, v.step)
        else:
            last = v.last or today
            if v.by == "month":
                total *= max(0, (last.year - v.start.year) * 12 + last.month - v.start.month + 1)
            else:
                total *= max(0, last.toordinal() - v.start.toordinal() + 1)
    return total


def _range_length(start: int, last: int, step: int) -> int:
    """How many values range(start, last + 1, step) holds, for any size (len() stops at a C integer)."""
    return max(0, (last - start) // step + 1) if step > 0 else max(0, (start - last) // -step + 1)


def _combinations(names: list[str], values: Mapping[str, Values], today: date) -> Iterator[dict[str, Any]]:
    """The product of the values, lazily: itertools.product would hold every value list in memory."""
    if not names:
        yield {}
        return
    first, rest = names[0], names[1:]
    for value in sequence(values[first], today):
        for mapping in _combinations(rest, values, today):
            yield {first: value, **mapping}


def render(template: str, mapping: Mapping[str, Any]) -> str:
    return template.format(**mapping)


def expand_urls(template: str, values: Mapping[str, Values], *, today: date) -> Iterator[str]:
    """Every link of a closed template, as plain strings, lazily: the innermost placeholder is walked
    in a plain loop over one reused mapping (a template of ten million links spends its time here)."""
    names = list(values)
    if not names:
        yield template.format()
        return
    *outer, last = names
    fmt = template.format
    for mapping in _combinations(outer, values, today):
        mapping = dict(mapping)
        for value in sequence(values[last], today):
            mapping[last] = value
            yield fmt(**mapping)


def expand(template: str, values: Mapping[str, Values], *, today: date,
           stop_after_misses: int | None = None,
           is_good: Callable[[str], bool] | None = None) -> Iterator[TemplateLink]:
    """Every link of the template. With stop_after_misses, the one number range is walked for each
    combination of the other values and stops after that many links in a row that `is_good` (pass 2
    fetched them) does not confirm; run again after pass 2 to go further."""
    names = list(values)
    if stop_after_misses is None:
        yield from map(TemplateLink, expand_urls(template, values, today=today))
        return
    walked, walked_range = next((n, v) for n, v in values.items() if isinstance(v, NumberRange))
    others = [n for n in names if n != walked]
    open_ended = walked_range.last is None
    good = is_good or (lambda _url: False)
    for mapping in _combinations(others, values, today):
        unconfirmed: list[str] = []
        for number in sequence(values[walked], today):
            url = render(template, {**mapping, walked: number})
            unconfirmed.append(url)
            if good(url):
                yield from (TemplateLink(u) for u in unconfirmed)
                unconfirmed = []
            elif len(unconfirmed) >= stop_after_misses:
                break
        yield from (TemplateLink(u, probe=open_ended) for u in unconfirmed)
