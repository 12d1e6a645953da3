"""Attention masks. Convention throughout the package: True = may attend."""

from __future__ import annotations

import numpy as np

from ._checks import check_positive_int


def causal_mask(length: int) -> np.ndarray:
    """Boolean ``(length, length)`` mask, True on and below the diagonal.

    Row i is query i; it may attend to keys j <= i (no look-ahead).
    """
    length = check_positive_int(length, "length", allow_zero=True)
    return np.tril(np.ones((length, length), dtype=bool))
