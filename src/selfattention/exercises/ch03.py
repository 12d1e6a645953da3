"""Chapter 3 exercise: pairwise cosine similarity of two sets of vectors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..handmath.similarity import cosine_similarity
from ._runner import Case, run_checks


def reference_pairwise_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row of ``a (..., T_q, d)`` with every row of ``b (..., T_k, d)``.

    Returns ``(..., T_q, T_k)``; a zero vector has similarity 0 with everything.
    """
    return cosine_similarity(a, b)


def check_cosine_similarity(fn: Callable[[np.ndarray, np.ndarray], Any]) -> bool:
    """Check ``fn(a, b)`` against the package's ``cosine_similarity``.

    ``a`` is ``(..., T_q, d)`` and ``b`` is ``(..., T_k, d)``; ``fn`` must return the
    ``(..., T_q, T_k)`` matrix of cosine similarities, with 0 (not NaN) wherever a
    zero vector is involved. Prints the verdict and returns True or False.
    """
    rng = np.random.default_rng(3)
    cases = [
        Case("unit vectors along the axes, T_q = T_k = 2", (np.eye(2), np.eye(2))),
        Case(
            "a long key: its length must not matter",
            (np.array([[1.0, 0.0]]), np.array([[3.0, 4.0], [10.0, 0.0]])),
        ),
        Case(
            "same, opposite and perpendicular directions give 1, -1 and 0",
            (np.array([[2.0, 1.0]]), np.array([[4.0, 2.0], [-2.0, -1.0], [-1.0, 2.0]])),
        ),
        Case("3 queries and 5 keys, d = 4", (rng.normal(size=(3, 4)), rng.normal(size=(5, 4)))),
        Case(
            "a zero vector gives 0, not NaN",
            (np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([[1.0, 0.0], [0.0, 0.0]])),
        ),
        Case(
            "a batch: (2, 3, 4) with (2, 5, 4)",
            (rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4))),
        ),
    ]
    return run_checks("check_cosine_similarity", fn, reference_pairwise_cosine, cases)
