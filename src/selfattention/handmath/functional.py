"""Scaled dot-product attention in numpy: the formula the book builds up."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._checks import (
    as_bool_mask,
    as_float_array,
    check_attention_shapes,
    check_flag,
    check_mask_shape,
    check_real,
)
from ..masks import causal_mask
from .softmax import softmax


def scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    mask: Any | None = None,
    causal: bool = False,
    scale: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``softmax(Q K^T * scale) V``, with optional masks; returns ``(output, weights)``.

    The numpy version of the formula the book builds up in chapters 5 to 8.
    A query that may attend to nothing gets zero weights and a zero output
    (not NaN).

    Parameters
    ----------
    query : array_like, shape ``(..., T_q, d_k)``
        One query per row.
    key : array_like, shape ``(..., T_k, d_k)``
        One key per row, the same size ``d_k`` as the queries.
    value : array_like, shape ``(..., T_k, d_v)``
        One value per key. Leading dimensions of the three broadcast.
    mask : array_like of bool, optional
        Broadcastable to the scores ``(..., T_q, T_k)``; True = may attend
        (the convention of ``torch.nn.functional.scaled_dot_product_attention``).
        A boolean torch tensor is accepted too.
    causal : bool, default False
        If True, query ``i`` sees only keys ``j <= i`` (top-left aligned, see
        :func:`selfattention.masks.causal_mask`); combined with ``mask``.
    scale : float, optional
        Multiplies the raw scores ``Q K^T``; defaults to ``1 / sqrt(d_k)``.

    Returns
    -------
    output : numpy.ndarray, shape ``(..., T_q, d_v)``
        Each row is a weighted average of the values.
    weights : numpy.ndarray, shape ``(..., T_q, T_k)``
        The attention weights; each row sums to 1 (or is all 0 when the
        query may attend to nothing).

    Raises
    ------
    TypeError
        If an input does not hold real numbers, ``mask`` is not boolean,
        ``causal`` is not a bool, or ``scale`` is not a real number.
    ValueError
        If an input has fewer than 2 dimensions or holds NaN or inf, ``d_k``
        or ``T_k`` do not match, the leading dimensions do not broadcast,
        ``mask`` does not broadcast to the scores, ``scale`` is not finite,
        or the scaled scores overflow the dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from selfattention import scaled_dot_product_attention
    >>> query = np.array([[1.0, 0.0], [0.0, 1.0]])  # (T_q, d_k) = (2, 2)
    >>> key = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (T_k, d_k) = (3, 2)
    >>> value = np.array([[1.0], [2.0], [3.0]])  # (T_k, d_v) = (3, 1)
    >>> output, weights = scaled_dot_product_attention(query, key, value)
    >>> output.shape, weights.shape
    ((2, 1), (2, 3))
    >>> weights.round(3).tolist()
    [[0.401, 0.198, 0.401], [0.198, 0.401, 0.401]]
    >>> _, weights = scaled_dot_product_attention(query, key, value, causal=True)
    >>> weights.round(2).tolist()
    [[1.0, 0.0, 0.0], [0.33, 0.67, 0.0]]
    """
    q = as_float_array(query, "query", finite=True)
    k = as_float_array(key, "key", finite=True)
    v = as_float_array(value, "value", finite=True)
    batch = check_attention_shapes(q.shape, k.shape, v.shape)
    causal = check_flag(causal, "causal")
    d_k = q.shape[-1]
    t_q, t_k = q.shape[-2], k.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(d_k) if d_k else 1.0
    else:
        scale = check_real(scale, "scale", kind="a float or None")
    score_shape = batch + (t_q, t_k)

    keep = np.ones((t_q, t_k), dtype=bool)
    if mask is not None:
        mask_array = as_bool_mask(mask)
        check_mask_shape(mask_array.shape, score_shape)
        keep = keep & mask_array
    if causal:
        keep = keep & causal_mask(t_q, t_k)

    with np.errstate(over="ignore"):
        scores = (q @ np.swapaxes(k, -1, -2)) * scale  # (..., Tq, Tk)
    if not np.isfinite(scores).all():
        raise ValueError(
            f"the scores Q K^T * scale overflow {scores.dtype} (query {q.shape}, "
            f"key {k.shape}, scale {scale}); rescale the inputs or compute in float64"
        )
    scores = np.broadcast_to(scores, score_shape)
    weights = softmax(scores, axis=-1, mask=np.broadcast_to(keep, score_shape))
    output = weights @ v  # (..., Tq, d_v)
    return output, weights
