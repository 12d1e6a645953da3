"""The attention formula in torch, shared by ``SelfAttention`` and ``MultiHeadAttention``.

Written out by hand (no call to PyTorch's fused kernel) because the book
teaches it; the tests compare it with ``F.scaled_dot_product_attention``.
This module is also the one home of the torch side's input checks (built on
``selfattention._checks``), of its masked softmax (the numpy side's is
``selfattention.handmath.softmax``), of the head reshapes that every
multi-head module uses (``_split_heads``, ``_merge_heads``, ``_expand_kv_heads``)
and of ``fused_attention``, a module's own projections around PyTorch's
fused ``F.scaled_dot_product_attention``, which chapters 9 and 10 compare
the package with.
"""

from __future__ import annotations

import math

import torch

from .._checks import (
    all_finite,
    as_bool_mask,
    check_flag,
    check_float_tensor,
    check_mask_shape,
    check_same_dtype_device,
)
from ..masks import causal_mask


def check_model_input(
    tensor: object,
    name: str,
    d_model: int,
    ranks: tuple[int, ...] = (3,),
    like: torch.Tensor | None = None,
) -> torch.Tensor:
    """Validate a module input: a float tensor of an allowed rank whose last axis is ``d_model``.

    The message names the argument, the shapes the module accepts and the
    shape it got, e.g. ``x must have shape (B, T, d_model) or (T, d_model),
    got (8,)``. With ``like`` (a parameter of the module), the input must
    also have its dtype (else ``TypeError``) and be on its device (else
    ``ValueError``). Returns ``tensor`` unchanged.

    Examples
    --------
    >>> import torch
    >>> from selfattention.layers.attention_torch import check_model_input
    >>> check_model_input(torch.zeros(8), "x", d_model=4, ranks=(3, 2))
    Traceback (most recent call last):
        ...
    ValueError: x must have shape (B, T, d_model) or (T, d_model), got (8,)
    """
    tensor = check_float_tensor(tensor, name)
    if tensor.dim() not in ranks:
        expected = " or ".join(
            {3: "(B, T, d_model)", 2: "(T, d_model)"}.get(rank, f"{rank}-D") for rank in ranks
        )
        raise ValueError(f"{name} must have shape {expected}, got {tuple(tensor.shape)}")
    if tensor.shape[-1] != d_model:
        raise ValueError(
            f"{name} has feature size {tensor.shape[-1]} but the module has "
            f"d_model={d_model} ({name} shape {tuple(tensor.shape)})"
        )
    if like is not None:
        check_same_dtype_device(tensor, name, like.dtype, like.device, "the module's parameters")
    return tensor


def combine_masks(
    mask: object,
    causal: bool,
    score_shape: tuple[int, ...],
    device: torch.device,
    align: str = "top-left",
    window: int | None = None,
) -> torch.Tensor | None:
    """Validate ``mask`` (True = may attend) and fold in the causal mask.

    ``mask`` is boolean, a torch tensor or a numpy array (a numpy mask, such
    as ``padding_mask`` returns for a list, is converted with
    ``torch.from_numpy``), and must broadcast to ``score_shape = (..., T_q,
    T_k)``; it is moved to ``device``. With ``causal=True`` the triangle comes
    from ``masks.causal_mask(T_q, T_k, align, window)``: with a ``window``
    it is the band of the last ``window`` keys up to each query, which
    already lies inside the causal triangle. Returns a boolean tensor
    broadcastable to ``score_shape``, or None when nothing is masked. Raises
    ``TypeError`` if ``mask`` is not boolean or ``causal`` is not a bool, and
    ``ValueError`` if ``mask`` does not broadcast.

    Examples
    --------
    >>> import torch
    >>> from selfattention.layers.attention_torch import combine_masks
    >>> keys_kept = torch.tensor([True, True, False])  # hide the third key
    >>> keep = combine_masks(keys_kept, True, (2, 3), torch.device("cpu"))
    >>> keep.int().tolist()
    [[1, 0, 0], [1, 1, 0]]
    >>> combine_masks(None, True, (3, 3), torch.device("cpu"), window=2).int().tolist()
    [[1, 0, 0], [1, 1, 0], [0, 1, 1]]
    """
    causal = check_flag(causal, "causal")
    keep = None
    if mask is not None:
        keep = as_bool_mask(mask, "mask", to="torch", device=device)
        check_mask_shape(tuple(keep.shape), score_shape)
    if causal:
        t_q, t_k = score_shape[-2:]
        triangle = torch.from_numpy(causal_mask(t_q, t_k, align=align, window=window))
        triangle = triangle.to(device)
        keep = triangle if keep is None else keep & triangle
    return keep


def _split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, T, num_heads * width) -> (B, num_heads, T, width)`` with view + transpose.

    Head ``r`` gets features ``r * width`` to ``(r + 1) * width - 1`` of
    every token, and row ``i`` of every head is still token ``i``. A bare
    ``x.view(B, num_heads, T, width)`` has the same shape but deals whole
    tokens out to the heads (chapter 9). ``x`` is not validated here: the
    modules check their inputs first.

    Examples
    --------
    >>> import torch
    >>> x = torch.arange(12.0).view(1, 3, 4)  # (B, T, d_model): 3 tokens
    >>> _split_heads(x, 2)[0, 1]                # head 1: features 2 and 3
    tensor([[ 2.,  3.],
            [ 6.,  7.],
            [10., 11.]])
    """
    batch, length, width = x.shape
    return x.view(batch, length, num_heads, width // num_heads).transpose(1, 2)


def _merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``(B, h, T, width) -> (B, T, h * width)``: the inverse of ``split_heads``.

    The transpose brings the tokens back in front of the heads; the
    ``reshape`` (not a ``view``: the transposed tensor is not contiguous)
    glues each token's ``h`` pieces into one row, the concatenation
    ``[head_0, ..., head_{h-1}]``.

    Examples
    --------
    >>> import torch
    >>> x = torch.randn(2, 5, 6)  # (B, T, d_model)
    >>> torch.equal(_merge_heads(_split_heads(x, 3)), x)
    True
    """
    batch, heads, length, width = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * width)


def _expand_kv_heads(kv: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, h_kv, T, d_k) -> (B, num_heads, T, d_k)``: share key/value heads out to query heads.

    Each key/value head is repeated for the ``num_heads // h_kv``
    consecutive query heads of its group (``repeat_interleave``), so query
    head ``r`` reads key/value head ``r // (num_heads // h_kv)``, the layout
    of ``F.scaled_dot_product_attention(..., enable_gqa=True)``. With
    ``h_kv == num_heads`` it returns ``kv`` itself.

    Examples
    --------
    >>> import torch
    >>> kv = torch.tensor([10.0, 20.0]).view(1, 2, 1, 1)  # two key/value heads
    >>> _expand_kv_heads(kv, 4).flatten()
    tensor([10., 10., 20., 20.])
    """
    groups = num_heads // kv.shape[1]
    return kv if groups == 1 else kv.repeat_interleave(groups, dim=1)


def fused_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor | None = None,
    value: torch.Tensor | None = None,
    **sdpa_options: object,
) -> torch.Tensor:
    """A ``MultiHeadAttention``'s own projections around ``F.scaled_dot_product_attention``.

    Projects ``query (B, T_q, d_model)`` and ``key``/``value (B, T_k,
    d_model)`` (``key`` defaults to ``query``, ``value`` to ``key``) with the
    module's ``q_proj``, ``k_proj`` and ``v_proj``, splits them into heads,
    runs PyTorch's fused attention with ``sdpa_options`` (``attn_mask``,
    ``is_causal``, ``dropout_p``, ...; PyTorch's conventions: a boolean
    ``attn_mask`` is True = may attend, and ``is_causal`` is top-left),
    merges the heads and applies ``out_proj``. Returns ``(B, T_q,
    d_model)``. With fewer key/value heads than query heads,
    ``enable_gqa=True`` is passed unless given. Chapters 9 and 10 check the
    package's module against it; it is not meant for training (no cache,
    and ``dropout_p`` applies whatever the module's mode).

    Raises
    ------
    ValueError
        If the module rotates queries and keys (``rope=True``) or has a
        ``window``: PyTorch's function would silently leave them out.

    Examples
    --------
    >>> import torch
    >>> from selfattention import MultiHeadAttention
    >>> _ = torch.manual_seed(0)
    >>> layer = MultiHeadAttention(8, num_heads=4, num_kv_heads=2).eval()
    >>> x = torch.randn(2, 5, 8)  # (B, T, d_model)
    >>> with torch.no_grad():
    ...     ours, _ = layer(x, causal=True)
    ...     fused = fused_attention(layer, x, is_causal=True)
    >>> torch.allclose(ours, fused, atol=1e-6)
    True
    """
    if getattr(module, "rope", False) or getattr(module, "window", None) is not None:
        raise ValueError(
            "fused_attention takes a module without rope or window: "
            "F.scaled_dot_product_attention would leave them out"
        )
    key = query if key is None else key
    value = key if value is None else value
    heads, kv_heads = module.num_heads, module.num_kv_heads
    q = _split_heads(module.q_proj(query), heads)  # (B, h, T_q, d_k)
    k = _split_heads(module.k_proj(key), kv_heads)  # (B, h_kv, T_k, d_k)
    v = _split_heads(module.v_proj(value), kv_heads)  # (B, h_kv, T_k, d_v)
    if kv_heads != heads:
        sdpa_options.setdefault("enable_gqa", True)
    context = torch.nn.functional.scaled_dot_product_attention(q, k, v, **sdpa_options)
    return module.out_proj(_merge_heads(context))  # (B, T_q, d_model)


def masked_softmax(scores: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """Softmax over the last axis, with masked entries getting weight exactly 0.

    ``keep`` is boolean and broadcastable to ``scores``, True = may attend. A
    row with nothing kept gets zero weights, with no NaN in the values or the
    gradients: the masked scores are filled with the dtype's most negative
    finite number (not ``-inf``), and multiplying by ``keep`` afterwards turns
    the resulting uniform row into zeros.

    Examples
    --------
    >>> import torch
    >>> from selfattention.layers.attention_torch import masked_softmax
    >>> scores = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    >>> keep = torch.tensor([[True, True, False], [False, False, False]])
    >>> masked_softmax(scores, keep).double().round(decimals=3).tolist()
    [[0.269, 0.731, 0.0], [0.0, 0.0, 0.0]]
    """
    if keep is None:
        return torch.softmax(scores, dim=-1)
    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) * keep


def attend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    keep: torch.Tensor | None = None,
    dropout: float = 0.0,
    training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(Q K^T / sqrt(d_k)) V`` for already-validated tensors.

    ``query (..., T_q, d_k)``, ``key (..., T_k, d_k)``, ``value (..., T_k, d_v)``;
    ``keep`` is a boolean mask broadcastable to ``(..., T_q, T_k)``. Returns the
    output ``(..., T_q, d_v)`` and the weights ``(..., T_q, T_k)`` that produced it.
    Rows with nothing to attend to get zero weights, without NaN in the values
    or the gradients. With dropout in training mode, the returned weights are
    the dropped-out ones, whose rows no longer sum to 1.

    Examples
    --------
    >>> import torch
    >>> from selfattention.layers.attention_torch import attend
    >>> query = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # (T_q, d_k)
    >>> key = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (T_k, d_k)
    >>> value = torch.tensor([[1.0], [2.0], [3.0]])  # (T_k, d_v)
    >>> output, weights = attend(query, key, value)
    >>> tuple(output.shape), weights.double().round(decimals=3).tolist()
    ((2, 1), [[0.401, 0.198, 0.401], [0.198, 0.401, 0.401]])
    """
    d_k = query.shape[-1]
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
    weights = masked_softmax(scores, keep)
    if dropout > 0.0 and training:
        weights = torch.nn.functional.dropout(weights, p=dropout, training=True)
    return weights @ value, weights


def _check_output_finite(
    result: torch.Tensor, module: torch.nn.Module, inputs: str, what: str
) -> None:
    """Raise ``ValueError`` if a module's ``result`` holds NaN or inf although its inputs did not.

    Called after the inputs were checked to be finite, so the cause is a
    parameter that is not finite (a diverged training run) or numbers that
    overflow the dtype; the message says which. ``what`` names the result
    ("output", "keys").
    """
    if all_finite(result):
        return
    for name, parameter in module.named_parameters():
        if not all_finite(parameter):
            raise ValueError(
                f"the module's parameter {name} (shape {tuple(parameter.shape)}) holds NaN "
                f"or inf, so the attention's {what} would too"
            )
    raise ValueError(
        f"the attention's {what} overflows {result.dtype} although {inputs} are finite: "
        "their projections or scores are too large for the dtype; rescale the inputs "
        "or compute in float64"
    )
