"""How deep an HTML fragment nests, estimated in one linear pass before nh3 parses it.

For every block start tag (<div>, <ul>, <blockquote>...) html5ever, nh3's parser, looks for an open <p>
"in button scope" by walking its stack of open elements down to the nearest boundary, so n unclosed
<div> cost n²/2 steps: 150,000 of them (750 KB, under MAX_BYTES) took 39 s, 10 MiB would take hours.
The estimate follows that stack closely enough for what people write (end tags that close, <p>, <li>,
<dd>/<dt> and table cells closed by the next one, scope boundaries, raw text); a shape crafted to fool
it meets the parse's time limit (parser/core/cpu_pool.py) instead.
"""
from __future__ import annotations

import re

MAX_DEPTH = 512  # people's HTML nests a few dozen deep; 512 bounds nh3 to ~0.5 s a MiB

# A comment, or a tag with its attributes (a quoted value may hold ">"). Names are matched as html5ever
# reads them: a letter, then anything up to a space, "/" or ">".
# A "<" ends an unquoted run: a tag never closed then costs a scan to the next "<", not to the end. The
# attributes' alternatives begin with different characters, so taking them possessively (never giving
# back) finds the same tags as backtracking would, in less time.
_ATTRIBUTES = r"(?:[^<>\"']++|\"[^\"]*+\"|'[^']*+')*+"
_TAG = rf"<(?P<end>/?)(?P<name>[A-Za-z][^\s/<>]*)(?P<attributes>{_ATTRIBUTES})>"
_COMMENT = r"<!--.*?(?:-->|\Z)"
_TOKEN = re.compile(f"{_COMMENT}|{_TAG}", re.S)
# Elements whose start tag the estimate does nothing with but open them (not void, raw text or
# <plaintext>, closing nothing implicitly: see _CLOSES_SOMETHING). One that holds text alone, as
# `<span class="k">x</span>` does (a highlighted listing holds thousands), opens and closes on top of the
# stack: one level above where the stack stands. A run of such leaves and the text between them is read
# as one token (_RUN) by the pattern, not one Python step per tag: half the estimate's time over the
# corpus's long posts. Its tags are read by _TAG's own grammar, so the tokens around a run are those
# _TOKEN gives (a test holds the two to the same depth); a start tag ending in "/" (self-closing in
# <svg>) is no leaf.
_LEAF_NAMES = "a|abbr|b|bdi|bdo|big|cite|code|data|del|dfn|em|font|i|ins|kbd|label|mark|nobr|q|rp|rt|ruby|s|" \
    "samp|small|span|strike|strong|sub|sup|time|tt|u|var"
_LEAF = rf"<(?P<leaf>(?i:{_LEAF_NAMES}))(?=[\s/>]){_ATTRIBUTES}(?<!/)>[^<]*+</(?i:(?P=leaf))(?=[\s/>]){_ATTRIBUTES}>"
_RUN = re.compile(rf"(?P<run>(?:{_LEAF}[^<]*+)++)|{_COMMENT}|{_TAG}", re.S)
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link", "meta", "param",
                   "source", "track", "wbr", "basefont", "bgsound", "frame", "image"})
_RAW_TEXT = frozenset({"script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes",
                       "noscript"})
_SCOPE = frozenset({"applet", "caption", "html", "table", "td", "th", "marquee", "object", "template"})
_BUTTON_SCOPE = _SCOPE | {"button"}
_CLOSES_P = frozenset({"address", "article", "aside", "blockquote", "center", "details", "dialog", "dir", "div",
                       "dl", "fieldset", "figcaption", "figure", "footer", "header", "hgroup", "main", "menu",
                       "nav", "ol", "p", "search", "section", "summary", "ul", "h1", "h2", "h3", "h4", "h5", "h6",
                       "pre", "listing", "form", "li", "dd", "dt"})
_CLOSES_SOMETHING = _CLOSES_P | {"li", "dd", "dt", "tr", "td", "th"}  # what _closed_by looks at
# The spec's "special" elements: an end tag of another name is ignored when one of these is above it.
_SPECIAL = _BUTTON_SCOPE | _CLOSES_P | _VOID | _RAW_TEXT | frozenset(
    {"body", "colgroup", "frameset", "head", "plaintext", "select", "tbody", "tfoot", "thead", "tr"})


class _OpenElements:
    """The tree builder's stack of open elements, with where each name and boundary last is (O(1))."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.at: dict[str, list[int]] = {}
        self.marks: dict[frozenset, list[int]] = {_SCOPE: [], _BUTTON_SCOPE: [], _SPECIAL: []}
        self._marks_of: dict[str, tuple[list[int], ...]] = {}  # a name's boundary lists, looked up once

    def top(self, name: str) -> int:
        found = self.at.get(name)
        return found[-1] if found else -1

    def last(self, kind: frozenset) -> int:
        found = self.marks[kind]
        return found[-1] if found else -1

    def _marks(self, name: str) -> tuple[list[int], ...]:
        marks = self._marks_of.get(name)
        if marks is None:
            marks = self._marks_of[name] = tuple(found for kind, found in self.marks.items() if name in kind)
        return marks

    def push(self, name: str) -> None:
        index = len(self.names)
        self.names.append(name)
        self.at.setdefault(name, []).append(index)
        for found in self._marks(name):
            found.append(index)

    def pop_to(self, index: int) -> None:
        """Close the element at `index` and everything opened inside it."""
        while len(self.names) > index:
            name = self.names.pop()
            self.at[name].pop()
            for found in self._marks(name):
                found.pop()


def nesting_depth(html: str, limit: int = MAX_DEPTH) -> int:
    """The deepest the elements of `html` nest, as html5ever's stack would hold them; counting stops
    past `limit` (the answer is then limit + 1)."""
    if html.count("<") <= limit:  # fewer tags than the limit: no need to look
        return 0
    return _depth(html, limit, _RUN)


def _depth(html: str, limit: int, tokens: re.Pattern) -> int:
    """nesting_depth by `tokens`: _RUN, or _TOKEN (every tag one step: what _RUN must agree with)."""
    stack, deepest, text_to = _OpenElements(), 0, 0
    names = stack.names
    run = tokens.groupindex.get("run", 0)
    # One pass per body of every real feed's first poll: the common tags take the short ways below.
    for match in tokens.finditer(html):
        if match.start() < text_to:  # inside a raw text element
            continue
        end, name, attributes = match.group("end", "name", "attributes")
        if name is None:
            if run and match.group(run) is not None and len(names) >= deepest:  # a run of leaves: one level up
                deepest = len(names) + 1
                if deepest > limit:
                    break
            continue  # a comment
        name = name.lower()
        if end:
            if names and names[-1] == name:  # the element on top: nothing opened inside it to ask about
                stack.pop_to(len(names) - 1)
            else:
                _end_tag(stack, name)
            continue
        if name == "plaintext":  # the rest is text
            break
        if name in _VOID or (attributes.endswith("/") and (stack.top("svg") >= 0 or stack.top("math") >= 0)):
            continue
        if name in _RAW_TEXT:  # text up to its own end tag: a "</div>" in a <textarea> closes nothing
            found = re.compile(f"</{re.escape(name)}", re.I).search(html, match.end())
            if found is None:
                break
            text_to = found.start()
            continue
        if name in _CLOSES_SOMETHING:
            _closed_by(stack, name)
        stack.push(name)
        if len(names) > deepest:
            deepest = len(names)
            if deepest > limit:
                break
    return deepest


def _end_tag(stack: _OpenElements, name: str) -> None:
    index = stack.top(name)
    if index < 0:
        return
    # A special element's end tag closes it when it is in scope; another's, when no special element
    # is open inside it (else html5ever ignores it, and so must the estimate, or `<span><div></span>`
    # repeated would look flat while it nests).
    if index >= stack.last(_SCOPE if name in _SPECIAL else _SPECIAL):
        stack.pop_to(index)


def _closed_by(stack: _OpenElements, name: str) -> None:
    """The elements a start tag closes implicitly: an open <p> before a block, the previous <li>,
    <dd>/<dt>, table row or cell."""
    if name in _CLOSES_P and stack.top("p") > stack.last(_BUTTON_SCOPE):
        stack.pop_to(stack.top("p"))
    if name == "li" and stack.top("li") > max(stack.last(_BUTTON_SCOPE), stack.top("ul"), stack.top("ol")):
        stack.pop_to(stack.top("li"))
    if name in ("dd", "dt"):
        item = max(stack.top("dd"), stack.top("dt"))
        if item > max(stack.last(_BUTTON_SCOPE), stack.top("dl")):
            stack.pop_to(item)
    if name in ("tr", "td", "th"):
        cell = max(stack.top("td"), stack.top("th"))
        if cell > stack.top("table"):
            stack.pop_to(cell)
        if name == "tr" and stack.top("tr") > stack.top("table"):
            stack.pop_to(stack.top("tr"))


def flattened(html: str) -> str:
    """`html`'s text with every tag taken out and any "<" left escaped: nothing for a parser to nest."""
    return _TOKEN.sub(" ", html).replace("<", "&lt;")
