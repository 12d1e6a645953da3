"""Chapter 8 exercise: the attention output, softmax(Q K^T / sqrt(d_k)) V."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..handmath.functional import scaled_dot_product_attention
from ._runner import Case, run_checks


def reference_attention_output(
    query: np.ndarray, key: np.ndarray, value: np.ndarray
) -> np.ndarray:
    """The output ``(..., T_q, d_v)`` of scaled dot-product attention, without the weights."""
    output, _ = scaled_dot_product_attention(query, key, value)
    return output


def check_attention_output(fn: Callable[[np.ndarray, np.ndarray, np.ndarray], Any]) -> bool:
    """Check ``fn(query, key, value) -> output`` against the package's attention.

    ``query (..., T_q, d_k)``, ``key (..., T_k, d_k)``, ``value (..., T_k, d_v)``;
    the output has shape ``(..., T_q, d_v)``. The cases include unequal query
    and key lengths, d_v != d_k, a batch dimension and scores large enough to
    overflow a softmax that does not subtract the maximum.
    """
    rng = np.random.default_rng(8)
    cases = [
        Case(
            "two queries, three keys, d_k = 4, written out by hand",
            (
                np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 0.0]]),
                np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0]]),
                np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
            ),
        ),
        Case(
            "self-attention, T = 5, d_k = d_v = 3",
            tuple(rng.normal(size=(5, 3)) for _ in range(3)),
        ),
        Case(
            "T_q = 2 queries, T_k = 6 keys, d_k = 4, d_v = 5",
            (rng.normal(size=(2, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 5))),
        ),
        Case(
            "a batch of 3, T_q = 4, T_k = 7, d_k = 8, d_v = 2",
            (rng.normal(size=(3, 4, 8)), rng.normal(size=(3, 7, 8)), rng.normal(size=(3, 7, 2))),
        ),
        Case(
            "large scores (scaled, up to 1273): the softmax must subtract the row maximum",
            (
                np.array([[30.0, 30.0], [-30.0, 10.0]]),
                np.array([[30.0, 30.0], [29.0, 31.0], [-30.0, 10.0]]),
                np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
            ),
        ),
    ]
    return run_checks("check_attention_output", fn, reference_attention_output, cases)
