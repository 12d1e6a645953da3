"""Execute the chapter notebooks in fresh kernels: refresh them, or time them.

    python scripts/notebooks.py execute [NOTEBOOK ...]   # sync, then rewrite stored outputs
    python scripts/notebooks.py bench   [NOTEBOOK ...]   # print seconds per notebook
    python scripts/notebooks.py sync    [NOTEBOOK ...]   # only the JupyterLab view (below)
    python scripts/notebooks.py check   [NOTEBOOK ...]   # fail if a notebook needs a sync

Execution uses nbclient (what ``jupyter execute`` runs) with timing metadata
turned off, so that a re-run leaves the JSON byte-identical when nothing
changed, with the notebook's folder as the working directory.

``sync`` (scripts/lab_view.py) makes a notebook read in JupyterLab as its page
reads on the site: roles JupyterLab cannot resolve become links, JupyterLab-only
cells give figures their captions and links their targets, and the stored
kernel name is the one JupyterLab writes. ``execute`` syncs first.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import lab_view  # scripts/lab_view.py, beside this file
import nbformat
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUDGET_SECONDS = 20.0
# The chapters that train get 60 s: the capstone trains six small models,
# chapter 15 three two-layer transformers. Chapter 19 starts four processes
# (each imports torch), and its issue gives it 30 s.
BUDGETS = {
    "11_training_attention.ipynb": 60.0,
    "15_induction_heads.ipynb": 60.0,
    "19_attention_across_devices.ipynb": 30.0,
}


def merge_streams(notebook: nbformat.NotebookNode) -> None:
    """Join consecutive stream outputs of the same name into one, exactly.

    Under load the kernel may deliver one ``print`` in several pieces; stored
    that way, the site would show line breaks the code never printed.
    """
    for cell in notebook.cells:
        merged: list = []
        for output in cell.get("outputs", []):
            if (
                output.output_type == "stream"
                and merged
                and merged[-1].output_type == "stream"
                and merged[-1].name == output.name
            ):
                merged[-1].text += output.text
            else:
                merged.append(output)
        if "outputs" in cell:
            cell.outputs = merged


def run(
    path: pathlib.Path, notebook: nbformat.NotebookNode | None = None
) -> tuple[nbformat.NotebookNode, float]:
    """Execute one notebook top to bottom in a new kernel; return it and the seconds taken."""
    notebook = notebook if notebook is not None else nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        record_timing=False,
        # The kernel warns on stderr that it talks over local TCP; that is expected here.
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    merge_streams(notebook)
    return notebook, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("mode", choices=["execute", "bench", "sync", "check"])
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path)
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "chapters").glob("*.ipynb"))
    if args.mode in ("execute", "sync", "check"):
        book = lab_view.Book.load()
        try:
            synced = {
                path: lab_view.sync(nbformat.read(path, as_version=4), path, book)
                for path in paths
            }
        except lab_view.SyncError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    if args.mode == "check":
        stale = [p.name for p in paths if synced[p] != nbformat.read(p, as_version=4)]
        for name in stale:
            print(f"{name} needs `python scripts/notebooks.py sync` (or make execute)")
        return 1 if stale else 0
    if args.mode == "sync":
        for path in paths:
            if synced[path] != nbformat.read(path, as_version=4):
                nbformat.write(synced[path], path)
                print(f"synced {path}")
        return 0
    slow = []
    if args.mode == "bench":
        exceptions = ", ".join(
            f"ch. {name[:2].lstrip('0')}: {seconds:.0f} s" for name, seconds in BUDGETS.items()
        )
        print(f"{'notebook':<45} {'seconds':>8}  (budget {BUDGET_SECONDS:.0f} s; {exceptions})")
    for path in paths:
        notebook, seconds = run(path, synced[path] if args.mode == "execute" else None)
        if args.mode == "execute":
            nbformat.write(notebook, path)
            shown = path.relative_to(ROOT) if path.is_absolute() else path
            print(f"executed {shown} in {seconds:.1f} s")
        else:
            budget = BUDGETS.get(path.name, BUDGET_SECONDS)
            flag = "" if seconds <= budget else "  OVER BUDGET"
            slow += [path.name] if flag else []
            trains = f"  (trains: {budget:.0f} s)" if budget != BUDGET_SECONDS else ""
            print(f"{path.name:<45} {seconds:8.1f}{trains}{flag}")
    if slow:
        print(f"{len(slow)} notebook(s) over their budget: {', '.join(slow)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
