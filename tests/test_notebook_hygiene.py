"""Every chapter notebook as stored: executed cleanly, self-contained, accessible.

nbval (``make test-notebooks``) re-runs the notebooks and compares outputs;
these checks cover what nbval cannot see: execution order, leftover errors
and warnings, machine-specific text, figures without alt text, and the
anatomy every chapter shares.
"""

import functools
import pathlib
import re

import nbformat
import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
MACHINE_SPECIFIC = re.compile(
    r"(/work/|/home/|/root/|/tmp/|site-packages|\b0x[0-9a-fA-F]{6,}\b|<Figure size|"
    r"^Text\(|<matplotlib\.|Wall time|CPU times)",
    re.MULTILINE,
)
VAGUE_ALT = {"a plot", "plot", "figure", "a figure", "image", "chart", "graph"}


def lab_only(cell):
    """A cell that scripts/lab_view.py wrote for JupyterLab; the site skips it."""
    return "remove-cell" in cell.metadata.get("tags", []) and "lab" in cell.metadata.get(
        "selfattention", {}
    )


def code_cells(notebook):
    return [cell for cell in notebook.cells if cell.cell_type == "code" and cell.source.strip()]


def text_of(output):
    if output.output_type == "stream":
        return output.text
    data = output.get("data", {})
    if "image/png" in data:
        return (
            ""  # its text/plain twin is the figure's "<Figure size ...>" label, fixed by figsize
        )
    html = "".join(data.get("text/html", ""))
    kinds = ("text/plain", "text/markdown")  # a folded answer's HTML repeats its text/plain
    kinds += () if html.startswith('<details class="sa-answer">') else ("text/html",)
    return "\n".join(str(data[kind]) for kind in kinds if kind in data)


@pytest.fixture(params=CHAPTERS, ids=[path.stem for path in CHAPTERS])
def notebook(request):
    notebook = nbformat.read(request.param, as_version=4)
    nbformat.validate(notebook)
    return notebook


def test_there_are_chapters():
    assert CHAPTERS, "no notebooks under chapters/"


def test_executed_top_to_bottom_in_one_fresh_kernel(notebook):
    counts = [cell.execution_count for cell in code_cells(notebook)]
    assert counts == list(range(1, len(counts) + 1))


def test_no_errors_or_warnings_in_outputs(notebook):
    for index, cell in enumerate(code_cells(notebook)):
        for output in cell.outputs:
            assert output.output_type != "error", f"code cell {index} stored an error"
            assert not (output.output_type == "stream" and output.name == "stderr"), (
                f"code cell {index} wrote to stderr: {output.text[:200]!r}"
            )


def test_no_machine_specific_text_in_outputs(notebook):
    for index, cell in enumerate(code_cells(notebook)):
        for output in cell.outputs:
            match = MACHINE_SPECIFIC.search(text_of(output))
            assert match is None, f"code cell {index} output contains {match.group(0)!r}"


def test_imports_the_installed_package_and_is_seeded(notebook):
    source = "\n".join(cell.source for cell in code_cells(notebook))
    assert re.search(r"^\s*(from selfattention\b|import selfattention\b)", source, re.MULTILINE)
    assert "sys.path" not in source
    assert "default_rng(" in source or "manual_seed(" in source, "seed the random generators"


def test_every_figure_has_caption_name_and_meaningful_alt_text(notebook):
    for index, cell in enumerate(code_cells(notebook)):
        if not any("image/png" in output.get("data", {}) for output in cell.outputs):
            continue
        meta = cell.metadata.get("mystnb", {})
        caption = meta.get("figure", {}).get("caption", "")
        name = meta.get("figure", {}).get("name", "")
        alt = meta.get("image", {}).get("alt", "")
        assert caption and name.startswith("fig-"), (
            f"code cell {index}: figure needs a caption and a fig- name"
        )
        assert len(alt) >= 30 and alt.strip().lower() not in VAGUE_ALT, (
            f"code cell {index}: alt text must say what the figure shows, got {alt!r}"
        )
        pngs = sum("image/png" in output.get("data", {}) for output in cell.outputs)
        assert pngs == 1, f"code cell {index} draws {pngs} figures; one figure per cell"


MAX_CODE_LINE = 79


def test_code_fits_the_page_without_scrolling(notebook):
    """The site shows about 80 characters of code before a reader must scroll sideways."""
    for index, cell in enumerate(code_cells(notebook)):
        for line in cell.source.splitlines():
            assert len(line) <= MAX_CODE_LINE, (
                f"code cell {index} has a line of {len(line)} characters: {line[:60]!r}..."
            )


def test_printed_output_fits_the_page_without_scrolling(notebook):
    """Printed lines share the code column: at most 79 characters, or the reader scrolls."""
    for index, cell in enumerate(code_cells(notebook)):
        for output in cell.outputs:
            for line in text_of(output).splitlines():
                assert len(line) <= MAX_CODE_LINE, (
                    f"code cell {index} prints a line of {len(line)} characters: {line[:60]!r}..."
                )


def test_hidden_solutions_are_folded_in_jupyterlab_too(notebook):
    """A solution cell hidden on the site (tag hide-cell) starts collapsed in JupyterLab."""
    hidden = [cell for cell in notebook.cells if "hide-cell" in cell.metadata.get("tags", [])]
    assert hidden, "exercise solutions go in hide-cell cells"
    for index, cell in enumerate(notebook.cells):
        if "hide-cell" in cell.metadata.get("tags", []):
            folded = cell.metadata.get("jupyter", {})
            assert folded.get("source_hidden") and folded.get("outputs_hidden"), (
                f"cell {index} is hidden on the site but open in JupyterLab: set "
                "metadata.jupyter.source_hidden and outputs_hidden"
            )


def test_solution_results_stay_folded_after_run_all(notebook):
    """Run All in JupyterLab unfolds every output it produces: a solution cell's
    result must then still be folded, so the cell starts with ``%answer`` and
    its only outputs are closed ``<details>`` elements (selfattention.book.answer)."""
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code" or "hide-cell" not in cell.metadata.get("tags", []):
            continue
        assert cell.source.startswith("%answer\n"), (
            f"solution cell {index} does not start with %answer: Run All in JupyterLab "
            "would show its printed answer"
        )
        for output in cell.outputs:
            html = output.get("data", {}).get("text/html", "")
            html = "".join(html) if isinstance(html, list) else html
            assert output.output_type == "display_data" and html.startswith(
                '<details class="sa-answer">'
            ), f"solution cell {index} shows a {output.output_type} output outside its fold"


def test_chapter_anatomy(notebook):
    markdown = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    # The first cell the site shows (a JupyterLab-only cell may come before it).
    first = next(cell for cell in notebook.cells if not lab_only(cell))
    assert first.cell_type == "markdown" and re.match(r"\(\S+\)=\n# ", first.source), (
        "the first cell is a label like (chapter-label)= followed by the '# Title'"
    )
    assert "You will learn" in markdown
    assert re.search(r"^## Summary", markdown, re.MULTILINE)
    assert re.search(r"^## Exercises", markdown, re.MULTILINE)
    assert "{dropdown}" in markdown, "exercise solutions go in a dropdown"
    source = "\n".join(cell.source for cell in code_cells(notebook))
    assert re.search(r"^\s*assert ", source, re.MULTILINE), (
        "a check cell asserts the chapter's claim"
    )


NUMBERED_LINE = re.compile(r"^ {0,3}\d{1,9}[.)](?:[ \t]|$)")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")


def accidental_list_lines(markdown):
    """Prose lines that Markdown turns into a numbered list by accident.

    A line opening with a number and a period ("1. Zeroing them ...") inside a
    paragraph starts an ordered list there, so a wrapped sentence ending
    "... sums to less than" loses its "1." to a list marker. A numbered line is
    fine at the start of a paragraph (after a blank line) or inside a list;
    fenced code and display math are skipped.
    """
    found = []
    previous, in_list, fence, in_math = "", False, None, False
    for line in markdown.splitlines():
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            previous = ""
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            previous = ""
            continue
        if stripped == "$$" or (stripped.startswith("$$") and stripped.count("$$") == 1):
            in_math = not in_math
            previous = ""
            continue
        if in_math:
            continue
        if not stripped or stripped.startswith(("#", ":::", "```{")):
            previous, in_list = "", False  # a blank line, heading or directive ends a block
            continue
        if LIST_ITEM.match(line):
            if NUMBERED_LINE.match(line) and previous and not in_list:
                found.append(f"{previous.strip()[-40:]!r} / {stripped[:40]!r}")
            in_list = True
        previous = line
    return found


def test_no_prose_line_turns_into_a_list_by_accident(notebook):
    lines = [
        line
        for cell in notebook.cells
        if cell.cell_type == "markdown"
        for line in accidental_list_lines(cell.source)
    ]
    assert not lines, f"a line starting with a number and a period becomes a list: {lines}"


def test_the_accidental_list_check_sees_a_wrapped_number():
    assert accidental_list_lines("the row sums to less than\n1. Zeroing them")
    assert not accidental_list_lines("Steps:\n\n1. one\n2. two\n   more\n3. three")
    assert not accidental_list_lines("- a\n- b\n\n$$\nx\n1. y\n$$")


EXERCISE_HEADING = re.compile(r"\*\*Exercise \d+(?: \([^()]+\))?\.\*\* ")


def test_exercise_headings_share_one_style(notebook):
    """Every exercise opens with '**Exercise 2.**' or '**Exercise 2 (code).**' and its text."""
    markdown = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    openings = re.findall(r"^(?:#+ *)?\**Exercise \d+.*$", markdown, re.MULTILINE)
    assert openings, "no exercises"
    odd = [line[:60] for line in openings if not EXERCISE_HEADING.match(line)]
    assert not odd, f"exercise headings in another style: {odd}"


def test_every_reference_is_cited():
    """The References page lists all of references.bib (:all:, since the chapters cite
    with links), so every entry must be cited: by a {cite} role or a #key link."""
    keys = set(re.findall(r"@\w+\{([^,\s]+),", (ROOT / "references.bib").read_text()))
    pages = [*CHAPTERS, *(ROOT / "appendix").glob("*.md"), ROOT / "intro.md"]
    cited = set()
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"\{cite(?::\w+)?\}`([^`]+)`", text):
            cited.update(key.strip() for key in match.group(1).split(","))
        cited.update(re.findall(r"\]\(#([\w.:-]+)\)", text))
    assert keys <= cited, f"references.bib entries no page cites: {sorted(keys - cited)}"


def test_every_chapter_is_in_the_table_of_contents():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    listed = {entry["file"] for part in toc["parts"] for entry in part.get("chapters", [])}
    for path in CHAPTERS:
        assert f"chapters/{path.stem}" in listed, f"{path.name} is missing from _toc.yml"
    for entry in listed:
        matches = list(ROOT.glob(entry + ".*"))
        assert matches, f"_toc.yml lists {entry}, which does not exist"


@functools.cache
def lab_view_module():
    """scripts/lab_view.py, which `make execute` runs on every notebook it executes."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("lab_view", ROOT / "scripts" / "lab_view.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("lab_view", module)
    spec.loader.exec_module(module)
    return module


@functools.cache
def lab_book():
    return lab_view_module().Book.load(ROOT)


@pytest.mark.parametrize("path", CHAPTERS, ids=[path.stem for path in CHAPTERS])
def test_reads_in_jupyterlab_as_on_the_site(path):
    """Roles JupyterLab cannot resolve are links, figures have JupyterLab captions, the
    kernel name is JupyterLab's: what `make execute` (scripts/lab_view.py) writes."""
    lab_view = lab_view_module()
    notebook = nbformat.read(path, as_version=4)
    synced = lab_view.sync(notebook, path, lab_book())
    changed = [
        index
        for index, (old, new) in enumerate(zip(notebook.cells, synced.cells, strict=False))
        if old != new
    ]
    assert synced == notebook, (
        f"{path.name} is not as JupyterLab should read it (first differing cell: "
        f"{changed[:1] or 'count'}, kernelspec {notebook.metadata.get('kernelspec')}): "
        "run `python scripts/notebooks.py sync` or `make execute`"
    )
