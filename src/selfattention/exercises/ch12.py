"""Chapter 12 exercise: one step of the online softmax over a block of keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._runner import Case, run_checks


def reference_online_softmax_update(
    m: np.ndarray, ell: np.ndarray, a: np.ndarray, scores: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fold one block of keys into the running state of each query.

    ``m (T_q,)`` is the largest score seen so far, ``ell (T_q,)`` the sum of
    ``exp(score - m)`` so far, ``a (T_q, d_v)`` the sum of
    ``exp(score - m) * value`` so far; ``scores (T_q, B)`` are the new block's
    (already scaled) scores and ``values (B, d_v)`` its values. Returns the
    new ``(m, ell, a)``; the attention output is ``a / ell[:, None]`` once
    every block has been folded in.
    """
    m_new = np.maximum(m, scores.max(axis=-1))  # (T_q,)
    alpha = np.exp(m - m_new)  # (T_q,) rescales what was summed under the old max
    p = np.exp(scores - m_new[:, None])  # (T_q, B)
    return m_new, ell * alpha + p.sum(axis=-1), a * alpha[:, None] + p @ values


def _empty_state(t_q: int, d_v: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.full(t_q, -np.inf), np.zeros(t_q), np.zeros((t_q, d_v))


def check_online_softmax_update(
    fn: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], Any],
) -> bool:
    """Check ``fn(m, ell, a, scores, values) -> (m, ell, a)``, one online-softmax step.

    Shapes: ``m (T_q,)``, ``ell (T_q,)``, ``a (T_q, d_v)``, ``scores (T_q,
    B)``, ``values (B, d_v)``. The cases start from the empty state
    (``m = -inf``, ``ell = 0``, ``a = 0``), fold in a block whose scores are
    lower than the running maximum and one whose scores are higher (so that
    the old sum and output must be rescaled), and use scores near 1000 that
    overflow ``exp`` unless the maximum is subtracted first.
    """
    rng = np.random.default_rng(12)
    m0, ell0, a0 = _empty_state(2, 3)
    first = (m0, ell0, a0, rng.normal(size=(2, 4)), rng.normal(size=(4, 3)))
    state = reference_online_softmax_update(*first)
    lower = (*state, rng.normal(size=(2, 5)) - 3.0, rng.normal(size=(5, 3)))
    higher = (*state, rng.normal(size=(2, 5)) + 3.0, rng.normal(size=(5, 3)))
    big_state = reference_online_softmax_update(
        *_empty_state(3, 2), 1000.0 + rng.normal(size=(3, 4)), rng.normal(size=(4, 2))
    )
    cases = [
        Case("the first block, from the empty state m = -inf, ell = 0, a = 0", first),
        Case("a second block with lower scores: the running max stays", lower),
        Case("a second block with higher scores: the old sum and output must be rescaled", higher),
        Case(
            "a block of one key", (*state, np.array([[0.5], [4.0]]), np.array([[1.0, -1.0, 2.0]]))
        ),
        Case(
            "scores near 1000: subtract the max before exp",
            (*big_state, 1001.0 + rng.normal(size=(3, 6)), rng.normal(size=(6, 2))),
        ),
    ]
    return run_checks("check_online_softmax_update", fn, reference_online_softmax_update, cases)
