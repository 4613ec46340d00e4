"""sanitize.safe_html gives a value with no "<" and no "&" (text, no tag and no reference) the output nh3
would give it, without asking nh3: random text built from the characters html5ever treats apart (line
ends, NUL and other controls, ">", U+00A0, a byte order mark, lone surrogates, Unicode spaces)."""
from __future__ import annotations

import random

import pytest

from parser.adapters import sanitize
from parser.core.record import clean_text, safe_text

CHARACTERS = list("ab \t\n\r\x0b\x0c>\"'=/;#xX09") + [
    "\x00", "\x01", "\x1f", "\x7f", "\x80", "\x85", "\xa0", "\u00e9", "\u2028", "\ufeff", "\ufffe", "\uffff",
    "\U0001F600", "\ud800", "\udc80", "\u200b", "\u3000", "\xad"]


def through_nh3(value: str, base: str = "") -> str:
    """safe_html's output as nh3 makes it, for any value."""
    cleaner = sanitize._cleaner(base)
    try:
        cleaned = cleaner.clean(value)
    except UnicodeEncodeError:
        cleaned = cleaner.clean(safe_text(value))
    return clean_text(cleaned).strip()


def test_text_without_markup_comes_out_as_nh3_gives_it_on_random_text():
    rng = random.Random(7)
    checked = 0
    for _ in range(20000):
        value = "".join(rng.choice(CHARACTERS) for _ in range(rng.randint(1, 14)))
        assert sanitize.safe_html(value, "http://example.test/") == through_nh3(value, "http://example.test/"), value
        checked += not value.startswith("\ufeff")
    assert checked > 15000  # most of them took the path without nh3


@pytest.mark.parametrize("value", ["a > b", "non\xa0breaking", "line\r\nends\rhere", "\ufeffmark first",
                                   " \x00nul\x01 ", "lone \ud800 surrogate", "x" * 5000 + " > " + "\r" * 3])
def test_text_without_markup_keeps_nh3s_escaping(value):
    assert sanitize.safe_html(value) == through_nh3(value)
