"""The running IPython shell, for the set-up that only a notebook needs."""

from __future__ import annotations

from typing import Any


def running_shell() -> Any | None:
    """The IPython shell this code runs in, or None (a script, pytest, a plain Python).

    Examples
    --------
    >>> running_shell() is None  # a doctest runs outside IPython
    True
    """
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the notebook stack
        return None
    return get_ipython()
