"""Records from the Universal Feed Parser's own wellformed RSS and Atom cases carry the title, link
and date that the case's `Expect:` line names (../shared/corpus/feedparser)."""
from __future__ import annotations

import ast
import re
import time
from pathlib import Path

import feedparser
import pytest

from parser.adapters import feed
from parser.core.record import html_to_text, utc_iso
from parser.core.urls import canonical_url
from parser.settings.params import Source
from tests.conftest import corpus_dir

FOLDERS = ("rss", "rdf", "atom", "atom10")
FIELDS = ("title", "link", "published_parsed", "updated_parsed")
EXPECT = re.compile(rb"Expect:\s*(.*)")


def expectations(text: str) -> list[tuple[int, str, object]]:
    """(entry index, feedparser key, expected value) for each `entries[i]['key'] == constant` in an Expect."""
    found = []
    for node in ast.walk(ast.parse(text, mode="eval")):
        if not isinstance(node, ast.Compare) or not all(isinstance(op, ast.Eq) for op in node.ops):
            continue
        operands = [node.left, *node.comparators]
        constants = [o for o in operands if _literal(o) is not None]
        for operand in operands:
            key = _entry_key(operand)
            if key and constants:
                found.append((*key, _literal(constants[-1])))
    return found


def _entry_key(node: ast.AST) -> tuple[int, str] | None:
    if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Subscript)
            and isinstance(node.value.value, ast.Name) and node.value.value.id == "entries"):
        index, key = _literal(node.value.slice), _literal(node.slice)
        if isinstance(index, int) and key in FIELDS:
            return index, key
    return None


def _literal(node: ast.AST):
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def cases() -> list[Path]:
    try:
        root = corpus_dir("feedparser", "tests", "wellformed")
    except pytest.skip.Exception:
        return []
    files = []
    for folder in FOLDERS:
        for path in sorted((root / folder).glob("*.xml")):
            match = EXPECT.search(path.read_bytes()[:4000])
            if match and expectations_of(path):
                files.append(path)
    return files


def expectations_of(path: Path):
    match = EXPECT.search(path.read_bytes()[:4000])
    try:
        return expectations(match.group(1).decode("utf-8").strip())
    except (SyntaxError, UnicodeDecodeError):
        return []


CASES = cases()
SOURCE = Source(name="corpus", url="http://127.0.0.1/feed.xml")


def test_the_corpus_has_cases():
    if not CASES:
        pytest.skip("../shared/corpus/feedparser is absent")
    assert len(CASES) >= 40


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_record_carries_expected_title_link_and_date(path):
    body = path.read_bytes()
    records = feed.parse(body, url="http://127.0.0.1/feed.xml", headers={}, source=SOURCE,
                         fetched="2026-01-01T00:00:00Z").records
    reference = feedparser.parse(body)  # to know whether an entry has its own published date
    for index, key, expected in expectations_of(path):
        record = records[index]
        if key == "title":
            # Decoded once, by the type feedparser gives: HTML is read as text, plain text is kept as
            # its characters (an Atom 0.3 base64 title "Example <b>Atom</b>" is text/plain).
            kind = (reference.entries[index].get("title_detail") or {}).get("type", "")
            text = html_to_text(expected) if "html" in kind else " ".join(expected.split())
            assert record["title"] == text[:500]
        elif key == "link":
            assert record["link"] == canonical_url(expected)
        elif key == "published_parsed" or not reference.entries[index].get("published_parsed"):
            assert record["published"] == utc_iso(time.struct_time(expected))
