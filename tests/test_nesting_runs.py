"""nesting._RUN reads a run of text-only inline elements as one token: the estimate it gives must be the
estimate of every tag read one by one (_TOKEN), on the corpus's long posts and on random tag soup built
from the shapes that make the estimate step aside (quotes holding ">", self-closing tags, comments, raw
text, unclosed and stray tags)."""
from __future__ import annotations

import random

from parser.adapters import nesting
from parser.adapters.nesting import _RUN, _TOKEN, _depth
from tests.conftest import corpus_dir

PIECES = ["<span>", "</span>", "<SPAN class='a>b'>", "<span/>", "<span title=\"</span>\">", "<b>", "</B >", "<div>",
          "</div>", "<p>", "<li>", "<ul>", "</ul>", "<svg>", "</svg>", "<math>", "<textarea>", "</textarea>", "<!--",
          "-->", "<a href=\"x\">", "</a>", "x", " ", "'", '"', "<code>", "</code>", "<table>", "<td>", "<tr>",
          "</table>", "<br>", "<script>", "</script>", "</spanx>", "<spanx>", "<", ">", "/", "<plaintext>"]


def test_a_leaf_is_an_element_the_estimate_only_opens():
    leaves = set(nesting._LEAF_NAMES.split("|"))
    assert "span" in leaves
    assert not leaves & (nesting._VOID | nesting._RAW_TEXT | nesting._CLOSES_SOMETHING | {"plaintext", "svg", "math"})


def test_runs_of_leaves_give_the_depth_of_every_tag_read_alone_on_random_soup():
    rng = random.Random(20261205)
    for _ in range(20_000):
        soup = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 60)))
        assert _depth(soup, 12, _RUN) == _depth(soup, 12, _TOKEN), soup


def test_runs_of_leaves_give_the_depth_of_every_tag_read_alone_on_the_corpus():
    compared = 0
    for path in sorted((corpus_dir() / "fastfeedparser" / "benchmark_data").iterdir()):
        text = path.read_bytes().decode("utf-8", "replace")
        if text.count("<") > 2_000:  # the whole feed, escaped markup and all: long, and tags of every kind
            compared += 1
            for limit in (8, 512, 1 << 20):
                assert _depth(text, limit, _RUN) == _depth(text, limit, _TOKEN), (path.name, limit)
    assert compared >= 50
    line = '<span id="l1"><a href="#l1"></a><span class="ot">{-# LANGUAGE GADTs #-}</span></span>\n'
    listing = "<pre>" + line * 3_000
    assert _depth(listing, 512, _RUN) == _depth(listing, 512, _TOKEN) == 3
