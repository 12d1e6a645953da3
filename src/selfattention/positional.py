"""Sinusoidal positional encoding (Vaswani et al., 2017, section 3.5)."""

from __future__ import annotations

import numpy as np

from ._checks import check_positive_int


def sinusoidal_positional_encoding(
    length: int, d_model: int, base: float = 10000.0
) -> np.ndarray:
    """The fixed (not learned) sinusoidal encoding, shape ``(length, d_model)``.

    Column ``2i`` holds ``sin(pos / base**(2i / d_model))`` and column ``2i+1``
    the cosine of the same angle, interleaved as in the paper.
    """
    length = check_positive_int(length, "length", allow_zero=True)
    d_model = check_positive_int(d_model, "d_model")
    if d_model % 2:
        raise ValueError(f"d_model must be even (sin/cos pairs), got {d_model}")
    if not (np.isfinite(base) and base > 1):
        raise ValueError(f"base must be a finite number above 1, got {base}")
    positions = np.arange(length, dtype=np.float64)[:, None]  # (length, 1)
    pair_index = np.arange(0, d_model, 2, dtype=np.float64)  # (d_model/2,)
    frequencies = base ** (-pair_index / d_model)  # (d_model/2,)
    angles = positions * frequencies  # (length, d_model/2)
    encoding = np.empty((length, d_model), dtype=np.float64)
    encoding[:, 0::2] = np.sin(angles)
    encoding[:, 1::2] = np.cos(angles)
    return encoding
