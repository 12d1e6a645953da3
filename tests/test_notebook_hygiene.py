"""Every chapter notebook as stored: executed cleanly, self-contained, accessible.

nbval (``make test-notebooks``) re-runs the notebooks and compares outputs;
these checks cover what nbval cannot see: execution order, leftover errors
and warnings, machine-specific text, figures without alt text, and the
anatomy every chapter shares.
"""

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
    return "\n".join(
        str(data[kind]) for kind in ("text/plain", "text/html", "text/markdown") if kind in data
    )


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


def test_chapter_anatomy(notebook):
    markdown = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    first = notebook.cells[0]
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


def test_every_chapter_is_in_the_table_of_contents():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    listed = {entry["file"] for part in toc["parts"] for entry in part.get("chapters", [])}
    for path in CHAPTERS:
        assert f"chapters/{path.stem}" in listed, f"{path.name} is missing from _toc.yml"
    for entry in listed:
        matches = list(ROOT.glob(entry + ".*"))
        assert matches, f"_toc.yml lists {entry}, which does not exist"
