"""Attention masks. Convention throughout the package: True = may attend.

This module is the one home of the causal triangle: the numpy attention, the
torch modules and the key/value cache all build theirs with ``causal_mask``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._checks import as_bool_mask, check_positive_int, check_real, describe

#: Where the causal diagonal sits when there are more keys than queries.
ALIGNMENTS = ("top-left", "bottom-right")


def causal_mask(
    t_q: int, t_k: int | None = None, align: str = "top-left", window: int | None = None
) -> np.ndarray:
    """Boolean ``(t_q, t_k)`` mask that lets no query see a later key.

    With one argument, ``causal_mask(T)`` is the square ``(T, T)`` mask, True
    on and below the diagonal: query ``i`` may attend to keys ``j <= i``.

    When ``t_q != t_k`` the diagonal can sit in two places:

    - ``align="top-left"`` (PyTorch's ``is_causal=True``): query ``i`` sees
      keys ``j <= i``, as if the queries were the *first* ``t_q`` positions.
    - ``align="bottom-right"`` (``torch.nn.attention.bias.causal_lower_right``):
      query ``i`` sees keys ``j <= i + t_k - t_q``, as if the queries were the
      *last* ``t_q`` positions. Decoding with a key/value cache needs this one.

    With ``window=W`` (sliding-window attention, chapter 14) query ``i`` sees
    only the current key and the ``W - 1`` before it: key ``j`` exactly when
    ``0 <= i - j < W``, with ``i`` measured in the alignment's coordinates
    (``i + t_k - t_q`` for ``"bottom-right"``). The mask is then a band of
    width ``W`` along the diagonal.

    Parameters
    ----------
    t_q : int
        Number of queries (rows), at least 0.
    t_k : int, optional
        Number of keys (columns); defaults to ``t_q``.
    align : {"top-left", "bottom-right"}
        Where the diagonal starts.
    window : int, optional
        The sliding-window size ``W``, at least 1; None (the default) means
        no window, every earlier key.

    Returns
    -------
    numpy.ndarray
        Boolean array of shape ``(t_q, t_k)``, True = may attend.

    Raises
    ------
    TypeError
        If ``t_q``, ``t_k`` or ``window`` is not an int, or ``align`` is not a
        string.
    ValueError
        If ``t_q`` or ``t_k`` is negative, ``window`` is not positive, or
        ``align`` is not one of ``ALIGNMENTS``.

    Examples
    --------
    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    >>> causal_mask(2, 4, align="bottom-right").astype(int)
    array([[1, 1, 1, 0],
           [1, 1, 1, 1]])
    >>> causal_mask(4, window=2).astype(int)  # each query: itself and 1 before
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    """
    t_q = check_positive_int(t_q, "length" if t_k is None else "t_q", allow_zero=True)
    t_k = t_q if t_k is None else check_positive_int(t_k, "t_k", allow_zero=True)
    if not isinstance(align, str):
        raise TypeError(f"align must be one of {ALIGNMENTS}, got {describe(align)}")
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {ALIGNMENTS}, got {align!r}")
    if window is not None:
        window = check_positive_int(window, "window")
    offset = 0 if align == "top-left" else t_k - t_q
    keep = np.tril(np.ones((t_q, t_k), dtype=bool), k=offset)  # j <= i + offset
    if window is not None:
        keep &= np.triu(np.ones((t_q, t_k), dtype=bool), k=offset - window + 1)  # j > i' - W
    return keep


def padding_mask(lengths: Any, max_len: int | None = None) -> Any:
    """Boolean ``(B, max_len)`` mask of the real tokens in a padded batch.

    Row ``b`` is True at positions ``0 .. lengths[b] - 1`` and False on the
    padding after them. To hide padded *keys* from attention, give it to the
    package's attention as ``mask[:, None, :]`` (scores ``(B, T_q, T_k)``) or
    ``mask[:, None, None, :]`` (``(B, h, T_q, T_k)``).

    Parameters
    ----------
    lengths : sequence of int, numpy array or torch tensor, shape ``(B,)``
        The number of real tokens in each sequence.
    max_len : int, optional
        The padded length; defaults to ``max(lengths)``. It must be at least
        every length.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Boolean ``(B, max_len)``: a torch tensor (on the same device) when
        ``lengths`` is a torch tensor, a numpy array otherwise.

    Raises
    ------
    TypeError
        If ``lengths`` does not hold integers, or ``max_len`` is not an int.
    ValueError
        If ``lengths`` is not 1-D, holds a negative length, a length is
        larger than ``max_len``, or it is a tensor on the ``meta`` device.

    Examples
    --------
    >>> padding_mask([3, 1]).astype(int)
    array([[1, 1, 1],
           [1, 0, 0]])
    >>> padding_mask([2], max_len=4).astype(int)
    array([[1, 1, 0, 0]])
    """
    torch_input = _is_torch(lengths)
    values = _values(lengths, "lengths")
    if values.dtype == np.bool_ or not np.issubdtype(values.dtype, np.integer):
        if not (values.size == 0 and values.dtype == np.float64):
            raise TypeError(f"lengths must hold integers, got dtype {values.dtype}")
        values = values.astype(np.int64)
    if values.ndim != 1:
        raise ValueError(f"lengths must be 1-D (B,), got shape {values.shape}")
    if (values < 0).any():
        raise ValueError(f"lengths must be non-negative, got {values.tolist()}")
    longest = int(values.max()) if values.size else 0
    if max_len is None:
        max_len = longest
    max_len = check_positive_int(max_len, "max_len", allow_zero=True)
    if longest > max_len:
        raise ValueError(
            f"max_len={max_len} is shorter than the longest sequence (lengths {values.tolist()})"
        )
    mask = np.arange(max_len)[None, :] < values[:, None]  # (B, max_len)
    if torch_input:
        import torch

        return torch.from_numpy(mask).to(lengths.device)
    return mask


# ---------------------------------------------------------------------------
# Converters between mask conventions (chapter 10's "Rosetta stone").
#
# Every converter returns the same kind of array it was given: a numpy array
# for a numpy input, a torch tensor (same device) for a torch input. The
# package's own consumers (the numpy functions and the torch modules) take
# either kind. PyTorch's consumers (``F.scaled_dot_product_attention``,
# ``nn.MultiheadAttention``) want torch tensors; ``causal_mask`` returns
# numpy, so wrap it with ``torch.from_numpy`` before giving it to them.
# ---------------------------------------------------------------------------

#: Default ``threshold`` of ``from_additive``, entries at or below it count as
#: blocked. -1e4 covers -inf, ``finfo(dtype).min`` and the -1e4 / -1e9 fills
#: common in older code, and is far below any real attention score.
BLOCKED_THRESHOLD = -1e4


def _is_torch(value: Any) -> bool:
    return type(value).__module__.startswith("torch")


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(value.shape)


def _values(value: Any, name: str) -> np.ndarray:
    """The numbers of ``value`` (array-like or torch tensor) as a numpy array, for checking."""
    if _is_torch(value):
        import torch

        if not isinstance(value, torch.Tensor):  # pragma: no cover - other torch types
            raise TypeError(f"{name} must be a tensor or array, got {describe(value)}")
        if value.device.type == "meta":
            raise ValueError(
                f"{name} is on the meta device, which holds no values ({describe(value)})"
            )
        value = value.detach().cpu()
        return value.float().numpy() if value.dtype == torch.bfloat16 else value.numpy()
    try:
        return np.asarray(value)
    except Exception as exc:  # ragged lists: numpy raises many kinds
        raise TypeError(
            f"{name} must be an array or tensor, got {describe(value)} that numpy "
            f"cannot read as one ({exc})"
        ) from None


def to_additive(keep: Any, dtype: Any = None) -> Any:
    """Turn a boolean mask (True = may attend) into an additive float mask.

    The result is 0 where ``keep`` is True and ``-inf`` where it is False, to
    be *added* to the scores before softmax: the float ``attn_mask`` of
    ``F.scaled_dot_product_attention`` and of ``nn.MultiheadAttention``.
    (A row that is ``-inf`` everywhere gives NaN in a plain softmax; see
    chapter 7.)

    Parameters
    ----------
    keep : numpy array or torch tensor of bool, any shape
        True = may attend.
    dtype : numpy or torch floating dtype, optional
        The result's dtype; float32 by default. PyTorch wants it to match the
        query's dtype.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Float mask of the same shape as ``keep``, same library as ``keep``.

    Raises
    ------
    TypeError
        If ``keep`` is not boolean or ``dtype`` is not a floating dtype.

    Examples
    --------
    >>> to_additive(np.array([True, False, True]))
    array([  0., -inf,   0.], dtype=float32)
    """
    keep = as_bool_mask(keep, "keep", to="same", hint="to_additive converts a boolean mask")
    if _is_torch(keep):
        import torch

        dtype = torch.float32 if dtype is None else dtype
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"dtype must be a floating torch dtype, got {dtype!r}")
        additive = torch.zeros(keep.shape, dtype=dtype, device=keep.device)
        return additive.masked_fill(~keep, float("-inf"))
    try:
        np_dtype = np.dtype(np.float32 if dtype is None else dtype)
    except TypeError:
        np_dtype = None
    if np_dtype is None or not np.issubdtype(np_dtype, np.floating):
        raise TypeError(f"dtype must be a floating numpy dtype, got {dtype!r}")
    return np.where(keep, 0.0, -np.inf).astype(np_dtype)


def from_additive(additive: Any, threshold: float = BLOCKED_THRESHOLD) -> Any:
    """Turn an additive float mask back into a boolean one (True = may attend).

    Entries equal to 0 become True; entries at or below ``threshold``
    (``-inf``, ``finfo.min``, -1e9, ...) become False. Anything else is a
    bias on the scores, not a mask (ALiBi, for instance), and is refused.

    Parameters
    ----------
    additive : numpy array or torch tensor of floats, any shape
        The additive mask.
    threshold : float
        Entries ``<= threshold`` count as blocked; must be negative.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Boolean, same shape and library as ``additive``.

    Raises
    ------
    TypeError
        If ``additive`` is not a floating-point array, or ``threshold`` is
        not a real number.
    ValueError
        If ``additive`` holds NaN, or values that are neither 0 nor ``<=
        threshold``; if ``threshold`` is not negative.

    Examples
    --------
    >>> from_additive(np.array([0.0, -np.inf, -1e9, 0.0]))
    array([ True, False, False,  True])
    """
    if not (isinstance(threshold, float) and threshold == -np.inf):
        threshold = check_real(threshold, "threshold", high=0.0, high_open=True)
    values = _values(additive, "additive")
    if not np.issubdtype(values.dtype, np.floating):
        raise TypeError(
            f"additive must be a floating-point mask, got dtype "
            f"{additive.dtype if _is_torch(additive) else values.dtype} with shape {values.shape}"
        )
    if np.isnan(values).any():
        raise ValueError(f"additive contains NaN (shape {values.shape})")
    keep = values == 0
    neither = ~keep & ~(values <= threshold)
    if neither.any():
        example = float(values[neither].flat[0])
        raise ValueError(
            f"additive (shape {values.shape}) holds {example!r}, which is neither 0 "
            f"nor <= {threshold}: it is a bias on the scores, not a mask"
        )
    if _is_torch(additive):
        import torch

        return torch.from_numpy(keep).to(additive.device)
    return keep


def to_mha_attn_mask(keep: Any, num_heads: int | None = None) -> Any:
    """Convert a boolean keep-mask into ``nn.MultiheadAttention``'s ``attn_mask``.

    ``nn.MultiheadAttention`` reads a boolean ``attn_mask`` as **True =
    blocked**, the opposite of this package and of
    ``F.scaled_dot_product_attention``, and accepts only two shapes:
    ``(T_q, T_k)`` (the same for every sentence and head) or
    ``(B * num_heads, T_q, T_k)``, row ``b * num_heads + head``.

    Parameters
    ----------
    keep : numpy array or torch tensor of bool
        True = may attend. ``(T_q, T_k)``; ``(B, T_q, T_k)`` (one mask per
        sentence, shared by its heads); or ``(B, H, T_q, T_k)`` with ``H`` 1
        or ``num_heads``. ``T_q`` is not broadcast: a key padding mask
        ``(B, 1, 1, T_k)`` becomes ``(B * num_heads, 1, T_k)``, right for
        one query; for more queries use ``to_key_padding_mask``.
    num_heads : int, optional
        The module's number of heads; required for 3-D and 4-D ``keep``.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Boolean, True = blocked: ``(T_q, T_k)`` for a 2-D ``keep``, else
        ``(B * num_heads, T_q, T_k)``.

    Raises
    ------
    TypeError
        If ``keep`` is not boolean, or ``num_heads`` is not an int.
    ValueError
        If ``keep`` has another rank, ``num_heads`` is missing for 3-D/4-D
        input, or the head axis is neither 1 nor ``num_heads``.

    Examples
    --------
    >>> to_mha_attn_mask(causal_mask(2)).astype(int)
    array([[0, 1],
           [0, 0]])
    >>> to_mha_attn_mask(np.ones((3, 1, 2, 5), dtype=bool), num_heads=4).shape
    (12, 2, 5)
    """
    keep = as_bool_mask(keep, "keep", to="same")
    shape = _shape(keep)
    if len(shape) == 2:
        return ~keep
    if len(shape) not in (3, 4):
        raise ValueError(
            f"keep must have shape (T_q, T_k), (B, T_q, T_k) or (B, H, T_q, T_k), got {shape}"
        )
    if num_heads is None:
        raise ValueError(
            f"num_heads is required for a {len(shape)}-D keep of shape {shape}: "
            "nn.MultiheadAttention wants (B * num_heads, T_q, T_k)"
        )
    num_heads = check_positive_int(num_heads, "num_heads")
    if len(shape) == 3:
        keep = keep[:, None]
        shape = _shape(keep)
    batch, heads, t_q, t_k = shape
    if heads not in (1, num_heads):
        raise ValueError(
            f"keep of shape {shape} has {heads} heads on axis 1; expected 1 or "
            f"num_heads={num_heads}"
        )
    target = (batch, num_heads, t_q, t_k)
    if _is_torch(keep):
        expanded = keep.expand(target)
    else:
        expanded = np.broadcast_to(keep, target)
    return ~expanded.reshape(batch * num_heads, t_q, t_k)


def to_key_padding_mask(keep: Any) -> Any:
    """Convert a boolean padding mask into ``nn.MultiheadAttention``'s ``key_padding_mask``.

    ``key_padding_mask`` is ``(B, T_k)`` with **True = padding** (ignored), the
    opposite of ``padding_mask``, whose True marks real tokens.

    Parameters
    ----------
    keep : numpy array or torch tensor of bool
        True = real token (may be attended to), shape ``(B, T_k)`` as
        ``padding_mask`` returns it, or its broadcast form ``(B, 1, 1, T_k)``.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Boolean ``(B, T_k)``, True = padding.

    Raises
    ------
    TypeError
        If ``keep`` is not boolean (convert a tokenizer's 1/0 mask with
        ``from_attention_mask`` first).
    ValueError
        If ``keep`` is neither ``(B, T_k)`` nor ``(B, 1, 1, T_k)``.

    Examples
    --------
    >>> to_key_padding_mask(padding_mask([3, 1])).astype(int)
    array([[0, 0, 0],
           [0, 1, 1]])
    """
    keep = as_bool_mask(
        keep, "keep", to="same", hint="for a tokenizer's 1/0 mask use from_attention_mask first"
    )
    shape = _shape(keep)
    if len(shape) == 4 and shape[1] == shape[2] == 1:
        keep = keep[:, 0, 0, :]
    elif len(shape) != 2:
        raise ValueError(f"keep must have shape (B, T_k) or (B, 1, 1, T_k), got {shape}")
    return ~keep


def from_attention_mask(attention_mask: Any) -> Any:
    """Turn a tokenizer's 1/0 ``attention_mask`` into a boolean mask ``(B, 1, 1, T_k)``.

    Tokenizers return ``attention_mask`` of shape ``(B, T_k)`` with 1 for a
    real token and 0 for padding. As a mask on the scores ``(B, h, T_q,
    T_k)`` it must line up with the *key* axis, so it gets two new axes, for
    the heads and the queries: ``(B, 1, 1, T_k)``. (``mask[:, None, :]``,
    ``(B, 1, T_k)``, would line the batch up with the heads instead.)

    Parameters
    ----------
    attention_mask : numpy array or torch tensor, shape ``(B, T_k)``
        Integer, boolean or float, holding only 0 and 1.

    Returns
    -------
    numpy.ndarray or torch.Tensor
        Boolean ``(B, 1, 1, T_k)``, True = may attend; feed it to this
        package's attention or to ``F.scaled_dot_product_attention``.

    Raises
    ------
    TypeError
        If ``attention_mask`` is not numeric.
    ValueError
        If it is not 2-D or holds values other than 0 and 1.

    Examples
    --------
    >>> mask = from_attention_mask(np.array([[1, 1, 0]]))
    >>> mask.shape, mask.ravel()
    ((1, 1, 1, 3), array([ True,  True, False]))
    """
    torch_input = _is_torch(attention_mask)
    values = _values(attention_mask, "attention_mask")
    if not (
        values.dtype == np.bool_
        or np.issubdtype(values.dtype, np.integer)
        or np.issubdtype(values.dtype, np.floating)
    ):
        raise TypeError(
            f"attention_mask must hold 0 and 1, got dtype {values.dtype} with shape {values.shape}"
        )
    if values.ndim != 2:
        raise ValueError(f"attention_mask must have shape (B, T_k), got {values.shape}")
    if not np.isin(values, (0, 1)).all():
        raise ValueError(
            f"attention_mask (shape {values.shape}) must hold only 0 and 1; "
            "for an additive float mask use from_additive"
        )
    keep = values.astype(bool)
    if torch_input:
        return (attention_mask != 0)[:, None, None, :]
    return keep[:, None, None, :]
