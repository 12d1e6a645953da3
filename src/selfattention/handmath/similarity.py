"""Similarity between vectors: cosine similarity in numpy."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._checks import as_float_array, broadcast_shapes, check_rank, check_real


def cosine_similarity(a: Any, b: Any, eps: float = 1e-8) -> np.ndarray:
    """Pairwise cosine similarity of the rows of ``a`` and ``b``.

    Each vector is divided by ``max(norm, eps)``, so a zero vector has
    similarity 0 with everything instead of NaN. For a vector whose norm is
    below ``eps`` the entry is therefore *not* its cosine: it shrinks towards
    0 in proportion to the norm (a vector of norm ``1e-9`` along ``b`` gives
    ``0.1``, not 1). ``torch.nn.functional.cosine_similarity`` clamps the
    norms the same way.

    Parameters
    ----------
    a : array_like, shape ``(..., T_a, d)``
        ``T_a`` vectors of size ``d`` (at least 2-D; one vector is ``(1, d)``).
    b : array_like, shape ``(..., T_b, d)``
        ``T_b`` vectors of the same size ``d``; leading dimensions broadcast
        with those of ``a``.
    eps : float, default 1e-8
        Smallest norm divided by; must be positive.

    Returns
    -------
    numpy.ndarray, shape ``(..., T_a, T_b)``
        Entry ``[i, j]`` is the cosine of the angle between ``a[i]`` and
        ``b[j]``, in [-1, 1].

    Raises
    ------
    TypeError
        If ``a`` or ``b`` does not hold real numbers, or ``eps`` is not a
        real number.
    ValueError
        If ``a`` or ``b`` has fewer than 2 dimensions, holds NaN or inf, the
        feature sizes ``d`` differ, the leading dimensions do not broadcast,
        or ``eps`` is not positive and finite.

    Examples
    --------
    >>> from selfattention import cosine_similarity
    >>> a = [[1.0, 0.0], [1.0, 1.0]]
    >>> b = [[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]]
    >>> cosine_similarity(a, b).round(3).tolist()
    [[1.0, 0.0, 0.0], [0.707, 0.707, 0.0]]
    >>> cosine_similarity([[1e-9, 0.0]], [[1.0, 0.0]]).round(3).tolist()  # norm < eps
    [[0.1]]
    """
    left = as_float_array(a, "a", finite=True)
    right = as_float_array(b, "b", finite=True)
    check_rank(left.shape, "a")
    check_rank(right.shape, "b")
    if left.shape[-1] != right.shape[-1]:
        raise ValueError(
            f"a and b must have the same feature size d: a has shape {left.shape}, "
            f"b has shape {right.shape}"
        )
    broadcast_shapes(("a batch dims of", left.shape[:-2]), ("b batch dims of", right.shape[:-2]))
    eps = check_real(eps, "eps", low=0.0, low_open=True)
    left_unit = left / np.maximum(np.linalg.norm(left, axis=-1, keepdims=True), eps)
    right_unit = right / np.maximum(np.linalg.norm(right, axis=-1, keepdims=True), eps)
    return np.clip(left_unit @ np.swapaxes(right_unit, -1, -2), -1.0, 1.0)
