"""Chapter 1 exercise: a weighted average of token vectors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._runner import Case, run_checks


def reference_weighted_average(importance: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Normalise non-negative ``importance (T,)`` to sum 1, then average ``vectors (T, d)``."""
    weights = importance / importance.sum()
    return weights @ vectors  # (d,)


def check_weighted_average(fn: Callable[[np.ndarray, np.ndarray], Any]) -> bool:
    """Check ``fn(importance, vectors)`` against the reference weighted average."""
    rng = np.random.default_rng(1)
    cases = [
        Case("one important token", (np.array([0.0, 1.0, 0.0]), np.eye(3))),
        Case("equal importance gives the plain mean", (np.ones(4), rng.normal(size=(4, 2)))),
        Case(
            "importance not summing to 1",
            (np.array([2.0, 6.0]), np.array([[1.0, 0.0], [0.0, 1.0]])),
        ),
        Case("seven tokens, d = 5", (rng.uniform(0.1, 3.0, size=7), rng.normal(size=(7, 5)))),
    ]
    return run_checks("check_weighted_average", fn, reference_weighted_average, cases)
