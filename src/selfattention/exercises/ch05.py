"""Chapter 5 exercise: the raw score matrix ``Q K^T`` of self-attention."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..toys.toy_text import position_aware_embeddings, tokenize
from ._runner import Case, run_checks


def reference_qkv_scores(x: np.ndarray, w_q: np.ndarray, w_k: np.ndarray) -> np.ndarray:
    """Project ``x (T, d_model)`` with ``w_q, w_k (d_model, d_k)``; return ``Q K^T (T, T)``."""
    queries = x @ w_q  # (T, d_k)
    keys = x @ w_k  # (T, d_k)
    return queries @ keys.T  # (T, T)


def check_qkv_scores(fn: Callable[[np.ndarray, np.ndarray, np.ndarray], Any]) -> bool:
    """Check ``fn(x, w_q, w_k)`` (numpy arrays) against ``(x @ w_q) @ (x @ w_k).T``."""
    rng = np.random.default_rng(5)
    hi = position_aware_embeddings(tokenize("Hi, how are you?"), d_model=4)  # (6, 4)
    shared = rng.normal(size=(3, 2))  # (d_model, d_k), used as both w_q and w_k
    cases = [
        Case(
            "one token, d_model = 2, d_k = 2",
            (
                np.array([[1.0, 2.0]]),
                np.array([[1.0, 0.0], [0.0, 1.0]]),
                np.array([[0.0, 1.0], [1.0, 0.0]]),
            ),
        ),
        Case(
            "'Hi, how are you?': T = 6, d_model = 4, d_k = 3",
            (hi, rng.normal(size=(4, 3)), rng.normal(size=(4, 3))),
        ),
        Case(
            "w_q = w_k, so the scores are symmetric: T = 3, d_model = 3, d_k = 2",
            (rng.normal(size=(3, 3)), shared, shared.copy()),
        ),
        Case(
            "d_k larger than d_model: T = 4, d_model = 2, d_k = 5",
            (rng.normal(size=(4, 2)), rng.normal(size=(2, 5)), rng.normal(size=(2, 5))),
        ),
        Case(
            "T = 7, d_model = 6, d_k = 1",
            (rng.normal(size=(7, 6)), rng.normal(size=(6, 1)), rng.normal(size=(6, 1))),
        ),
    ]
    return run_checks("check_qkv_scores", fn, reference_qkv_scores, cases)
