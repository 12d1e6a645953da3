"""The machinery behind every exercise checker.

A checker runs the reader's function on a list of cases, compares each
result with the package's reference, and prints either one line saying all
cases pass or the first failing case with what was expected and what came
back. The reader's function works on copies of the inputs, with numpy's
floating-point warnings silenced, so a naive ``exp`` shows up as a failing
case rather than as a warning. It returns True or False, so a notebook can ``assert`` on it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Case:
    """One input to try: a description, arguments, and optional tolerances.

    Parameters
    ----------
    description : str
        What the case tests; printed when it fails.
    args : tuple
        Positional arguments for the reader's function and the reference.
    kwargs : dict, optional
        Keyword arguments for both.
    atol, rtol : float, optional
        Tolerances for this case only, overriding the checker's defaults
        (e.g. looser ones for a float16 case).

    Examples
    --------
    >>> import numpy as np
    >>> from selfattention.exercises import Case
    >>> case = Case("a row of two scores", (np.array([1.0, 2.0]),), atol=1e-3)
    >>> case.description, case.kwargs
    ('a row of two scores', None)
    """

    description: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] | None = None
    atol: float | None = None
    rtol: float | None = None


def _to_numpy(value: Any) -> Any:
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    if isinstance(value, (tuple, list)):
        return type(value)(_to_numpy(item) for item in value)
    return value


def _summary(value: Any) -> str:
    array = np.asarray(value) if not isinstance(value, (tuple, list)) else None
    if array is not None and array.dtype != object:
        text = np.array2string(array, precision=4, suppress_small=True, threshold=20)
        return f"{text} (shape {array.shape})"
    return repr(value)


def _mismatch(expected: Any, got: Any, atol: float, rtol: float) -> str | None:
    """Return a reason if ``got`` differs from ``expected``, else None."""
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"expected a {type(expected).__name__} of {len(expected)} items"
        for index, (want, have) in enumerate(zip(expected, got, strict=True)):
            reason = _mismatch(want, have, atol, rtol)
            if reason:
                return f"item {index}: {reason}"
        return None
    try:
        want = np.asarray(expected, dtype=np.float64)
        have = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        return None if expected == got else "values differ"
    if want.shape != have.shape:
        return f"shape {have.shape} instead of {want.shape}"
    if np.isnan(have).any() and not np.isnan(want).any():
        return "contains NaN"
    if not np.allclose(have, want, atol=atol, rtol=rtol, equal_nan=True):
        return "values differ"
    return None


def run_checks(
    name: str,
    candidate: Callable[..., Any],
    reference: Callable[..., Any],
    cases: Sequence[Case],
    atol: float = 1e-6,
    rtol: float = 1e-5,
) -> bool:
    """Run ``candidate`` and ``reference`` on every case; print and return the verdict.

    The reader's function gets a deep copy of each case's arguments and runs
    with numpy's floating-point warnings silenced. Results are compared with
    ``numpy.allclose`` (tuples and lists item by item), and a result with
    NaN where the reference has none fails. The first failing case is
    printed with the expected and the returned value; an exception raised by
    ``candidate`` is reported as a failure, not propagated.

    Parameters
    ----------
    name : str
        The checker's name, printed at the start of the verdict.
    candidate : callable
        The reader's function.
    reference : callable
        The package's correct function, called with the same arguments.
    cases : sequence of Case
        The inputs to try, in order.
    atol : float, default 1e-6
        Absolute tolerance, unless a case sets its own.
    rtol : float, default 1e-5
        Relative tolerance, unless a case sets its own.

    Returns
    -------
    bool
        True if every case matches, so a notebook can ``assert`` on it.

    Raises
    ------
    TypeError
        If ``candidate`` is not callable.

    Examples
    --------
    >>> import numpy as np
    >>> from selfattention.exercises import Case, run_checks
    >>> cases = [Case("two numbers", (np.array([1.0, 3.0]),)),
    ...          Case("three numbers", (np.array([0.0, 1.0, 5.0]),))]
    >>> run_checks("check_mean", np.mean, np.mean, cases)
    ✓ check_mean: all 2 cases pass
    True
    >>> run_checks("check_mean", np.sum, np.mean, cases)
    ✗ check_mean: case 1 (two numbers)
      values differ
      expected: 2. (shape ())
      got:      4. (shape ())
    False
    """
    if not callable(candidate):
        raise TypeError(f"{name} needs a function, got {type(candidate).__name__}")
    for number, case in enumerate(cases, start=1):
        kwargs = case.kwargs or {}
        expected = _to_numpy(reference(*case.args, **kwargs))
        try:
            # The reader's function gets its own copy of the inputs (an in-place
            # edit cannot spoil the comparison), and numpy's overflow and 0/0
            # warnings are silenced: the verdict below reports them as inf or NaN.
            args, call_kwargs = copy.deepcopy((case.args, kwargs))
            with np.errstate(all="ignore"):
                got = _to_numpy(candidate(*args, **call_kwargs))
        except Exception as exc:  # noqa: BLE001 - report any failure of the reader's code
            print(
                f"✗ {name}: case {number} ({case.description}) raised {type(exc).__name__}: {exc}"
            )
            return False
        reason = _mismatch(
            expected,
            got,
            atol if case.atol is None else case.atol,
            rtol if case.rtol is None else case.rtol,
        )
        if reason:
            # The reason gets its own line, so that each line fits the page.
            print(
                f"✗ {name}: case {number} ({case.description})\n  {reason}\n"
                f"  expected: {_summary(expected)}\n  got:      {_summary(got)}"
            )
            return False
    print(f"✓ {name}: all {len(cases)} cases pass")
    return True
