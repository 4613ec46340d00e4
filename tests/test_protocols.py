"""The table of protocols (parser/protocols.py) is what the settings check reads: a key a protocol
does not take is refused naming the protocols that do; and the module layout issue 11 asks for holds
(webhook and WebSub know the listener, not each other; linkgen reads no settings module)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from parser.errors import SettingsError
from parser.protocols import KEY_PROTOCOLS, PROTOCOLS, WEBSUB_FALLBACK_INTERVAL
from parser.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
REFUSED = [(key, name) for key, takers in KEY_PROTOCOLS.items() for name in PROTOCOLS if name not in takers]


def settings_error(tmp_path: Path, source: dict) -> str:
    (tmp_path / "params.py").write_text(f"SOURCES = [{source!r}]\n", encoding="utf-8")
    with pytest.raises(SettingsError) as info:
        load_settings(tmp_path / "params.py")
    return str(info.value)


@pytest.mark.parametrize("key, protocol", REFUSED)
def test_a_key_of_another_protocol_is_refused_naming_those_that_take_it(tmp_path, key, protocol):
    source = {"name": "s", "url": "https://example.org/feed", "protocol": protocol, key: "x"}
    expected = f"{key!r} is a key of protocol {' / '.join(KEY_PROTOCOLS[key])}, not {protocol!r}"
    assert expected in settings_error(tmp_path, source)


def test_every_protocol_is_polled_or_pushed_and_websub_polls_rarely(tmp_path):
    assert all(p.polled or p.pushed for p in PROTOCOLS.values())
    (tmp_path / "params.py").write_text(
        "SOURCES = [{'name': 'w', 'protocol': 'websub', 'url': 'https://example.org/atom.xml'},"
        " {'name': 'f', 'url': 'https://example.org/rss.xml'}]\n", encoding="utf-8")
    websub, feed = load_settings(tmp_path / "params.py").sources
    assert websub.interval == WEBSUB_FALLBACK_INTERVAL and feed.interval == 600
    assert websub.push.path == "/websub/w"


def imports_of(path: Path) -> set[str]:
    """The modules a file imports, absolute (`from .listener import x` in parser/ is parser.listener)."""
    package = ".".join(path.relative_to(ROOT).parent.parts)
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_webhook_and_websub_do_not_import_each_other():
    assert not {"parser.websub"} & imports_of(ROOT / "parser" / "webhook.py")
    assert not {"parser.webhook"} & imports_of(ROOT / "parser" / "websub.py")


def test_linkgen_reads_no_settings_module():
    settings = {"parser.settings", "parser.job_settings", "parser.source_options"}
    for path in sorted((ROOT / "linkgen").glob("*.py")):
        assert not settings & imports_of(path), path.name
