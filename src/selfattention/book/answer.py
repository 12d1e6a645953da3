"""The ``%answer`` line magic: an exercise solution's printed result, folded.

Every solution cell (tag ``hide-cell``) starts with the line ``%answer``.
The rest of the cell runs as any cell does, and an exception (a failing
checker's AssertionError) stops it as usual; but what it prints is held
back until the cell ends, and then comes out as one display: in HTML a
``<details>`` element, closed, so that Run All in JupyterLab (which unfolds
every output it produces) shows "Result (click to show)" and no answer
until the reader clicks; in plain text the printed lines exactly, which
nbval compares. The site shows the same closed element inside the cell's
own dropdown. A line magic, not a cell magic, so that ruff still lints the
solution (it skips cells that start with a cell magic).
``selfattention.setup()`` registers the magic.
"""

from __future__ import annotations

import html
import io
import sys
from typing import Any

from .shell import running_shell

#: What the folded result's summary line reads.
SUMMARY = "Result (click to show)"


def answer_bundle(text: str) -> dict[str, str]:
    """The display of ``text``: a closed HTML ``<details>``, and the text itself.

    Examples
    --------
    >>> bundle = answer_bundle("3 < 4\\n")
    >>> bundle["text/plain"]
    '3 < 4\\n'
    >>> print(bundle["text/html"])
    <details class="sa-answer">
    <summary>Result (click to show)</summary>
    <pre>
    3 &lt; 4
    </pre>
    </details>
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return {
        "text/plain": text,
        # One tag a line, so that no stored line is longer than the text's own
        # (a newline right after <pre> is not part of its content).
        "text/html": (
            f'<details class="sa-answer">\n<summary>{SUMMARY}</summary>\n'
            f"<pre>\n{html.escape(text, quote=False)}</pre>\n</details>"
        ),
    }


def _answer(line: str) -> None:
    """Hold back what the rest of this cell prints; display it folded when the cell ends."""
    from IPython.display import display

    shell = running_shell()
    if line.strip():
        raise ValueError(f"%answer takes no arguments, got {line.strip()!r}")
    printed, stdout = io.StringIO(), sys.stdout

    def release(*_: Any) -> None:
        shell.events.unregister("post_run_cell", release)
        sys.stdout = stdout
        if printed.getvalue():
            display(answer_bundle(printed.getvalue()), raw=True)

    sys.stdout = printed
    shell.events.register("post_run_cell", release)


def register(shell: Any | None = None) -> None:
    """Register ``%answer`` in ``shell`` (the running IPython; nothing outside IPython).

    Examples
    --------
    >>> class Shell:
    ...     def register_magic_function(self, function, magic_kind, magic_name):
    ...         print(magic_kind, magic_name)
    >>> register(Shell())
    line answer
    >>> register()  # outside IPython: nothing to do
    """
    if shell is None:
        shell = running_shell()
    if shell is None:
        return
    shell.register_magic_function(_answer, magic_kind="line", magic_name="answer")
