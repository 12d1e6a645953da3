"""Chapter 2 exercise: the soft lookup, a temperature-controlled blend of values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..handmath.softmax import softmax
from ..toys.catalogue import video_catalogue
from ._runner import Case, run_checks


def reference_soft_lookup(
    query: np.ndarray, keys: np.ndarray, values: np.ndarray, temperature: float
) -> np.ndarray:
    """Blend ``values (T_k, d_v)`` by ``softmax(keys @ query / temperature)``; return ``(d_v,)``.

    ``query`` is ``(d_k,)`` and ``keys`` is ``(T_k, d_k)``; the scores are plain
    dot products and ``temperature`` must be positive.
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    scores = keys @ query  # (T_k,)
    weights = softmax(scores / temperature)  # (T_k,)
    return weights @ values  # (d_v,)


def check_soft_lookup(fn: Callable[[np.ndarray, np.ndarray, np.ndarray, float], Any]) -> bool:
    """Check ``fn(query, keys, values, temperature)`` against the reference soft lookup."""
    rng = np.random.default_rng(2)
    catalogue = video_catalogue()
    keys, values = np.asarray(catalogue.keys), np.asarray(catalogue.values)
    cases = [
        Case(
            "one key matches, temperature 1",
            (np.array([1.0, 0.0]), np.eye(2), np.array([[10.0], [20.0]]), 1.0),
        ),
        Case(
            "equal scores give the plain mean of the values",
            (np.zeros(3), rng.normal(size=(4, 3)), rng.normal(size=(4, 2)), 1.0),
        ),
        Case(
            "the catalogue, query crime + comedy, temperature 2",
            (catalogue.query(crime=1, comedy=1), keys, values, 2.0),
        ),
        Case(
            "the catalogue, query fantasy, temperature 0.1",
            (catalogue.query(fantasy=1), keys, values, 0.1),
        ),
        Case(
            "d_k = 5, d_v = 2, seven items, temperature 0.5",
            (rng.normal(size=5), rng.normal(size=(7, 5)), rng.normal(size=(7, 2)), 0.5),
        ),
        Case(
            "large scores (900 and 870), where a bare exp overflows",
            (
                np.array([30.0, 0.0]),
                np.array([[30.0, 0.0], [29.0, 1.0]]),
                np.array([[1.0, 0.0], [0.0, 1.0]]),
                1.0,
            ),
        ),
    ]
    return run_checks("check_soft_lookup", fn, reference_soft_lookup, cases)
