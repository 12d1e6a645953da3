"""Rotary position embeddings (RoPE; Su et al., 2021/2024), chapter 13.

RoPE rotates queries and keys instead of adding a position vector to the
input. The ``d_k`` features of a head form ``d_k / 2`` pairs; pair ``l``
(``l = 0 .. d_k/2 - 1``) of the token at position ``pos`` is rotated by the
angle ``pos * theta_l``, with ``theta_l = base ** (-2l / d_k)``. A score
``q . k`` then depends on the two positions only through their difference.

Two layouts decide which features form a pair, and they are not
interchangeable:

- ``"interleaved"``: pair ``l`` is features ``(2l, 2l + 1)``. This is the
  original RoFormer layout and Meta's Llama reference code, which writes the
  rotation as complex multiplication.
- ``"half"``: pair ``l`` is features ``(l, l + d_k/2)``. This is the GPT-NeoX
  and Hugging Face layout (``rotate_half``).

The default everywhere in the package is ``"half"``: ``rotary_embedding``
without ``layout``, and ``MultiHeadAttention(..., rope=True)``. Weights trained
in one layout give wrong scores in the other.
:func:`selfattention.permute_rotary_rows` reorders the rows of the query and key
projections so that the same model gives the same scores in the other
layout: the conversion weight-porting scripts perform.
"""

from __future__ import annotations

import torch

from .._checks import (
    check_finite,
    check_float_dtype,
    check_float_tensor,
    check_positive_int,
    check_rank,
    check_real,
    describe,
)

#: The two pairings of features, see the module docstring.
LAYOUTS = ("half", "interleaved")


def _check_layout(layout: object, name: str = "layout") -> str:
    if not isinstance(layout, str):
        raise TypeError(f"{name} must be a str, one of {LAYOUTS}, got {describe(layout)}")
    if layout not in LAYOUTS:
        raise ValueError(f"{name} must be one of {LAYOUTS}, got {layout!r}")
    return layout


def _check_base(base: object, name: str = "base") -> float:
    return check_real(base, name, low=0.0, low_open=True)


def _check_head_dim(head_dim: int, shape: tuple[int, ...], name: str) -> None:
    if head_dim == 0 or head_dim % 2:
        raise ValueError(
            f"{name} must have an even, positive last axis d_k (pairs of features), "
            f"got shape {shape}"
        )


def rotary_frequencies(
    head_dim: int, base: float = 10000.0, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """The angle per position of every pair, ``theta_l = base ** (-2l / head_dim)``.

    Parameters
    ----------
    head_dim : int
        The per-head width ``d_k``; positive and even.
    base : float, default 10000.0
        Finite and above 0. Pair 0 turns by one radian per position, the
        last pair by ``base ** (-(head_dim - 2) / head_dim)``, almost
        ``1 / base``.
    dtype : torch.dtype, default torch.float64
        A floating dtype for the result.

    Returns
    -------
    torch.Tensor, shape ``(head_dim // 2,)``
        ``theta_l`` for ``l = 0 .. head_dim/2 - 1``, falling from 1; pair
        ``l`` completes a turn every ``2 pi / theta_l`` positions.

    Raises
    ------
    TypeError
        If ``head_dim`` is not an int, ``base`` not a real number or
        ``dtype`` not a floating-point ``torch.dtype``.
    ValueError
        If ``head_dim`` is not positive and even, or ``base`` is not a
        finite number above 0.

    Examples
    --------
    >>> from selfattention import rotary_frequencies
    >>> rotary_frequencies(8, base=10000.0).tolist()
    [1.0, 0.1, 0.01, 0.001]
    """
    head_dim = check_positive_int(head_dim, "head_dim")
    if head_dim % 2:
        raise ValueError(f"head_dim must be even (pairs of features), got {head_dim}")
    base = _check_base(base)
    dtype = check_float_dtype(dtype, "dtype")
    pair = torch.arange(head_dim // 2, dtype=torch.float64)  # (d_k/2,): l
    return (base ** (-2.0 * pair / head_dim)).to(dtype)


def _positions_for(x: torch.Tensor, positions: object) -> torch.Tensor:
    """Validate ``positions`` and shape it to broadcast against ``x (..., T, d_k/2)``."""
    shape, length = tuple(x.shape), x.shape[-2]
    if positions is None:
        return torch.arange(length, device=x.device)  # (T,)
    if not isinstance(positions, torch.Tensor):
        raise TypeError(
            f"positions must be a torch.Tensor of integers, got {describe(positions)}; "
            "use torch.as_tensor(positions)"
        )
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(
            f"positions must hold integers (or floats, for position interpolation), "
            f"got {describe(positions)}"
        )
    if positions.device != x.device:
        raise ValueError(
            f"positions is on {positions.device} but x is on {x.device}; move one of them"
        )
    check_finite(positions, "positions")
    expected = f"(T,) = ({length},)"
    if x.dim() >= 3:
        expected += f" or (B, T) = ({shape[0]}, {length})"
    if positions.dim() == 1 and positions.shape[0] == length:
        return positions  # (T,)
    if positions.dim() == 2 and x.dim() >= 3 and tuple(positions.shape) == (shape[0], length):
        # (B, T) -> (B, 1, ..., 1, T): one row of positions per batch entry
        return positions.reshape((shape[0],) + (1,) * (x.dim() - 3) + (length,))
    raise ValueError(
        f"positions must have shape {expected} for x of shape {shape}, "
        f"got {tuple(positions.shape)}"
    )


def rotary_embedding(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    base: float = 10000.0,
    layout: str = "half",
) -> torch.Tensor:
    """Rotate every feature pair of ``x`` by ``position * theta_l`` (RoPE).

    Pair ``l`` of the token at position ``pos`` turns by the angle
    ``pos * theta_l``, ``theta_l = base ** (-2l / d_k)``: its first feature
    ``a`` and second feature ``b`` become ``a cos - b sin`` and ``a sin + b
    cos``, which is the complex product ``(a + ib) e^{i pos theta_l}``. Apply
    it to queries and keys (never to values) after the split into heads.
    Without ``layout`` the pairs are ``(l, l + d_k/2)``, the ``"half"`` layout
    that ``MultiHeadAttention(..., rope=True)`` uses; pass
    ``layout="interleaved"`` for RoFormer's adjacent pairs ``(2l, 2l + 1)``.

    Parameters
    ----------
    x : torch.Tensor
        Queries or keys, ``(..., T, d_k)``, floating-point, with ``d_k`` even
        and positive, for example ``(B, h, T, d_k)``.
    positions : torch.Tensor, optional
        The position of every token: integers (or floats, for position
        interpolation), shape ``(T,)`` for all rows alike, or ``(B, T)``, one
        row per entry of ``x``'s first axis (``x`` then has at least 3
        dimensions and ``x.shape[0] == B``). Defaults to ``0 .. T - 1``.
        Negative positions are allowed (a rotation the other way).
    base : float, default 10000.0
        The wavelength base; finite and above 0.
    layout : {"half", "interleaved"}, default "half"
        Which features form pair ``l``: ``(l, l + d_k/2)`` (GPT-NeoX, Hugging
        Face) or ``(2l, 2l + 1)`` (RoFormer, Meta's Llama reference).

    Returns
    -------
    torch.Tensor
        The rotated ``x``, same shape and dtype. The angles are computed in
        float64 (float32 on a device without float64) and rounded once.

    Raises
    ------
    TypeError
        If ``x`` is not a floating-point tensor, ``positions`` is not a tensor
        of integers or floats, ``base`` is not a real number, or ``layout``
        is not a string.
    ValueError
        If ``x`` has fewer than 2 dimensions, an odd or zero ``d_k``, or NaN
        or inf; if ``positions`` has the wrong shape, another device or
        non-finite values; if ``base`` is not above 0; or if ``layout`` is
        unknown.

    Examples
    --------
    One pair ``(1, 0)`` at positions 0, 1, 2 with ``d_k = 2`` (so ``theta_0 =
    1``): it turns by 0, 1 and 2 radians.

    >>> import torch
    >>> from selfattention import rotary_embedding
    >>> x = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])  # (T, d_k)
    >>> rotary_embedding(x).double().round(decimals=3).tolist()
    [[1.0, 0.0], [0.54, 0.841], [-0.416, 0.909]]

    The relative property: shifting both positions leaves the score alone.

    >>> q, k = torch.randn(1, 8), torch.randn(1, 8)  # (T, d_k)
    >>> def score(i, j):
    ...     return (rotary_embedding(q, torch.tensor([i]))
    ...             @ rotary_embedding(k, torch.tensor([j])).T).item()
    >>> abs(score(3, 1) - score(103, 101)) < 1e-4
    True
    """
    check_float_tensor(x, "x")
    check_rank(tuple(x.shape), "x")
    _check_head_dim(x.shape[-1], tuple(x.shape), "x")
    base = _check_base(base)
    layout = _check_layout(layout)
    check_finite(x, "x")
    return _rotate(x, _positions_for(x, positions), base, layout)


def _rotate(x: torch.Tensor, positions: torch.Tensor, base: float, layout: str) -> torch.Tensor:
    """``rotary_embedding`` without the checks: ``positions`` broadcasts to ``x[..., 0]``."""
    work = torch.float32 if x.device.type == "mps" else torch.float64
    theta = rotary_frequencies(x.shape[-1], base, work).to(x.device)  # (d_k/2,)
    angles = positions.to(work)[..., None] * theta  # (..., T, d_k/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    half = x.shape[-1] // 2
    if layout == "interleaved":
        pairs = x.unflatten(-1, (half, 2))  # (..., T, d_k/2, 2): (2l, 2l+1)
        a, b = pairs[..., 0], pairs[..., 1]  # (..., T, d_k/2) each
    else:
        a, b = x[..., :half], x[..., half:]  # (..., T, d_k/2): (l, l + d_k/2)
    first = a * cos - b * sin  # (..., T, d_k/2)
    second = a * sin + b * cos  # (..., T, d_k/2)
    if layout == "interleaved":
        return torch.stack((first, second), dim=-1).flatten(-2)  # (..., T, d_k)
    return torch.cat((first, second), dim=-1)  # (..., T, d_k)


def permute_rotary_rows(
    weight: torch.Tensor, num_heads: int, from_layout: str, to_layout: str
) -> torch.Tensor:
    """Reorder the rows of a query or key projection from one RoPE layout to the other.

    A ``q_proj`` (or ``k_proj``) weight ``(num_heads * d_k, d_model)`` makes,
    for each head, ``d_k`` features whose pairs the rotation reads in
    ``from_layout``. Moving each head's rows so that feature ``2l`` lands at
    ``l`` and ``2l + 1`` at ``l + d_k/2`` (interleaved to half; the reverse
    for half to interleaved) makes the rotation in ``to_layout`` see the same
    pairs. The rotated queries and keys are then the old ones with their
    features permuted the same way, so every score ``q . k`` is unchanged.
    Apply it to ``q_proj`` (with the query heads) and ``k_proj`` (with the
    key/value heads), and to their biases; leave ``v_proj`` alone.

    Parameters
    ----------
    weight : torch.Tensor
        A floating-point weight ``(num_heads * d_k, d_model)`` (rows are
        output features, as in ``nn.Linear.weight``) or a bias
        ``(num_heads * d_k,)``.
    num_heads : int
        The number of heads the rows belong to (``num_kv_heads`` for a key
        projection under grouped-query attention).
    from_layout, to_layout : {"half", "interleaved"}
        The layout the weight was trained in and the one it should serve.

    Returns
    -------
    torch.Tensor
        A new tensor with the rows reordered (a copy when the layouts agree).

    Raises
    ------
    TypeError
        If ``weight`` is not a floating-point tensor, ``num_heads`` not an int
        or a layout not a string.
    ValueError
        If ``weight`` is not 1-D or 2-D or holds NaN or inf, its rows do not
        split into ``num_heads`` heads of an even width, ``num_heads`` is not
        positive, or a layout is unknown.

    Examples
    --------
    Rows ``0..7`` of one head with ``d_k = 8``: the even rows go first.

    >>> import torch
    >>> from selfattention import permute_rotary_rows
    >>> rows = torch.arange(8.0)  # a bias (num_heads * d_k,), 1 head
    >>> permute_rotary_rows(rows, 1, "interleaved", "half").tolist()
    [0.0, 2.0, 4.0, 6.0, 1.0, 3.0, 5.0, 7.0]
    >>> permute_rotary_rows(rows, 2, "half", "interleaved").tolist()  # 2 heads
    [0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]
    """
    check_float_tensor(weight, "weight")
    num_heads = check_positive_int(num_heads, "num_heads")
    from_layout = _check_layout(from_layout, "from_layout")
    to_layout = _check_layout(to_layout, "to_layout")
    shape = tuple(weight.shape)
    if weight.dim() not in (1, 2):
        raise ValueError(
            f"weight must have shape (num_heads * d_k, d_model) or (num_heads * d_k,), got {shape}"
        )
    rows = shape[0]
    if rows % num_heads or (rows // num_heads) % 2 or rows == 0:
        raise ValueError(
            f"weight has {rows} rows, which do not split into num_heads={num_heads} heads "
            f"of an even width d_k (weight shape {shape})"
        )
    check_finite(weight, "weight")
    if from_layout == to_layout:
        return weight.clone()
    half = rows // num_heads // 2
    rest = shape[1:]
    if from_layout == "interleaved":  # (h, d_k/2, 2) -> (h, 2, d_k/2)
        grouped = weight.reshape((num_heads, half, 2) + rest)
    else:  # (h, 2, d_k/2) -> (h, d_k/2, 2)
        grouped = weight.reshape((num_heads, 2, half) + rest)
    return grouped.transpose(1, 2).reshape(shape).clone()
