"""The package reference, appendix/api.md, covers the whole public API.

Sphinx builds that page from the docstrings (autodoc + napoleon), so a name
the page does not name, or a docstring autodoc skips, silently vanishes from
the reference. These tests read the autodoc directives of the page, resolve
them the way autodoc does, and check that:

- every public name is documented on the page exactly once: the names in
  ``selfattention.__all__``, and the public functions and classes of every
  public submodule ``selfattention.<name>`` (its ``__all__`` when it has one,
  as for ``selfattention.exercises``);
- each of them has a docstring, and each public method or property of a
  documented class has one;
- every function and class has an ``Examples`` section (a doctest, run by
  ``pytest --doctest-modules src``), except the exercise checkers, whose
  example is the exercise of their chapter;
- no ``#:`` comment of a documented module-level constant starts with
  ``words: more words``, which napoleon would render as a type.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

import selfattention
import selfattention.exercises

ROOT = Path(__file__).resolve().parents[1]
API_PAGE = ROOT / "appendix" / "api.md"
PACKAGE = "selfattention"

# ".. autofunction:: selfattention.softmax" in an {eval-rst} block, or the MyST
# form "```{autofunction} selfattention.softmax".
RST_DIRECTIVE = re.compile(r"^\.\. (auto\w+):: *(\S+)\s*$")
MYST_DIRECTIVE = re.compile(r"^(`{3,}|:{3,})\{(auto\w+)\} *(\S+)\s*$")
RST_OPTION = re.compile(r"^\s+:([\w-]+):\s*(.*?)\s*$")
MYST_OPTION = re.compile(r"^:([\w-]+):\s*(.*?)\s*$")
# napoleon splits an attribute's first docstring line at a lone colon into "type: text".
LONE_COLON = re.compile(r"(?<!:):(?!:)")


def parse_directives(text: str) -> list[tuple[str, str, dict[str, str]]]:
    """Every autodoc directive of a MyST page: (directive, target, options)."""
    found = []
    lines = text.splitlines()
    for number, line in enumerate(lines):
        rst = RST_DIRECTIVE.match(line.strip())
        myst = MYST_DIRECTIVE.match(line.strip())
        if not (rst or myst):
            continue
        directive, target = rst.groups() if rst else myst.groups()[1:]
        pattern = RST_OPTION if rst else MYST_OPTION
        options = {}
        for following in lines[number + 1 :]:
            option = pattern.match(following)
            if not option:
                break
            options[option.group(1)] = option.group(2)
        found.append((directive, target, options))
    return found


def resolve(target: str, module: bool = False):
    """Import ``target`` as autodoc does.

    ``automodule`` imports the module itself; the other directives import the
    longest importable module above the name and walk the attributes from
    there, so ``selfattention.softmax`` is the function, not the submodule.
    """
    if module:
        return importlib.import_module(target)
    parts = target.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(target)


def names_list(value: str) -> list[str]:
    return [name.strip() for name in value.split(",") if name.strip()]


def is_documentable(obj) -> bool:
    return inspect.isfunction(obj) or inspect.isclass(obj)


def module_members(module, constants: bool = False) -> dict[str, object]:
    """What ``automodule`` with a bare ``:members:`` documents: the names in
    ``__all__``, or else the public functions and classes defined in the module
    (and, with ``constants``, its module-level names that have a ``#:`` comment)."""
    if hasattr(module, "__all__"):
        return {name: getattr(module, name) for name in module.__all__}
    members = {
        name: obj
        for name, obj in vars(module).items()
        if not name.startswith("_") and is_documentable(obj) and obj.__module__ == module.__name__
    }
    if constants:
        from sphinx.pycode import ModuleAnalyzer

        for scope, name in ModuleAnalyzer.for_module(module.__name__).find_attr_docs():
            if not scope and not name.startswith("_") and hasattr(module, name):
                members[name] = getattr(module, name)
    return members


@cache
def documented_on_page() -> dict[int, list[str]]:
    """id(object) -> the page's names for it, one per time it is documented."""
    documented: dict[int, list[str]] = defaultdict(list)
    for directive, target, options in parse_directives(API_PAGE.read_text(encoding="utf-8")):
        obj = resolve(target, module=directive == "automodule")
        if directive != "automodule":
            documented[id(obj)].append(target)
            continue
        if "members" not in options:
            continue
        members = module_members(obj, constants=True)
        if options["members"]:
            members = {name: getattr(obj, name) for name in names_list(options["members"])}
        for name in names_list(options.get("exclude-members", "")):
            members.pop(name, None)
        for name, member in members.items():
            documented[id(member)].append(f"{target}.{name}")
    return documented


def public_submodules() -> list[str]:
    """Every public module of the package, at any depth (``selfattention.layers.chunked``).

    A package with an ``__all__`` (``selfattention.exercises``) speaks for the
    modules inside it.
    """
    found = []
    for info in pkgutil.walk_packages(selfattention.__path__, prefix=f"{PACKAGE}."):
        parts = info.name.split(".")
        if any(part.startswith("_") for part in parts):
            continue
        parents = (".".join(parts[:depth]) for depth in range(2, len(parts)))
        if any(hasattr(importlib.import_module(parent), "__all__") for parent in parents):
            continue
        found.append(info.name)
    return found


def public_api() -> dict[str, object]:
    """Qualified name -> object, for every public name of the package."""
    api = {f"{PACKAGE}.{name}": getattr(selfattention, name) for name in selfattention.__all__}
    for module_name in public_submodules():
        module = importlib.import_module(module_name)
        for name, obj in module_members(module).items():
            if not any(obj is known for known in api.values()):
                api[f"{module_name}.{name}"] = obj
    return api


API = public_api()
CALLABLES = {name: obj for name, obj in API.items() if is_documentable(obj)}


def test_the_page_has_directives_that_resolve():
    directives = parse_directives(API_PAGE.read_text(encoding="utf-8"))
    assert len(directives) >= 20, f"only {len(directives)} autodoc directives in {API_PAGE}"
    unresolved = []
    for directive, target, _ in directives:
        try:
            resolve(target, module=directive == "automodule")
        except (ImportError, AttributeError) as exc:
            unresolved.append(f"{target} ({exc})")
    assert not unresolved, f"{API_PAGE.name} documents names that do not import: {unresolved}"


def test_the_parser_reads_both_directive_forms():
    text = (
        "```{eval-rst}\n.. automodule:: selfattention.masks\n   :members:\n"
        "   :exclude-members: causal_mask, padding_mask\n\n   Built in x.\n```\n"
        "```{autofunction} selfattention.softmax\n:no-index:\n```\n"
    )
    assert parse_directives(text) == [
        (
            "automodule",
            "selfattention.masks",
            {"members": "", "exclude-members": "causal_mask, padding_mask"},
        ),
        ("autofunction", "selfattention.softmax", {"no-index": ""}),
    ]


@pytest.mark.parametrize("name", sorted(API))
def test_every_public_name_is_on_the_page_once(name):
    places = documented_on_page().get(id(API[name]), [])
    assert places, f"{name} is public but appendix/api.md does not document it"
    assert len(places) == 1, (
        f"{name} is documented {len(places)} times in appendix/api.md, as {places}; "
        "add it to the automodule's :exclude-members: or drop one entry"
    )


@pytest.mark.parametrize("name", sorted(CALLABLES))
def test_every_public_function_and_class_has_a_docstring(name):
    doc = inspect.getdoc(CALLABLES[name])
    assert doc and doc.strip(), f"{name} has no docstring"


CHECKERS = f"{PACKAGE}.exercises.check_"


@pytest.mark.parametrize("name", sorted(n for n in CALLABLES if not n.startswith(CHECKERS)))
def test_every_public_function_and_class_has_examples(name):
    doc = inspect.getdoc(CALLABLES[name]) or ""
    assert re.search(r"^Examples\n-{8}", doc, re.M), (
        f"{name}: its docstring needs an 'Examples' section (numpy style) with a doctest"
    )
    assert ">>> " in doc.split("Examples", 1)[1], f"{name}: its Examples section has no doctest"


METHOD_KINDS = (property, classmethod, staticmethod)


@pytest.mark.parametrize("name", sorted(n for n, obj in CALLABLES.items() if inspect.isclass(obj)))
def test_public_methods_of_classes_have_docstrings(name):
    cls = CALLABLES[name]
    missing = [
        attribute
        for attribute, member in vars(cls).items()
        if not attribute.startswith("_")
        and (inspect.isfunction(member) or isinstance(member, METHOD_KINDS))
        and not inspect.getdoc(getattr(member, "__func__", member))
    ]
    assert not missing, (
        f"{name}: public members without a docstring, skipped by autodoc: {missing}"
    )


@pytest.mark.parametrize("module_name", public_submodules())
def test_constant_comments_do_not_read_as_types(module_name):
    from sphinx.pycode import ModuleAnalyzer

    comments = ModuleAnalyzer.for_module(module_name).find_attr_docs()
    bad = {
        f"{scope}.{name}".strip("."): lines[0]
        for (scope, name), lines in comments.items()
        if lines and LONE_COLON.search(re.sub(r"`[^`]*`", "", lines[0]))
    }
    assert not bad, (
        f"{module_name}: napoleon renders the text before the first colon of a '#:' "
        f"comment as the constant's type; reword the first line: {bad}"
    )


def test_examples_run_as_tests_in_make_test():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    target = makefile.split("\ntest-unit:", 1)[1].split("\n\n", 1)[0]
    command = next(line for line in target.splitlines() if "pytest" in line).split()
    assert "--doctest-modules" in command and "src" in command, (
        "make test-unit does not run the docstring examples"
    )


@pytest.mark.parametrize(
    "name", sorted(n for n in selfattention.exercises.__all__ if n.startswith("check_"))
)
def test_every_checker_links_to_its_chapter(name):
    """The page's list of checkers gives each one the chapter of its module ``chNN``."""
    number = getattr(selfattention.exercises, name).__module__.rsplit(".ch", 1)[1]
    notebooks = sorted((ROOT / "chapters").glob(f"{number}_*.ipynb"))
    assert notebooks, (
        f"{name} comes from exercises/ch{number}.py but chapter {number} has no notebook"
    )
    cells = json.loads(notebooks[0].read_text(encoding="utf-8"))["cells"]
    first_cell = next(cell for cell in cells if not lab_only(cell))
    label = re.match(r"\((.+)\)=", "".join(first_cell["source"])).group(1)
    rows = [
        line
        for line in API_PAGE.read_text(encoding="utf-8").splitlines()
        if line.startswith("- ") and f"selfattention.exercises.{name}`" in line
    ]
    assert len(rows) == 1, f"appendix/api.md: the list of checkers needs one item with {name}"
    assert f"{{ref}}`{label}`" in rows[0], f"{name}'s item does not link to {label}: {rows[0]}"


def lab_only(cell: dict) -> bool:
    """A cell that only JupyterLab shows (scripts/lab_view.py writes it; the site skips it)."""
    return "lab" in cell.get("metadata", {}).get("selfattention", {})


def chapter_markdown() -> str:
    """The Markdown of every chapter notebook that the site shows, in order."""
    cells = []
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        notebook = json.loads(path.read_text())
        cells += [
            "".join(c["source"])
            for c in notebook["cells"]
            if c["cell_type"] == "markdown" and not lab_only(c)
        ]
    return "\n".join(cells)


# Names that a chapter's prose uses for something else: chapter 11's exercise
# asks the reader to write their own `masked_mean`.
NOT_THE_PACKAGES = {"selfattention.toys.models.masked_mean"}


def test_chapters_link_the_names_they_teach_to_the_reference():
    """A public name written in a chapter's prose is linked to its entry at least once."""
    markdown = chapter_markdown()
    # A {py:...} role, or the link `make execute` turns it into (scripts/lab_view.py):
    # [`name`](#selfattention.name), which Sphinx resolves to the same entry.
    targets = re.findall(r"\{py:(?:func|class|data)\}`[^`]*<([\w.]+)>`", markdown)
    targets += re.findall(r"\]\(#(selfattention(?:\.\w+)+)\)", markdown)
    linked = [resolve(target) for target in targets]  # ImportError: a role names nothing
    unlinked = []
    for name, obj in sorted(API.items()):
        short = name.rsplit(".", 1)[1]
        mentioned = re.search(r"(?<![`>\w.])`" + re.escape(short) + r"(\(|`)", markdown)
        if mentioned and name not in NOT_THE_PACKAGES and not any(obj is o for o in linked):
            unlinked.append(name)
    assert not unlinked, f"link the first prose mention with a {{py:...}} role: {unlinked}"
