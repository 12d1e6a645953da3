"""Attention masks. Convention throughout the package: True = may attend.

This module is the one home of the causal triangle: the numpy attention, the
torch modules and the key/value cache all build theirs with ``causal_mask``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._checks import check_positive_int

#: Where the causal diagonal sits when there are more keys than queries.
ALIGNMENTS = ("top-left", "bottom-right")


def causal_mask(t_q: int, t_k: int | None = None, align: str = "top-left") -> np.ndarray:
    """Boolean ``(t_q, t_k)`` mask that lets no query see a later key.

    With one argument, ``causal_mask(T)`` is the square ``(T, T)`` mask, True
    on and below the diagonal: query ``i`` may attend to keys ``j <= i``.

    When ``t_q != t_k`` the diagonal can sit in two places:

    - ``align="top-left"`` (PyTorch's ``is_causal=True``): query ``i`` sees
      keys ``j <= i``, as if the queries were the *first* ``t_q`` positions.
    - ``align="bottom-right"`` (``torch.nn.attention.bias.causal_lower_right``):
      query ``i`` sees keys ``j <= i + t_k - t_q``, as if the queries were the
      *last* ``t_q`` positions. Decoding with a key/value cache needs this one.

    Parameters
    ----------
    t_q : int
        Number of queries (rows), at least 0.
    t_k : int, optional
        Number of keys (columns); defaults to ``t_q``.
    align : {"top-left", "bottom-right"}
        Where the diagonal starts.

    Returns
    -------
    numpy.ndarray
        Boolean array of shape ``(t_q, t_k)``, True = may attend.

    Raises
    ------
    TypeError
        If ``t_q`` or ``t_k`` is not an int.
    ValueError
        If ``t_q`` or ``t_k`` is negative or ``align`` is not one of
        ``ALIGNMENTS``.

    Examples
    --------
    >>> causal_mask(3).astype(int)
    array([[1, 0, 0],
           [1, 1, 0],
           [1, 1, 1]])
    >>> causal_mask(2, 4, align="bottom-right").astype(int)
    array([[1, 1, 1, 0],
           [1, 1, 1, 1]])
    """
    t_q = check_positive_int(t_q, "length" if t_k is None else "t_q", allow_zero=True)
    t_k = t_q if t_k is None else check_positive_int(t_k, "t_k", allow_zero=True)
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {ALIGNMENTS}, got {align!r}")
    offset = 0 if align == "top-left" else t_k - t_q
    return np.tril(np.ones((t_q, t_k), dtype=bool), k=offset)


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
        If ``lengths`` is not 1-D, holds a negative length, or a length is
        larger than ``max_len``.

    Examples
    --------
    >>> padding_mask([3, 1]).astype(int)
    array([[1, 1, 1],
           [1, 0, 0]])
    >>> padding_mask([2], max_len=4).astype(int)
    array([[1, 1, 0, 0]])
    """
    torch_input = type(lengths).__module__.startswith("torch")
    values = np.asarray(lengths.detach().cpu() if torch_input else lengths)
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
            f"max_len={max_len} is shorter than the longest sequence "
            f"(lengths {values.tolist()})"
        )
    mask = np.arange(max_len)[None, :] < values[:, None]  # (B, max_len)
    if torch_input:
        import torch

        return torch.from_numpy(mask).to(lengths.device)
    return mask
