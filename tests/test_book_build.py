"""_ext/book_build.py's post-transform: punctuation keeps the inline code before it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from docutils import nodes
from docutils.core import publish_doctree

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_ext"))
import book_build  # noqa: E402 - the extension lives outside the package


def wrapped(source: str) -> list[tuple[list[str], str]]:
    """Each nowrap span of a one-paragraph reST text: (its classes, its text)."""
    document = publish_doctree(source)
    for box in list(document.findall(nodes.literal)):
        book_build.KeepPunctuationWithItsBox.wrap(box)
    return [
        (span["classes"], span.astext())
        for span in document.findall(nodes.inline)
        if "book-nowrap" in span["classes"]
    ]


@pytest.mark.parametrize(
    ("source", "classes", "text"),
    [
        ("call ``mask``.", ["book-nowrap", "book-keep-word"], "mask."),
        (
            "as in (``nbval-ignore-output``)",
            ["book-nowrap", "book-keep-word"],
            "(nbval-ignore-output)",
        ),
        (
            "use ``torch.nn.functional.scaled_dot_product_attention``, then",
            ["book-nowrap", "book-glue"],
            "torch.nn.functional.scaled_dot_product_attention,",
        ),
    ],
)
def test_punctuation_joins_its_code(source, classes, text):
    assert wrapped(source) == [(classes, text)]


def test_code_with_no_punctuation_is_left_alone():
    assert wrapped("use ``torch.nn.functional.scaled_dot_product_attention`` then") == []


def test_a_long_name_after_an_opening_bracket_only_is_not_glued():
    """Glue is for punctuation after a name; an opening bracket alone only keeps nowrap."""
    [(classes, text)] = wrapped("see (``torch.nn.functional.scaled_dot_product_attention`` here")
    assert (
        classes == ["book-nowrap"] and text == "(torch.nn.functional.scaled_dot_product_attention"
    )
