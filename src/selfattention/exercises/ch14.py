"""Chapter 14 exercise: the sliding-window mask of a decoding step, by the reader."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..masks import causal_mask
from ._runner import Case, _to_numpy, run_checks


def reference_window_mask(t_q: int, t_k: int, window: int) -> np.ndarray:
    """The package's band: the last ``t_q`` of ``t_k`` positions, each seeing ``window`` keys.

    Query ``i`` stands at position ``i + t_k - t_q`` (bottom-right) and sees
    key ``j`` exactly when ``0 <= i + t_k - t_q - j < window``.

    Examples
    --------
    >>> reference_window_mask(2, 5, 3).astype(int)
    array([[0, 1, 1, 1, 0],
           [0, 0, 1, 1, 1]])
    """
    return causal_mask(t_q, t_k, align="bottom-right", window=window)


def _common_mistakes(t_q: int, t_k: int, window: int) -> dict[str, np.ndarray]:
    """Wrong masks readers often write, each with a hint that names the mistake."""
    i = np.arange(t_q)[:, None] + (t_k - t_q)  # (T_q, 1): positions of the queries
    j = np.arange(t_k)[None, :]  # (1, T_k)
    return {
        "each query sees window + 1 keys: the window counts the query itself, "
        "so keep 0 <= i - j < window, not <= window": (i - j >= 0) & (i - j <= window),
        "the queries are aligned top-left: they are the last t_q positions, so "
        "query i stands at position i + t_k - t_q": causal_mask(t_q, t_k, window=window),
        "the band reaches into the future: a sliding window is causal, keep "
        "0 <= i - j as well as i - j < window": np.abs(i - j) < window,
        "there is no window: every earlier key is kept": causal_mask(
            t_q, t_k, align="bottom-right"
        ),
    }


def _hint(fn: Callable[..., Any]) -> str | None:
    """If ``fn`` reproduces a known mistake on a probe case, say which one."""
    t_q, t_k, window = 3, 9, 4
    try:
        got = np.asarray(_to_numpy(fn(t_q, t_k, window)))
    except Exception:  # noqa: BLE001 - the failing case has already been reported
        return None
    for hint, wrong in _common_mistakes(t_q, t_k, window).items():
        if got.shape == wrong.shape and np.array_equal(got.astype(bool), wrong):
            return hint
    return None


def _boolean(fn: Callable[..., Any]) -> bool:
    """False, with a report, if ``fn`` answers case 1 right but with numbers, not booleans.

    A 0/1 number mask is no mask: given to
    ``F.scaled_dot_product_attention`` it is added to the scores. An answer
    that raises or has other values is left to ``run_checks`` to report.
    """
    case = _cases()[0]
    try:
        got = np.asarray(_to_numpy(fn(*case.args)))
    except Exception:  # noqa: BLE001 - run_checks reports it
        return True
    expected = reference_window_mask(*case.args)
    if got.dtype == np.bool_ or got.shape != expected.shape:
        return True
    if not np.array_equal(got.astype(bool), expected):
        return True  # wrong values: run_checks reports them first
    print(f"✗ check_window_mask: case 1 ({case.description})")
    print(f"  the mask holds {got.dtype} numbers, not booleans")
    print("  hint: return booleans, True = may attend; 0/1 numbers given to")
    print("  F.scaled_dot_product_attention are added to the scores")
    return False


def _cases() -> list[Case]:
    return [
        Case("a square 6 x 6 mask, window 3", (6, 6, 3)),
        Case("one decoding step: 1 query, 9 keys, window 4", (1, 9, 4)),
        Case("a chunk of 3 queries after 5 cached keys (t_k = 8), window 4", (3, 8, 4)),
        Case("window 1: each query sees only itself", (5, 5, 1)),
        Case("a window longer than the sequence: plain causal", (4, 4, 10)),
        Case("a window of exactly t_k = 7 keys, 2 queries", (2, 7, 7)),
    ]


def check_window_mask(fn: Callable[..., Any]) -> bool:
    """Check ``fn(t_q, t_k, window)`` against the package's bottom-right band mask.

    ``fn`` returns a boolean array ``(t_q, t_k)``, True = may attend, for
    the last ``t_q`` of ``t_k`` positions (a decoding step with a cache):
    query ``i`` sees key ``j`` exactly when ``0 <= i + t_k - t_q - j <
    window``. On failure the first failing case is printed, followed by a
    hint when the answer matches a common mistake (one key too many, top-left
    alignment, a band that reaches into the future, no window at all, 0/1
    numbers instead of booleans).

    Examples
    --------
    An integer 0/1 mask has the right values but is refused: given to
    ``F.scaled_dot_product_attention`` it would be added to the scores.

    >>> check_window_mask(lambda t_q, t_k, w: reference_window_mask(t_q, t_k, w).astype(int))
    ✗ check_window_mask: case 1 (a square 6 x 6 mask, window 3)
      the mask holds int64 numbers, not booleans
      hint: return booleans, True = may attend; 0/1 numbers given to
      F.scaled_dot_product_attention are added to the scores
    False
    """
    if callable(fn) and not _boolean(fn):
        return False
    passed = run_checks("check_window_mask", fn, reference_window_mask, _cases())
    if not passed:
        hint = _hint(fn)
        if hint:
            print(f"  hint: {hint}")
    return passed
