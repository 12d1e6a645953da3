"""Make each chapter notebook read in JupyterLab the way its page reads on the site.

The site is built by Sphinx (Jupyter Book 1); JupyterLab renders the same
Markdown with jupyterlab-myst, which knows one notebook at a time: no Python
domain, no other chapters, no bibliography, and no captions for figures that
code cells draw (their captions live in cell metadata, for myst-nb). ``sync``
brings a notebook to a form that both read alike, and changes nothing when it
is already there (``scripts/notebooks.py execute`` runs it; ``sync`` and
``check`` run it alone):

* Roles that JupyterLab cannot resolve become Markdown links that Sphinx
  resolves to the same target (MyST's ``[text](#target)`` looks the target up
  like the ``any`` role) and JupyterLab shows as their text:

  - ``{py:func}`text <selfattention.f>``` becomes ``[`text`](#selfattention.f)``;
  - ``{cite}`key``` becomes ``[[Author et al., 2017]](#key)``, the text the
    site prints for it (the bibliography lists every entry, ``:all:``, since
    a link does not count as a citation); ``{cite:t}`` must be rephrased;
  - ``{ref}`` to a chapter becomes a link to its notebook, which opens it in
    JupyterLab; ``{numref}`` to another chapter's figure gets its number.

  ``{term}`` roles, and ``{numref}`` and ``{ref}`` to this notebook's own
  figures and labels, stay: JupyterLab shows a term's text and resolves the rest.

* Cells that only JupyterLab shows (tagged ``remove-cell``, so the site skips
  them; marked ``"selfattention": {"lab": ...}`` in their metadata, so a new
  sync replaces them): a first cell whose front matter numbers figures as the
  site does (Fig. 10.3), a ``{figure}`` caption after every figure, and at the
  end the targets of the chapter's links: other chapters' figures it refers
  to, the glossary entries of its terms, a one-line summary of each package
  name it links to, and its references.

* The stored kernel name is the installed kernel's, as JupyterLab writes it, so
  opening a chapter does not mark it unsaved; hidden solution cells carry the
  ``collapsed`` flag JupyterLab adds when it saves.
"""

from __future__ import annotations

import copy
import functools
import pathlib
import re
from dataclasses import dataclass, field

import nbformat
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
LAB_KEY = "selfattention"  # cell metadata: {"lab": "front", "caption", "glossary", ...}
KERNEL_NAME = "python3"
ROLE = re.compile(r"\{(?P<role>[a-z]+(?::[a-z]+)?)\}`(?P<content>[^`]+)`")
EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)
PY_ROLES = {"func", "meth", "class", "data", "attr", "mod", "obj", "exc", "const"}


class SyncError(ValueError):
    """A role that cannot be made readable in JupyterLab without an author's decision."""


@dataclass
class Chapter:
    path: pathlib.Path
    number: int
    label: str
    title: str
    figures: list[str] = field(default_factory=list)  # figure names, in order


@dataclass
class Book:
    """What a notebook's links need to know about the rest of the book."""

    chapters: dict[str, Chapter]  # by file name
    labels: dict[str, Chapter]  # chapter label -> chapter
    figures: dict[str, tuple[Chapter, int]]  # figure name -> (chapter, 1-based number)
    bibliography: dict  # key -> pybtex Entry
    glossary: dict[str, tuple[str, str]]  # lower-case term -> (term, definition)

    @classmethod
    def load(cls, root: pathlib.Path = ROOT) -> Book:
        import pybtex.database

        chapters: dict[str, Chapter] = {}
        for number, path in enumerate(_numbered_chapters(root), start=1):
            notebook = nbformat.read(path, as_version=4)
            cells = [cell for cell in notebook.cells if not _generated(cell)]
            match = re.match(r"\((\S+)\)=\n# (.+)", cells[0].source) if cells else None
            if not match:
                continue
            chapter = Chapter(path, number, match.group(1), match.group(2).strip())
            chapter.figures = [
                cell.metadata["mystnb"]["figure"]["name"] for cell in cells if _figure_name(cell)
            ]
            chapters[path.name] = chapter
        figures = {
            name: (chapter, index)
            for chapter in chapters.values()
            for index, name in enumerate(chapter.figures, start=1)
        }
        bib = pybtex.database.parse_file(root / "references.bib")
        return cls(
            chapters=chapters,
            labels={chapter.label: chapter for chapter in chapters.values()},
            figures=figures,
            bibliography=dict(bib.entries),
            glossary=_glossary(root / "appendix" / "glossary.md"),
        )


def _glossary(path: pathlib.Path) -> dict[str, tuple[str, str]]:
    """The terms of the book's {glossary} directive: term lines, then an indented definition."""
    if not path.is_file():
        return {}
    match = re.search(r"```\{glossary\}\n(?::\w+:[^\n]*\n)*(.*?)```", path.read_text(), re.S)
    entries: dict[str, tuple[str, str]] = {}
    for block in re.split(r"\n\s*\n", match.group(1) if match else ""):
        lines = [line for line in block.splitlines() if line.strip()]
        terms = [line.strip() for line in lines if not line.startswith((" ", "\t"))]
        definition = " ".join(line.strip() for line in lines if line.startswith((" ", "\t")))
        for term in terms:
            entries[term.lower()] = (term, definition)
    return entries


def _numbered_chapters(root: pathlib.Path) -> list[pathlib.Path]:
    """The notebooks of _toc.yml's numbered parts, in order (the site numbers them 1, 2, ...)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    paths = []
    for part in toc.get("parts", []):
        if not part.get("numbered"):
            continue
        for entry in part.get("chapters", []):
            path = root / f"{entry['file']}.ipynb"
            if path.is_file():
                paths.append(path)
    return paths


def _generated(cell) -> bool:
    return isinstance(cell.metadata.get(LAB_KEY), dict) and "lab" in cell.metadata[LAB_KEY]


def _figure_name(cell) -> str | None:
    if cell.cell_type != "code":
        return None
    return cell.metadata.get("mystnb", {}).get("figure", {}).get("name")


# --- citations ------------------------------------------------------------------


@functools.cache
def _pybtex_plugin(group: str, name: str):
    """pybtex's plugin `name` of `group`, made once: pybtex's own lookup reads every
    installed package's entry points on each call (30 ms here, thousands per sync)."""
    from pybtex.plugin import find_plugin

    return find_plugin(group, name)()


def _text(rich) -> str:
    """A pybtex rich text as plain text (what its render_as("text") gives)."""
    return rich.render(_pybtex_plugin("pybtex.backends", "text"))


def _plain(rich) -> str:
    return "".join(_text(part) for part in rich)


def _last_name(person) -> str:
    return " ".join(_plain([name]) for name in person.rich_prelast_names + person.rich_last_names)


def citation_label(entry) -> str:
    """'Vaswani et al., 2017': the author-year label the site prints for one entry."""
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_last_name(person) for person in people]
    if len(names) >= 3:
        who = f"{names[0]} et al."
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = names[0] if names else entry.fields.get("key", "Anon")
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


def _sort_key(entry) -> tuple:
    """sphinxcontrib-bibtex's author_year_title order, which a multi-key citation follows."""
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    return (
        [_last_name(person).lower() for person in people],
        entry.fields.get("year", ""),
        entry.fields.get("title", "").lower(),
    )


def citation_text(keys: list[str], book: Book) -> str:
    """'[Nadaraya, 1964, Watson, 1964]': what the site prints for {cite}`keys`."""
    missing = [key for key in keys if key not in book.bibliography]
    if missing:
        raise SyncError(f"citation keys not in references.bib: {missing}")
    entries = sorted((book.bibliography[key] for key in keys), key=_sort_key)
    return "[" + ", ".join(citation_label(entry) for entry in entries) + "]"


def reference_entry(key: str, book: Book) -> str:
    """One entry of a chapter's Lab-only reference list: plain text, pybtex's plain style."""
    from pybtex.database import BibliographyData

    style = _pybtex_plugin("pybtex.style.formatting", "plain")
    data = BibliographyData({key: book.bibliography[key]})
    (formatted,) = style.format_bibliography(data).entries
    return " ".join(_text(formatted.text).split())


# --- roles -> links --------------------------------------------------------------

CITATION_LINK = re.compile(r"\[(\[[^\[\]]+\])\]\(#([\w.:-]+)\)")


def rewrite_roles(text: str, chapter: Chapter, book: Book, local: set[str]) -> str:
    """``text`` with every role JupyterLab cannot resolve turned into a link (see the module).

    ``local`` holds the labels and figure names of the notebook itself, which
    JupyterLab resolves.
    """

    def replace(match: re.Match) -> str:
        role, content = match.group("role"), match.group("content")
        explicit = EXPLICIT.match(content)
        text, target = (
            (explicit.group("text"), explicit.group("target")) if explicit else (None, content)
        )
        if role.startswith("py:") and role[3:] in PY_ROLES:
            shown = text
            if shown is None:
                name = target.lstrip("~")
                shown = name.rsplit(".", 1)[-1] if target.startswith("~") else name
                if role[3:] in {"func", "meth"}:
                    shown += "()"
            return f"[`{shown}`](#{target.lstrip('~')})"
        if role in {"cite", "cite:p"}:
            # One link per key (JupyterLab resolves each to this notebook's reference
            # list): [Nadaraya, 1964] [Watson, 1964], in the bibliography's order.
            keys = [key.strip() for key in content.split(",")]
            citation_text(keys, book)  # every key exists
            keys.sort(key=lambda key: _sort_key(book.bibliography[key]))
            return " ".join(f"[{citation_text([key], book)}](#{key})" for key in keys)
        if role == "cite:t":
            raise SyncError(
                f"{{cite:t}}`{content}` in {chapter.path.name}: a link prints the citation in "
                "brackets, [Author et al., 2017]; rephrase with {cite}`...` instead"
            )
        if role not in {"ref", "numref"} or target in local:
            return match.group(0)
        if role == "ref" and target in book.labels:
            linked = book.labels[target]
            return f"[{text or linked.title}]({linked.path.name})"
        if role == "numref" and target in book.figures:
            other, number = book.figures[target]
            words = (text or "Fig. %s").replace("{number}", "%s")
            return f"[{words.replace('%s', f'{other.number}.{number}')}](#{target})"
        if text is None:
            raise SyncError(
                f"{{{role}}}`{target}` in {chapter.path.name}: JupyterLab cannot resolve a "
                f"label of another notebook; give the reference its text: "
                f"{{{role}}}`text <{target}>`"
            )
        return match.group(0)

    return ROLE.sub(replace, text)


# --- the cells only JupyterLab shows ---------------------------------------------------


def _lab_cell(kind: str, source: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(
        source, metadata={"tags": ["remove-cell"], LAB_KEY: {"lab": kind}}
    )
    return cell


def _cell_id(kind: str, anchor: str) -> str:
    """A stable cell id, so that a re-sync leaves the JSON as it was."""
    import hashlib

    return "lab-" + hashlib.sha1(f"{kind}:{anchor}".encode()).hexdigest()[:12]


def front_cell(chapter: Chapter) -> nbformat.NotebookNode:
    front = {
        "numbering": {
            "enumerator": f"{chapter.number}.%s",
            "figure": {"template": "Fig. %s"},
            "equation": {"enabled": False},
        }
    }
    source = (
        "---\n"
        + yaml.safe_dump(front, sort_keys=False).strip()
        + "\n---\n"
        + f"*Attention, Step by Step*, chapter {chapter.number}"
    )
    cell = _lab_cell("front", source)
    cell.id = _cell_id("front", chapter.label)
    return cell


def caption_cell(code_cell) -> nbformat.NotebookNode:
    figure = code_cell.metadata["mystnb"]["figure"]
    source = f":::{{figure}}\n:label: {figure['name']}\n\n{figure['caption'].strip()}\n:::"
    cell = _lab_cell("caption", source)
    cell.id = _cell_id("caption", figure["name"])
    return cell


TERM = re.compile(r"\{term\}`(?:[^`<]*<)?([^`<>]+)>?`")
API_LINK = re.compile(r"\]\(#(selfattention(?:\.\w+)+)\)")


def glossary_cell(terms: list[str], chapter: Chapter, book: Book) -> nbformat.NotebookNode:
    """The glossary entries of the terms this chapter uses, as a MyST {glossary}."""
    lines = [
        "## Glossary",
        "",
        "The terms of this chapter, from the book's glossary.",
        "",
        ":::{glossary}",
    ]
    for key in sorted({term.lower() for term in terms}):
        term, definition = book.glossary[key]
        lines += [term, ": " + rewrite_roles(definition, chapter, book, set()), ""]
    lines[-1] = ":::"
    cell = _lab_cell("glossary", "\n".join(lines))
    cell.id = _cell_id("glossary", chapter.label)
    return cell


@functools.cache
def api_summary(target: str) -> str:
    """'`padding_mask()`: Boolean mask ...': an object of the package and its docstring's first
    paragraph, for the Lab-only list of the package names a chapter links to."""
    import importlib
    import inspect

    parts = target.split(".")
    obj = None
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:]:
            obj = getattr(obj, name)
        break
    name = parts[-1]
    if inspect.isclass(obj):
        shown = f"class {name}"
    elif callable(obj):
        shown = f"{name}()"
    else:
        shown = name
    doc = inspect.getdoc(obj) if (callable(obj) or inspect.ismodule(obj)) else None
    summary = (doc or "").split("\n\n")[0]
    summary = " ".join(summary.split()).replace("``", "`")
    return f"`{shown}`\n: {summary or 'A value of the package.'}"


def api_cell(targets: list[str], chapter: Chapter) -> nbformat.NotebookNode:
    """The package names this chapter links to, each a link target with its summary."""
    lines = [
        "## The package",
        "",
        "The names of `selfattention` that this chapter uses; the book's site documents "
        "each in full.",
        "",
    ]
    for target in sorted(set(targets)):
        lines += [f"({target})=", api_summary(target), ""]
    cell = _lab_cell("api", "\n".join(lines).strip())
    cell.id = _cell_id("api", chapter.label)
    return cell


FIGURE_LINK = re.compile(r"\]\(#(fig-[\w-]+)\)")


def figures_cell(names: list[str], chapter: Chapter, book: Book) -> nbformat.NotebookNode:
    """Targets for the links to other chapters' figures, each pointing on to its notebook."""
    lines = ["## Figures of other chapters", ""]
    for name in sorted(set(names), key=lambda name: (book.figures[name][0].number, name)):
        other, number = book.figures[name]
        lines += [
            f"({name})=",
            f"Fig. {other.number}.{number} is in chapter {other.number}, "
            f"[{other.title}]({other.path.name}).",
            "",
        ]
    cell = _lab_cell("figures", "\n".join(lines).strip())
    cell.id = _cell_id("figures", chapter.label)
    return cell


def references_cell(keys: list[str], chapter: Chapter, book: Book) -> nbformat.NotebookNode:
    """The chapter's references, in the bibliography's order, each a link target."""
    lines = ["## References", ""]
    for key in sorted(set(keys), key=lambda key: _sort_key(book.bibliography[key])):
        lines += [f"({key})=", reference_entry(key, book), ""]
    cell = _lab_cell("references", "\n".join(lines).strip())
    cell.id = _cell_id("references", chapter.label)
    return cell


# --- the whole notebook -------------------------------------------------------------------


@functools.cache
def installed_kernelspec() -> dict:
    """The kernelspec JupyterLab stores once it has started this kernel."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
        display_name, language = spec.display_name, spec.language
    except Exception:  # noqa: BLE001 - no kernel installed: ipykernel's own default
        display_name, language = "Python 3 (ipykernel)", "python"
    return {"display_name": display_name, "language": language, "name": KERNEL_NAME}


def sync(
    notebook: nbformat.NotebookNode, path: pathlib.Path, book: Book | None = None
) -> nbformat.NotebookNode:
    """A copy of ``notebook`` that reads in JupyterLab as on the site (see the module)."""
    book = book or Book.load()
    notebook = copy.deepcopy(notebook)
    chapter = book.chapters.get(path.name)
    notebook.metadata["kernelspec"] = installed_kernelspec()
    cells = [cell for cell in notebook.cells if not _generated(cell)]
    for cell in cells:
        hidden = cell.metadata.get("jupyter", {})
        if cell.cell_type == "code" and hidden.get("outputs_hidden"):
            cell.metadata["collapsed"] = True
    if chapter is None:  # not (yet) a numbered chapter of _toc.yml: metadata only
        notebook.cells = cells
        return notebook
    local = {chapter.label, *chapter.figures}
    for cell in cells:
        if cell.cell_type == "markdown":
            local.update(re.findall(r"^\((\S+?)\)=\s*$", cell.source, re.MULTILINE))
    cited: list[str] = []
    synced = [front_cell(chapter)]
    for cell in cells:
        if cell.cell_type == "markdown":
            cell.source = rewrite_roles(cell.source, chapter, book, local)
        synced.append(cell)
        if _figure_name(cell):
            caption = caption_cell(cell)
            caption.source = rewrite_roles(caption.source, chapter, book, local)
            synced.append(caption)
    terms: list[str] = []
    linked: list[str] = []
    elsewhere: list[str] = []
    for cell in synced:
        if cell.cell_type != "markdown":
            continue
        cited += [match.group(2) for match in CITATION_LINK.finditer(cell.source)]
        terms += [term for term in TERM.findall(cell.source) if term.lower() in book.glossary]
        linked += API_LINK.findall(cell.source)
        elsewhere += [
            name
            for name in FIGURE_LINK.findall(cell.source)
            if name in book.figures and name not in local
        ]
    if elsewhere:
        synced.append(figures_cell(elsewhere, chapter, book))
    if terms:
        synced.append(glossary_cell(terms, chapter, book))
    if linked:
        synced.append(api_cell(linked, chapter))
    if cited:
        synced.append(references_cell(cited, chapter, book))
    notebook.cells = synced
    return notebook


def in_sync(notebook: nbformat.NotebookNode, path: pathlib.Path, book: Book) -> bool:
    return sync(notebook, path, book) == notebook
