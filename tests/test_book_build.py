"""_ext/book_build.py: punctuation keeps the inline code before it; a changed
stylesheet, template or extension outdates every page."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

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


def test_a_newer_stylesheet_template_or_extension_outdates_every_page(tmp_path):
    """Sphinx copies _static only when some page is out of date: a file of
    SITE_INPUTS newer than the last build's environment makes every page so."""
    doctrees = tmp_path / "_build" / ".doctrees"
    app = SimpleNamespace(srcdir=str(tmp_path), doctreedir=str(doctrees))
    env = SimpleNamespace(found_docs={"intro", "chapters/01_why_attention"})
    files = {
        "css": tmp_path / "_static" / "book.css",
        "template": tmp_path / "_templates" / "book-title.html",
        "bytecode": tmp_path / "_ext" / "__pycache__" / "book_build.cpython-311.pyc",
    }
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
        os.utime(path, (1_000_000_000, 1_000_000_000))

    def outdated() -> list[str]:
        return book_build.pages_outdated_by_site_inputs(app, env, set(), set(), set())

    assert outdated() == [], "a first build (no environment yet) reads every page anyway"
    doctrees.mkdir(parents=True)
    (doctrees / "environment.pickle").write_bytes(b"")
    built = (doctrees / "environment.pickle").stat().st_mtime
    assert outdated() == [], "nothing changed since the last build"
    os.utime(files["bytecode"], (built + 10, built + 10))
    assert outdated() == [], "Python's bytecode cache is not an input"
    for name in ("css", "template"):
        os.utime(files[name], (built + 10, built + 10))
        assert outdated() == ["chapters/01_why_attention", "intro"], name
        os.utime(files[name], (1_000_000_000, 1_000_000_000))
