"""Sinusoidal positional encoding (Vaswani et al., 2017, section 3.5)."""

from __future__ import annotations

import numpy as np

from .._checks import check_positive_int, check_real


def sinusoidal_positional_encoding(length: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The fixed (not learned) sinusoidal positional encoding.

    Pair ``l`` (for ``l = 0, ..., d_model/2 - 1``) owns columns ``2l`` and
    ``2l+1``: column ``2l`` holds ``sin(pos * theta_l)`` and column ``2l+1``
    the cosine of the same angle, with the frequency
    ``theta_l = base**(-2l / d_model)``. The columns are interleaved as in
    the paper, which writes ``i`` for the pair index (the book keeps ``i``
    for positions).

    Parameters
    ----------
    length : int
        Number of positions ``T``, at least 0.
    d_model : int
        Width of each encoding; positive and even (sine/cosine pairs).
    base : float, default 10000.0
        The wavelength base; finite and above 1.

    Returns
    -------
    numpy.ndarray, shape ``(length, d_model)``
        Row ``pos`` is the encoding of position ``pos``, float64.

    Raises
    ------
    TypeError
        If ``length`` or ``d_model`` is not an int, or ``base`` is not a
        real number.
    ValueError
        If ``length`` is negative, ``d_model`` is not positive and even, or
        ``base`` is not a finite number above 1.

    Examples
    --------
    >>> from selfattention import sinusoidal_positional_encoding
    >>> sinusoidal_positional_encoding(3, 4).round(3).tolist()
    [[0.0, 1.0, 0.0, 1.0], [0.841, 0.54, 0.01, 1.0], [0.909, -0.416, 0.02, 1.0]]
    """
    length = check_positive_int(length, "length", allow_zero=True)
    d_model = check_positive_int(d_model, "d_model")
    if d_model % 2:
        raise ValueError(f"d_model must be even (sin/cos pairs), got {d_model}")
    base = check_real(base, "base", low=1.0, low_open=True)
    positions = np.arange(length, dtype=np.float64)[:, None]  # (length, 1)
    two_l = np.arange(0, d_model, 2, dtype=np.float64)  # (d_model/2,): 2l for each pair l
    frequencies = base ** (-two_l / d_model)  # (d_model/2,): theta_l
    angles = positions * frequencies  # (length, d_model/2)
    encoding = np.empty((length, d_model), dtype=np.float64)
    encoding[:, 0::2] = np.sin(angles)
    encoding[:, 1::2] = np.cos(angles)
    return encoding
