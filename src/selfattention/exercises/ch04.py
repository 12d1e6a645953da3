"""Chapter 4 exercise: the sinusoidal positional encoding, written by the reader."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..handmath.positional import sinusoidal_positional_encoding
from ._runner import Case, _to_numpy, run_checks


def reference_positional_encoding(length: int, d_model: int) -> np.ndarray:
    """The package's encoding with the paper's base 10000, shape ``(length, d_model)``."""
    return sinusoidal_positional_encoding(length, d_model)


def _common_mistakes(length: int, d_model: int) -> dict[str, np.ndarray]:
    """Wrong encodings readers often write, each with a hint that names the mistake."""
    positions = np.arange(length, dtype=np.float64)[:, None]  # (length, 1)
    pair_rates = 10000.0 ** (-np.arange(0, d_model, 2) / d_model)  # (d_model/2,)
    angles = positions * pair_rates  # (length, d_model/2)
    column_rates = 10000.0 ** (-np.arange(d_model) / d_model)  # (d_model,)
    own_index = np.where(
        np.arange(d_model) % 2 == 0,
        np.sin(positions * column_rates),
        np.cos(positions * column_rates),
    )
    swapped = np.empty((length, d_model))
    swapped[:, 0::2], swapped[:, 1::2] = np.cos(angles), np.sin(angles)
    return {
        "the columns are all sines, then all cosines; the paper interleaves them: "
        "column 2l is a sine and column 2l+1 the cosine of the same angle": np.concatenate(
            [np.sin(angles), np.cos(angles)], axis=1
        ),
        "sine and cosine are swapped: even columns (0, 2, ...) hold the sine": swapped,
        "the odd columns use their own index in the exponent; column 2l+1 must use "
        "the same frequency as column 2l, 1 / 10000**(2l / d_model)": own_index,
    }


def _hint(fn: Callable[[int, int], Any]) -> str | None:
    """If ``fn`` reproduces a known mistake on a probe case, say which one."""
    length, d_model = 6, 8
    try:
        got = np.asarray(_to_numpy(fn(length, d_model)), dtype=np.float64)
    except Exception:  # noqa: BLE001 - the failing case has already been reported
        return None
    for hint, wrong in _common_mistakes(length, d_model).items():
        if got.shape == wrong.shape and np.allclose(got, wrong, atol=1e-4):
            return hint
    return None


def check_positional_encoding(fn: Callable[[int, int], Any]) -> bool:
    """Check ``fn(length, d_model) -> (length, d_model)`` against the sinusoidal encoding.

    ``fn`` may return a numpy array or a torch tensor (float32 is fine: the
    tolerance is 1e-4). On failure the first failing case is printed, followed
    by a hint when the answer matches a common mistake.
    """
    cases = [
        Case("one position, d_model = 2", (1, 2)),
        Case("4 positions, d_model = 4: columns alternate sin, cos", (4, 4)),
        Case("10 positions, d_model = 8", (10, 8)),
        Case("7 positions, d_model = 6 (an odd number of sin/cos pairs)", (7, 6)),
        Case("64 positions, d_model = 32", (64, 32)),
    ]
    passed = run_checks(
        "check_positional_encoding", fn, reference_positional_encoding, cases, atol=1e-4, rtol=1e-4
    )
    if not passed:
        hint = _hint(fn)
        if hint:
            print(f"  hint: {hint}")
    return passed
