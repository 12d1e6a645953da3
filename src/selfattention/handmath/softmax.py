"""Numerically stable, maskable softmax in numpy."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._checks import as_bool_mask, as_float_array, check_int, check_mask_shape


def softmax(x: Any, axis: int = -1, mask: Any | None = None) -> np.ndarray:
    """Softmax of ``x`` along ``axis``, stable for any finite input.

    The largest kept entry of each slice is subtracted before ``exp``, so no
    entry overflows. Masked entries get weight exactly 0, and a slice in which
    nothing is kept (or every entry is ``-inf``) comes back as all zeros rather
    than NaN.

    Parameters
    ----------
    x : array_like
        Scores of any shape with at least one dimension. float16, float32 and
        float64 keep their dtype; float16 input is computed entirely in
        float32 (shift, ``exp``, sum and division) and only the weights are
        cast back to float16; integers
        become float64. ``-inf`` is allowed and means "weight 0".
    axis : int, default -1
        The axis that sums to 1.
    mask : array_like of bool, optional
        Broadcastable to ``x``; True = keep, False = weight 0.

    Returns
    -------
    numpy.ndarray
        Weights of the same shape as ``x``, each slice along ``axis`` summing
        to 1 (or all 0 when nothing in it is kept).

    Raises
    ------
    TypeError
        If ``x`` is not real numbers, ``axis`` is not an int, or ``mask`` is
        not boolean.
    ValueError
        If ``x`` is a scalar, holds NaN or ``+inf``, ``axis`` is out of range,
        or ``mask`` does not broadcast to the shape of ``x``.

    Examples
    --------
    >>> from selfattention import softmax
    >>> softmax([1.0, 2.0, 3.0]).round(3).tolist()
    [0.09, 0.245, 0.665]
    >>> softmax([[1.0, 2.0, 3.0]], mask=[[True, True, False]]).round(3).tolist()
    [[0.269, 0.731, 0.0]]
    >>> softmax([5.0, 7.0], mask=[False, False]).tolist()
    [0.0, 0.0]
    """
    # -inf is a score of weight 0; NaN and +inf are refused.
    scores = as_float_array(x, "x", finite=True, allow_neg_inf=True)
    if scores.ndim == 0:
        raise ValueError("x must have at least one dimension, got a scalar")
    axis = check_int(axis, "axis")
    if not -scores.ndim <= axis < scores.ndim:
        raise ValueError(f"axis {axis} is out of range for x of shape {scores.shape}")
    out_dtype = scores.dtype
    # float16 has too little range and precision: the whole computation runs
    # in float32, and only the result is cast back.
    work = scores.astype(np.float32) if out_dtype == np.float16 else scores

    keep = np.isfinite(work)
    if mask is not None:
        mask_array = as_bool_mask(mask)
        check_mask_shape(mask_array.shape, work.shape)
        keep = keep & mask_array

    masked = np.where(keep, work, -np.inf)
    row_max = np.max(masked, axis=axis, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    # A kept entry far below the maximum may underflow to -inf here; its weight is then 0.
    with np.errstate(over="ignore"):
        shifted = np.where(keep, work - row_max, 0.0)
    exps = np.where(keep, np.exp(shifted), 0.0)
    total = np.sum(exps, axis=axis, keepdims=True)
    weights = np.divide(exps, total, out=np.zeros_like(exps), where=total > 0)
    return weights.astype(out_dtype, copy=False)
