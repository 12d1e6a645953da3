"""Chapter 6 exercise: the scaled score matrix ``Q K^T / sqrt(d_k)``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ._runner import Case, run_checks


def reference_scaled_scores(query: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Return ``query @ keys^T / sqrt(d_k)`` of shape ``(..., T_q, T_k)``.

    ``query`` is ``(..., T_q, d_k)`` and ``keys`` is ``(..., T_k, d_k)``; ``d_k``
    is read from the last axis, the per-head key dimension.
    """
    d_k = query.shape[-1]
    return query @ np.swapaxes(keys, -1, -2) / math.sqrt(d_k)  # (..., T_q, T_k)


def check_scaled_scores(fn: Callable[[np.ndarray, np.ndarray], Any]) -> bool:
    """Check ``fn(query, keys)`` (numpy arrays) against ``query @ keys^T / sqrt(d_k)``."""
    rng = np.random.default_rng(6)
    cases = [
        Case(
            "d_k = 4, one query, three keys: divide by sqrt(4) = 2",
            (
                np.array([[1.0, 2.0, 0.0, 1.0]]),
                np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0], [2.0, 1.0, 0.0, 3.0]]),
            ),
        ),
        Case(
            "d_k = 36 (d_model = 288 with 8 heads): divide by 6, T_q = 5, T_k = 7",
            (rng.normal(size=(5, 36)), rng.normal(size=(7, 36))),
        ),
        Case(
            "more keys than queries and than d_k: T_q = 2, T_k = 9, d_k = 3",
            (rng.normal(size=(2, 3)), rng.normal(size=(9, 3))),
        ),
        Case("d_k = 1, T_q = 3, T_k = 1", (rng.normal(size=(3, 1)), rng.normal(size=(1, 1)))),
        Case(
            "batched: 8 heads, query (8, 3, 36), keys (8, 4, 36)",
            (rng.normal(size=(8, 3, 36)), rng.normal(size=(8, 4, 36))),
        ),
    ]
    return run_checks("check_scaled_scores", fn, reference_scaled_scores, cases)
