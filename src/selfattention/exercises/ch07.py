"""Chapter 7 exercise: a numerically stable softmax over the last axis."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..handmath.softmax import softmax
from ._runner import Case, run_checks

#: (atol, rtol) per input dtype. float16 keeps about three significant digits;
#: float32 scores near 1000 carry only about 1e-4 of absolute precision, which a
#: correct log-sum-exp route turns into a relative error of a few 1e-5.
_TOLERANCES = {
    np.dtype(np.float16): (2e-3, 1e-2),
    np.dtype(np.float32): (1e-5, 1e-4),
    np.dtype(np.float64): (1e-9, 1e-7),
}


def reference_softmax(x: np.ndarray) -> np.ndarray:
    """The package's stable softmax over the last axis."""
    return softmax(x, axis=-1)


def _case(description: str, x: np.ndarray) -> Case:
    """A case whose tolerances follow the dtype of its scores ``x``."""
    atol, rtol = _TOLERANCES[x.dtype]
    return Case(description, (x,), atol=atol, rtol=rtol)


def _stable_softmax_cases() -> list[Case]:
    rng = np.random.default_rng(7)
    return [
        _case("one row of small scores, shape (3,)", np.array([1.0, 2.0, 3.0])),
        _case(
            "a (2, 3) score matrix: each row (query) must sum to 1",
            np.array([[1.0, 2.0, 3.0], [3.0, 0.0, -1.0]]),
        ),
        _case("batched scores of shape (2, 3, 4)", rng.normal(size=(2, 3, 4))),
        _case(
            "float32 scores near 1000",
            np.array([[1000.0, 999.0, 998.0]], dtype=np.float32),
        ),
        _case(
            "float16 scores up to 12 (exp(12) overflows float16)",
            np.array([[12.0, 10.0, 8.0, 6.0], [0.5, -1.0, 2.0, 0.0]], dtype=np.float16),
        ),
        _case(
            "very negative scores near -1000 (naive exp underflows to 0/0)",
            np.array([[-1000.0, -1001.0, -1002.0]], dtype=np.float32),
        ),
        _case(
            "rows on very different scales: subtract each row's own maximum",
            np.array([[1000.0, 999.0], [0.0, 1.0]], dtype=np.float32),
        ),
        _case(
            "float32 rows spread wider than exp's range, (1000, 0, -1000) and reversed "
            "(subtracting the mean, the minimum or the first entry overflows)",
            np.array([[1000.0, 0.0, -1000.0], [-1000.0, 0.0, 1000.0]], dtype=np.float32),
        ),
        _case(
            "float16 rows (12, -12) and (-12, 12): only the maximum keeps exp below 65504",
            np.array([[12.0, -12.0], [-12.0, 12.0]], dtype=np.float16),
        ),
    ]


def check_stable_softmax(fn: Callable[[np.ndarray], Any]) -> bool:
    """Check ``fn(x)``, a softmax over the last axis, against the package's ``softmax``.

    ``x`` is a float array of any shape ``(..., T)``; ``fn`` must return weights
    of the same shape, each slice along the last axis summing to 1. The cases
    include huge float32 scores and float16 scores that overflow a naive
    ``exp``, and rows that spread wider than ``exp``'s range, so that only
    subtracting each row's maximum passes (not its mean, minimum or first
    entry); tolerances follow each case's dtype. Prints one line (or the
    first failing case with expected and got values) and returns True or False.
    """
    return run_checks("check_stable_softmax", fn, reference_softmax, _stable_softmax_cases())
