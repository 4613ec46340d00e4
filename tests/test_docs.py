"""The docs hold what the code has: every setting in the defaults has a row in docs/settings.md, and
every relative link in README.md and docs/ reaches a file (and its heading, for a #anchor)."""
from __future__ import annotations

import re

from parser.settings.params import DEFAULTS
from tests.conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces made hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*$", text, re.M):
        name = slug(heading)
        found.add(name if name not in seen else f"{name}-{seen[name]}")
        seen[name] = seen.get(name, 0) + 1
    return found


def test_every_setting_has_a_row_in_the_settings_page():
    page = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([A-Z_]+)` \|", page, re.M))
    assert sorted(set(DEFAULTS) - rows) == []


def test_every_relative_link_resolves():
    broken = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue  # an outside address
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []
