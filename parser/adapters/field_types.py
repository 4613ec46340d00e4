"""A job's typed fields: the text a selector gave (parser/adapters/extract.py) as the value its column's
kind stores (db/schema.py), or a reason it is none.

- number: one number in the text, currency signs and words around it left out ("£51.77", "51.77 EUR",
  "-3.5 %"). Groups of three may be set off by spaces, apostrophes, commas or dots; the decimal mark is
  the last of a comma and a dot when both are there ("1,234.50" and "1.234,50" are 1234.5); a lone comma
  is a decimal comma ("12,5") unless three digits follow it after a non-zero number ("1,234" is 1234); a
  lone dot is a decimal point ("1.234" is 1.234). Two numbers ("£10 - £20", "3 for 2") are no number.
  The value is the number's plain text ("1234.50"), which the database reads as its own number type.
- date: parser/core/dates.read_date, as UTC ISO 8601 ('2024-05-20T08:30:00Z').
- list: each match of the selector (extract gives them a line each), as a JSON array.
- text: the text as it is.
An empty text (nothing matched) is '' (NULL in the table) for every type, and no error.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping

from ..core.dates import read_date

FIELD_TYPES = ("number", "date", "text", "list")
KIND_OF: Mapping[str, str] = {"number": "number", "date": "time", "text": "text", "list": "list"}

_NUMBER = re.compile(r"[-+\u2212]?\d[\d.,'\u00a0\u202f ]*")
_LOOSE_SPACE = re.compile(r"[\s'\u00a0\u202f]+(?!\d{3}(?:\D|$))")  # a space not before a group of three
_GROUPS = re.compile(r"^\d{1,3}(?:\d{3})*$")


class NotConvertedError(ValueError):
    """The text is no value of the field's type: str() says why, in a user's words."""


def convert(kind: str, text: str) -> str:
    """`text` as the staging cell of a field of type `kind`; raise NotConvertedError when it is none."""
    if not text or kind == "text":
        return text
    if kind == "number":
        return read_number(text)
    if kind == "date":
        iso = read_date(text).iso
        if not iso:
            raise NotConvertedError("is not a date")
        return iso
    if kind == "list":
        return json.dumps(text.split("\n"), ensure_ascii=False, separators=(",", ":"))
    raise ValueError(f"unknown field type {kind!r}")


def read_number(text: str) -> str:
    """The one number in `text` as plain text ('-1234.50'); NotConvertedError when there is none, or two."""
    found = [m for m in _NUMBER.finditer(text) if any(c.isdigit() for c in m.group())]
    if len(found) != 1:
        raise NotConvertedError("is not a number" if not found else "holds more than one number")
    raw = found[0].group().rstrip(".,'\u00a0\u202f ")
    if _LOOSE_SPACE.search(raw):  # "1 2" is two numbers, not twelve
        raise NotConvertedError("holds more than one number")
    sign = "-" if raw[0] in "-\u2212" else ""
    digits = re.sub(r"[\s'\u00a0\u202f]", "", raw.lstrip("+-\u2212"))
    if any(c.isdigit() for c in text[:found[0].start()] + text[found[0].end():]):
        raise NotConvertedError("holds more than one number")
    whole, fraction = _split(digits)
    if not _GROUPS.match(whole.replace(",", "").replace(".", "")) or not _grouped(whole):
        raise NotConvertedError("is not a number (digit groups of three expected)")
    whole = whole.replace(",", "").replace(".", "").lstrip("0") or "0"
    return f"{sign}{whole}.{fraction}" if fraction else f"{sign}{whole}"


def _split(digits: str) -> tuple[str, str]:
    """(whole part with its group marks, fraction digits) by the decimal mark rules above."""
    comma, dot = digits.rfind(","), digits.rfind(".")
    if comma >= 0 and dot >= 0:
        mark = max(comma, dot)
    elif digits.count(",") == 1:
        after = digits[comma + 1:]
        mark = -1 if len(after) == 3 and digits[:comma].strip("0") else comma
    elif digits.count(".") == 1:
        mark = dot
    else:
        mark = -1
    if mark < 0:
        return digits, ""
    fraction = digits[mark + 1:]
    if not fraction.isdigit():
        raise NotConvertedError("is not a number")
    return digits[:mark], fraction


def _grouped(whole: str) -> bool:
    """Group marks, when there are any, set off groups of three digits after a first of one to three."""
    parts = re.split(r"[.,]", whole)
    if len(parts) == 1:
        return whole.isdigit()
    return 1 <= len(parts[0]) <= 3 and all(len(p) == 3 and p.isdigit() for p in parts[1:]) and parts[0].isdigit()


def typed_values(types: Mapping[str, str], values: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The fields' texts with the declared ones converted; a text that does not convert is '' (NULL), with a
    line saying which field, its type and its text (the caller names the job and the link)."""
    out, warnings = dict(values), []
    for name, kind in types.items():
        text = out.get(name, "")
        try:
            out[name] = convert(kind, text)
        except NotConvertedError as exc:
            out[name] = ""
            shown = text if len(text) <= 200 else text[:200] + "..."
            warnings.append(f"field {name!r} ({kind}): {shown!r} {exc}; stored as NULL")
    return out, warnings
