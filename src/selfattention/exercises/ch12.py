"""Chapter 12 exercise: one step of the online softmax over a block of keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._runner import Case, run_checks


def reference_online_softmax_update(
    m: np.ndarray, z: np.ndarray, o: np.ndarray, scores: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fold one block of keys into the running state of each query.

    ``m (T_q,)`` is the largest score seen so far, ``z (T_q,)`` the sum of
    ``exp(score - m)`` so far, ``o (T_q, d_v)`` the sum of
    ``exp(score - m) * value`` so far (chapter 12's running maximum, sum and
    unnormalised output); ``scores (T_q, b_k)`` are the new block's (already
    scaled) scores for its ``b_k`` keys and ``values (b_k, d_v)`` its values.
    Returns the new ``(m, z, o)``; the attention output is ``o / z[:, None]``
    once every block has been folded in.

    Examples
    --------
    >>> m, z, o = np.full(1, -np.inf), np.zeros(1), np.zeros((1, 1))  # empty state
    >>> m, z, o = reference_online_softmax_update(m, z, o, np.array([[0.0, 0.0]]),
    ...                                           np.array([[1.0], [3.0]]))
    >>> m, z, o / z[:, None]  # two equal scores: the mean of the two values
    (array([0.]), array([2.]), array([[2.]]))
    """
    m_new = np.maximum(m, scores.max(axis=-1))  # (T_q,)
    alpha = np.exp(m - m_new)  # (T_q,) rescales what was summed under the old max
    p = np.exp(scores - m_new[:, None])  # (T_q, b_k)
    return m_new, z * alpha + p.sum(axis=-1), o * alpha[:, None] + p @ values


def _empty_state(t_q: int, d_v: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.full(t_q, -np.inf), np.zeros(t_q), np.zeros((t_q, d_v))


def check_online_softmax_update(
    fn: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], Any],
) -> bool:
    """Check ``fn(m, z, o, scores, values) -> (m, z, o)``, one online-softmax step.

    Shapes: ``m (T_q,)``, ``z (T_q,)``, ``o (T_q, d_v)``, ``scores (T_q,
    b_k)``, ``values (b_k, d_v)``. The cases start from the empty state
    (``m = -inf``, ``z = 0``, ``o = 0``), fold in a block whose scores are
    lower than the running maximum and one whose scores are higher (so that
    the old sum and output must be rescaled), and use scores near 1000 that
    overflow ``exp`` unless the maximum is subtracted first.
    """
    rng = np.random.default_rng(12)
    m0, z0, o0 = _empty_state(2, 3)
    first = (m0, z0, o0, rng.normal(size=(2, 4)), rng.normal(size=(4, 3)))
    state = reference_online_softmax_update(*first)
    lower = (*state, rng.normal(size=(2, 5)) - 3.0, rng.normal(size=(5, 3)))
    higher = (*state, rng.normal(size=(2, 5)) + 3.0, rng.normal(size=(5, 3)))
    big_state = reference_online_softmax_update(
        *_empty_state(3, 2), 1000.0 + rng.normal(size=(3, 4)), rng.normal(size=(4, 2))
    )
    cases = [
        Case("the first block, from the empty state m = -inf, z = 0, o = 0", first),
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
