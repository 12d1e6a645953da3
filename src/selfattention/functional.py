"""Scaled dot-product attention in numpy: the formula the book builds up."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._checks import as_bool_mask, as_float_array, check_attention_shapes, check_mask_shape
from .masks import causal_mask
from .softmax import softmax


def scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    mask: Any | None = None,
    causal: bool = False,
    scale: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``softmax(Q K^T * scale) V``; returns ``(output, weights)``.

    Shapes: ``query (..., Tq, d_k)``, ``key (..., Tk, d_k)``,
    ``value (..., Tk, d_v)`` give ``output (..., Tq, d_v)`` and
    ``weights (..., Tq, Tk)``; leading dimensions broadcast.

    ``mask`` is boolean, broadcastable to ``(..., Tq, Tk)``, True = may attend
    (the convention of ``torch.nn.functional.scaled_dot_product_attention``).
    ``causal=True`` lets query i see keys j <= i (top-left aligned) and is
    combined with ``mask``. ``scale`` defaults to ``1 / sqrt(d_k)``. A query
    that may attend to nothing gets zero weights and a zero output.
    """
    q = as_float_array(query, "query")
    k = as_float_array(key, "key")
    v = as_float_array(value, "value")
    batch = check_attention_shapes(q.shape, k.shape, v.shape)
    for name, array in (("query", q), ("key", k), ("value", v)):
        if not np.isfinite(array).all():
            raise ValueError(f"{name} must be finite (shape {array.shape})")
    d_k = q.shape[-1]
    t_q, t_k = q.shape[-2], k.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(d_k) if d_k else 1.0
    elif not math.isfinite(scale):
        raise ValueError(f"scale must be finite, got {scale}")
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
