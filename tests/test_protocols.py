"""The table of protocols (parser/sources/protocols.py) is what the settings check reads: a key a protocol
does not take is refused naming the protocols that do; and the module layout issue 11 asks for holds
(webhook and WebSub know the listener, not each other; linkgen reads no settings module)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from parser.core.errors import SettingsError
from parser.settings.params import load_settings
from parser.sources.protocols import KEY_PROTOCOLS, PROTOCOLS, WEBSUB_FALLBACK_INTERVAL

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
    assert not {"parser.push.websub"} & imports_of(ROOT / "parser" / "push" / "webhook.py")
    assert not {"parser.push.webhook"} & imports_of(ROOT / "parser" / "push" / "websub.py")


def test_linkgen_reads_no_settings_module():
    settings = {"parser.settings.params", "parser.settings.link_jobs", "parser.sources.source_options"}
    for path in sorted((ROOT / "linkgen").glob("*.py")):
        assert not settings & imports_of(path), path.name


# -- the protocol table is the one place that tells protocols apart (issue 19) -------------------
def code_files() -> list[Path]:
    """Every module of the daemon: parser/ (at any depth), db/, linkgen/ and run_daemon.py."""
    return sorted(p for folder in ("parser", "db", "linkgen") for p in (ROOT / folder).rglob("*.py")) + \
        [ROOT / "run_daemon.py"]


def _names_a_protocol(node: ast.expr) -> bool:
    """`protocol`, `x.protocol`, `x["protocol"]`, or the `.name` of one of these or of protocol_of(x)."""
    if isinstance(node, ast.Attribute) and node.attr == "name":
        inner = node.value
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "protocol_of":
            return True
        return _names_a_protocol(inner)
    if isinstance(node, ast.Name):
        return node.id == "protocol"
    if isinstance(node, ast.Attribute):
        return node.attr == "protocol"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "protocol"
    return False


def _text_constants(node: ast.expr) -> bool:
    """A string literal, or a tuple, list or set of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and bool(node.elts) and all(map(_text_constants, node.elts))


def protocol_name_comparisons(code: str) -> list[str]:
    """The places in `code` that compare a protocol's name with a literal (`protocol == "webhook"`,
    `s.protocol in ("feed", "websub")`, `protocol_of(s).name != "feed"`, a `match` on one), or
    look a row up by a literal name (`PROTOCOLS["websub"]`): decisions parser/sources/protocols.py makes."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(map(_names_a_protocol, sides)) and any(map(_text_constants, sides)):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Match) and _names_a_protocol(node.subject):
            found.append(f"line {node.lineno}: match {ast.unparse(node.subject)}")
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "PROTOCOLS" \
                and _text_constants(node.slice):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_check_finds_every_way_of_comparing_a_protocol_name():
    caught = ['if source.protocol == "webhook": pass', 'x = [s for s in a if s.protocol != "feed"]',
              'ok = protocol in ("feed", "websub")', 'ok = "websub" == item["protocol"]',
              'ok = protocol_of(s).name == "json_api"', 'ok = row.protocol.name not in ["feed"]',
              'match s.protocol:\n    case "webhook": pass', 'row = PROTOCOLS["websub"]']
    for code in caught:
        assert protocol_name_comparisons(code), code
    fine = ['ok = protocol_of(s).pushed', 'ok = protocol.body == "json"', 'ok = "protocol" not in item',
            'ok = protocol.name not in allowed', 'row = PROTOCOLS[source.protocol]', 'text = f"{s.protocol} source"']
    for code in fine:
        assert not protocol_name_comparisons(code), code


def test_no_module_but_the_protocol_table_compares_a_protocol_name():
    found = {str(path.relative_to(ROOT)): protocol_name_comparisons(path.read_text(encoding="utf-8"))
             for path in code_files() if path.name != "protocols.py"}  # the table, in whatever folder
    assert {path: places for path, places in found.items() if places} == {}


def test_the_pushed_endpoints_and_the_opml_export_are_read_from_the_table():
    """push.open_listener gives a source posted to its endpoint and a subscribed one to the WebSub
    subscriber; export-opml writes the plain feeds: each by its row, so a new row needs no edit there."""
    pushed = {name for name, p in PROTOCOLS.items() if p.pushed}
    assert {name for name in pushed if PROTOCOLS[name].subscribed} == {"websub"}
    assert {name for name in pushed if not PROTOCOLS[name].subscribed} == {"webhook"}
    assert not any(p.subscribed for p in PROTOCOLS.values() if not p.pushed)
    assert {name for name, p in PROTOCOLS.items() if p.in_opml} == {"feed"}
