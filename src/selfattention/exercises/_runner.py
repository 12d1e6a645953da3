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


#: Slices of a 3-D or larger array shown in a failure report, at most.
MAX_SLICES = 6
#: The report's lines stay within the 79 characters of a notebook's output.
LINE_WIDTH = 79


def _as_array(value: Any) -> np.ndarray | None:
    """``value`` as a numeric or boolean array, or None if it is not one."""
    if isinstance(value, (tuple, list)):
        try:
            array = np.asarray(value)
        except ValueError:  # ragged
            return None
    else:
        array = np.asarray(value)
    return array if array.dtype.kind in "biuf" else None


def _element_formatter(arrays: Sequence[np.ndarray]) -> Callable[[Any], str]:
    """One format for the elements of every array, padded to one width, so that
    the expected and the returned values line up column by column."""
    if all(array.dtype.kind == "b" for array in arrays):
        texts = {True: "True", False: "False"}
        return lambda value: texts[bool(value)].rjust(5)
    values = np.concatenate([array.astype(np.float64).ravel() for array in arrays])

    def text(value: Any) -> str:
        value = float(value)
        if np.isnan(value):
            return "nan"
        if np.isinf(value):
            return "inf" if value > 0 else "-inf"
        if value == round(value):
            return f"{value:.0f}." if abs(value) < 1e6 else f"{value:.3g}"  # 3., -1e+09
        return f"{value:.4f}" if 1e-4 <= abs(value) < 1e5 else f"{value:.3e}"

    width = max((len(text(value)) for value in values), default=1)
    return lambda value: text(value).rjust(width)


def _slice_name(index: tuple[int, ...]) -> str:
    return "[" + ", ".join([str(int(i)) for i in index] + [":", ":"]) + "]"


def _array_lines(
    array: np.ndarray,
    label: str,
    element: Callable[[Any], str],
    slices: Sequence[int] | None = None,
    note: str = "",
) -> list[str]:
    """``array`` after ``label``; a 3-D or larger one as 2-D slices, each named.

    Rows continue under the first row's opening bracket, so nothing is ragged,
    and two arrays formatted with the same ``element`` line up. ``slices``
    picks which 2-D slices (numbered in C order) to show, by default the first
    ``MAX_SLICES``, and ``note`` says what the others are.
    """
    options = {"formatter": {"all": element}, "separator": " ", "threshold": 60}
    if array.ndim <= 2:
        prefix = f"  {label} "
        shape = f" (shape {array.shape})"
        body = np.array2string(
            array, prefix=prefix, max_line_width=LINE_WIDTH - len(shape), **options
        )
        return [prefix + body + shape]
    lead = array.shape[:-2]
    count = int(np.prod(lead))
    shown = list(range(min(count, MAX_SLICES))) if slices is None else list(slices)
    flat = array.reshape(count, *array.shape[-2:])
    lines = [f"  {label} shape {array.shape}"]
    for k in shown:
        prefix = f"    {_slice_name(np.unravel_index(k, lead))} "
        body = np.array2string(flat[k], prefix=prefix, max_line_width=LINE_WIDTH, **options)
        lines.append(prefix + body)
    if len(shown) < count:
        lines.append(f"    ({note or f'{count - len(shown)} more slices not shown'})")
    return lines


def _show(expected: Any, got: Any) -> str:
    """The expected and the returned value, one below the other, aligned.

    A 3-D or larger result is shown as 2-D slices; when it has more than
    ``MAX_SLICES`` of them, the ones that differ come first.
    """
    want, have = _as_array(expected), _as_array(got)
    if want is None or have is None:
        return f"  expected: {expected!r}\n  got:      {got!r}"
    slices, note = None, ""
    if want.ndim > 2 and want.shape == have.shape:
        count = int(np.prod(want.shape[:-2]))
        if count > MAX_SLICES:
            flat_want = want.reshape(count, -1)
            flat_have = have.reshape(count, -1)
            differ = [
                k
                for k in range(count)
                if not np.array_equal(flat_want[k], flat_have[k], equal_nan=True)
            ]
            slices = (differ or list(range(count)))[:MAX_SLICES]
            hidden_differ = len(differ) - len([k for k in slices if k in differ])
            note = f"{count - len(slices) - hidden_differ} more slices equal"
            if hidden_differ:
                note += f", {hidden_differ} more differ"
    element = _element_formatter([want, have])
    return "\n".join(
        _array_lines(want, "expected:", element, slices, note)
        + _array_lines(have, "got:     ", element, slices, note)
    )


def _failing_item(expected: Any, got: Any, atol: float, rtol: float) -> tuple[Any, Any]:
    """The innermost items of two matching tuples or lists that differ, to show."""
    while (
        isinstance(expected, (tuple, list))
        and isinstance(got, (tuple, list))
        and len(expected) == len(got)
        and _as_array(expected) is None
    ):
        for want, have in zip(expected, got, strict=True):
            if _mismatch(want, have, atol, rtol):
                expected, got = want, have
                break
        else:
            break
    return expected, got


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
        case_atol = atol if case.atol is None else case.atol
        case_rtol = rtol if case.rtol is None else case.rtol
        reason = _mismatch(expected, got, case_atol, case_rtol)
        if reason:
            # The reason gets its own line, so that each line fits the page.
            print(f"✗ {name}: case {number} ({case.description})\n  {reason}")
            print(_show(*_failing_item(expected, got, case_atol, case_rtol)))
            return False
    print(f"✓ {name}: all {len(cases)} cases pass")
    return True
