"""Real feeds in legacy encodings (../shared/corpus/chardet, the folder name is the encoding), served
from 127.0.0.1 with and without a charset in Content-Type, through one --once: the stored titles must
be the characters Python reads from the raw file with the folder's codec."""
from __future__ import annotations

import re
import sqlite3
import unicodedata
from pathlib import Path

import lxml.etree
import lxml.html
import pytest

from tests.conftest import CORPUS, Project
from tests.server import LoopbackServer

# corpus folder -> the Python codec its name means
FOLDERS = {"KOI8-R": "koi8_r", "windows-1251-russian": "cp1251", "GB2312": "gb2312", "Big5": "big5",
           "SHIFT_JIS": "shift_jis"}
# how each copy is served: its own charset, none, and a server default that contradicts the file
SERVED = {"with": "application/rss+xml; charset={codec}", "without": "application/rss+xml",
          "latin1-default": "text/xml; charset=ISO-8859-1"}
_SPACES = re.compile(r"\s+")
_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")


def feed_files(folder: str) -> list[Path]:
    """The feeds of a folder (it also holds an HTML page and text samples)."""
    return [p for p in sorted((CORPUS / "chardet" / "tests" / folder).glob("*.xml"))
            if re.search(rb"<(rss|feed|rdf:RDF)[\s>]", p.read_bytes()[:4096])]


def normal(text: str) -> str:
    """What the parser keeps of a title: text without tags, whitespace collapsed."""
    if "<" in text or "&" in text:
        text = lxml.html.fragment_fromstring(text, create_parent="div").text_content()
    return unicodedata.normalize("NFC", _SPACES.sub(" ", text).strip())


def expected_titles(path: Path, codec: str) -> set[str]:
    """Entry titles, decoded by Python with the folder's codec and read by lxml (no parser code of ours)."""
    text = _DECLARATION.sub("", path.read_bytes().decode(codec))
    parser = lxml.etree.XMLParser(recover=True, resolve_entities=False, no_network=True)
    root = lxml.etree.fromstring(text.encode("utf-8"), parser)
    titles = set()
    for entry in root.iter():
        if isinstance(entry.tag, str) and lxml.etree.QName(entry).localname in ("item", "entry"):
            for child in entry:
                if isinstance(child.tag, str) and lxml.etree.QName(child).localname == "title":
                    titles.add(normal("".join(child.itertext())))
    return titles - {""}


@pytest.fixture(scope="module")
def encoded(tmp_path_factory):
    if not (CORPUS / "chardet" / "tests").is_dir():
        pytest.skip(f"corpus folder {CORPUS / 'chardet'} is absent (set PARSER_CORPUS to its location)")
    server = LoopbackServer().start()
    sources = []
    for folder, codec in FOLDERS.items():
        for path in feed_files(folder):
            body = path.read_bytes()
            for served, content_type in SERVED.items():
                route = f"/{folder}/{served}/{path.name}"
                content_type = content_type.format(codec=codec)
                server.route(route, body=body, content_type=content_type)
                sources.append({"name": f"{folder}|{served}|{path.name}", "url": server.url(route)})
    project = Project(tmp_path_factory.mktemp("encodings"))
    # Each served copy stores its own rows; MAX_ITEMS high enough for every entry of these feeds.
    project.write_params(SOURCES=sources, UNIQUE_FIELDS=["source", "link", "title"], MAX_ITEMS=1000,
                         PER_HOST=8, FLUSH_INTERVAL=3600)
    try:
        proc = project.run("--once", timeout=300)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr
    con = sqlite3.connect(project.db_path)
    rows = con.execute("SELECT source, title FROM items").fetchall()
    con.close()
    return project, rows


@pytest.mark.parametrize("served", list(SERVED))
@pytest.mark.parametrize("folder", list(FOLDERS))
def test_titles_are_the_right_characters(encoded, folder, served):
    project, rows = encoded
    codec = FOLDERS[folder]
    errors = project.log("errors.log").splitlines()
    checked = non_ascii = 0
    wrong = []
    for path in feed_files(folder):
        expected = expected_titles(path, codec)
        if not expected:
            continue  # a feed saved without entries (one was cut off by its saver)
        source = f"{folder}|{served}|{path.name}"
        stored = {normal(title or "") for name, title in rows if name == source} - {""}  # NULL: no title
        assert stored, f"{path.name} served {served} a charset stored no titles"
        for title in stored:
            checked += 1
            non_ascii += not title.isascii()
            # A part is enough: a title like "Name <DVD>" may lose its "<DVD>" as markup; a wrong
            # encoding gives characters that are in no title of the file at all.
            if title not in expected and not any(title in e for e in expected):
                wrong.append((path.name, title))
        overrides = [line for line in errors if f"  {source}  " in line and "read as" in line]
        if served == "latin1-default":  # the server contradicts the file: worth a line
            assert len(overrides) == 1 and "charset disagreement" in overrides[0], overrides
        else:
            assert overrides == []
    assert not wrong, f"{len(wrong)} of {checked} titles are not the file's characters, e.g. {wrong[:3]}"
    assert non_ascii > checked // 3, "too few titles outside ASCII to tell a right encoding from a wrong one"
