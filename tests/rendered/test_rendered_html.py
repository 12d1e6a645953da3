"""The built pages show no raw MyST markup: every role and directive was rendered.

A role that MyST cannot parse does not always warn. A nested role such as
``{term}{py:func}`softmax```, for one, renders its outer ``{term}`` as plain
text next to a working link, and the strict build (``-W -n``) stays green.
This test reads the HTML that the build wrote and fails on any role or
directive syntax left in the prose: ``{term}``, ``{ref}``, ``{py:func}``,
``{numref}``, ``{cite}``, ``{eq}``, a ``:::`` or a ```` ```{ ```` fence, a
``(label)=`` target, or a stray backtick.

Code is left out, because there such text can be legitimate (a notebook may
print a dict, a docstring may show MyST): code cells and their outputs, code
blocks, inline code and math. Alt text is checked too: it is not rendered
markup either.

``make test-book`` runs it right after the strict build; set BOOK_SITE to
check another build. It needs neither torch nor nbval:
``pytest tests/rendered --confcutdir=tests/rendered -p no:nbval``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("BOOK_SITE", ROOT / "_build" / "html")).resolve()
PAGES = sorted(
    path
    for path in SITE.rglob("*.html")
    if not {"_static", "_sources", "_images"} & set(path.relative_to(SITE).parts)
)

# Where raw markup may legitimately appear: code (cells, outputs, blocks,
# inline literals) and math (LaTeX braces).
CODE_TAGS = ["pre", "code", "kbd", "samp", "tt", "script", "style", "textarea"]
CODE_CLASSES = re.compile(r"^(highlight|cell_input|cell_output|output|math|literal-block)$")

# What unrendered MyST looks like in text.
RAW_MARKUP = {
    "a role or directive name in braces": re.compile(r"\{[A-Za-z][\w.+-]*(?::[\w.+-]+)*\}"),
    "a colon fence": re.compile(r":::"),
    "a backtick fence": re.compile(r"```"),
    "a (label)= target": re.compile(r"^\s*\([\w.:-]+\)=\s*$", re.MULTILINE),
    "a stray backtick": re.compile(r"`"),
}


def prose_of(page: Path) -> tuple[str, list[str]]:
    """The article's text with code and math removed, and its images' alt texts."""
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    article = soup.find("article") or soup.body or soup
    for element in article.find_all(CODE_TAGS):
        element.decompose()
    for element in article.find_all(class_=CODE_CLASSES):
        element.decompose()
    alts = [img.get("alt", "") for img in article.find_all("img")]
    return article.get_text(" "), alts


def raw_markup_in(text: str) -> list[str]:
    """Each piece of raw markup in ``text``, named, with a little context."""
    found = []
    for name, pattern in RAW_MARKUP.items():
        for match in pattern.finditer(text):
            start, end = max(0, match.start() - 40), match.end() + 40
            context = " ".join(text[start:end].split())
            found.append(f"{name} {match.group(0).strip()!r} in '...{context}...'")
    return found


def test_there_is_a_built_site():
    if not (SITE / "index.html").is_file():
        pytest.skip(f"no built site at {SITE}: `make test-book` builds it, then runs this test")
    assert len(PAGES) > 10


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(SITE)) for p in PAGES])
def test_no_raw_myst_markup_in_the_rendered_prose(page):
    text, alts = prose_of(page)
    problems = raw_markup_in(text) + [f"alt text: {p}" for alt in alts for p in raw_markup_in(alt)]
    assert not problems, f"{page.relative_to(SITE)} shows unrendered markup:\n" + "\n".join(
        problems
    )


BRACES, COLONS, TARGET, BACKTICK = (
    "a role or directive name in braces",
    "a colon fence",
    "a (label)= target",
    "a stray backtick",
)


@pytest.mark.parametrize(
    "html,expected",
    [
        # the nested role of chapter 2 (issue 17): the outer role is left as text
        ('<p>with the {term}<a href="x"><code>softmax</code></a></p>', [BRACES]),
        ("<p>see {numref}`fig-x`</p>", [BRACES, BACKTICK, BACKTICK]),
        ("<p>::: {dropdown} Solution</p>", [BRACES, COLONS]),
        ("<p>(ch-label)=</p>", [TARGET]),
        ('<p>an image <img alt="the {term}`softmax` curve" src="x.png"></p>', []),
        # legitimate: code, code blocks, cell outputs and math
        ("<p>write <code>{term}`x`</code></p>", []),
        ('<div class="highlight"><pre>{ref}`x`\n:::</pre></div>', []),
        ('<div class="cell_output"><span>{a}</span></div>', []),
        (r'<p><span class="math">\(\frac{a}{b}\)</span></p>', []),
        ("<p>a set {0, 1} and a pair (i, j)</p>", []),
    ],
)
def test_the_detector_itself(tmp_path, html, expected):
    page = tmp_path / "page.html"
    page.write_text(f"<html><body><article>{html}</article></body></html>", encoding="utf-8")
    text, alts = prose_of(page)
    found = [problem.split(" '")[0] for problem in raw_markup_in(text)]
    assert sorted(found) == sorted(expected)
    if "alt=" in html:
        assert alts == ["the {term}`softmax` curve"]
        assert raw_markup_in(alts[0])
