"""The attention formula in torch, shared by ``SelfAttention`` and ``MultiHeadAttention``.

Written out by hand (no call to PyTorch's fused kernel) because the book
teaches it; the tests compare it with ``F.scaled_dot_product_attention``.
This module is also the one home of the torch side's input checks and of its
masked softmax (the numpy side's is ``selfattention.handmath.softmax``).
"""

from __future__ import annotations

import math

import torch

from .. import _checks
from .._checks import (
    all_finite,
    as_bool_mask,
    check_flag,
    check_mask_shape,
    check_same_dtype_device,
)
from ..masks import causal_mask


def check_float_tensor(tensor: object, name: str) -> torch.Tensor:
    """Raise unless ``tensor`` is a floating-point torch tensor that holds values.

    A non-tensor raises ``TypeError`` (a numpy array's message says how to
    convert it), an integer, boolean or complex tensor raises ``TypeError``,
    and a tensor on the ``meta`` device raises ``ValueError``. Returns
    ``tensor`` unchanged, so the check can wrap an expression.

    Examples
    --------
    >>> import torch
    >>> from selfattention.layers.attention_torch import check_float_tensor
    >>> check_float_tensor(torch.tensor([1, 2]), "x")
    Traceback (most recent call last):
        ...
    TypeError: x must be a floating-point tensor, got dtype torch.int64 (shape (2,))
    """
    return _checks.check_float_tensor(tensor, name)


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
) -> torch.Tensor | None:
    """Validate ``mask`` (True = may attend) and fold in the causal mask.

    ``mask`` is boolean, a torch tensor or a numpy array (a numpy mask, such
    as ``padding_mask`` returns for a list, is converted with
    ``torch.from_numpy``), and must broadcast to ``score_shape = (..., T_q,
    T_k)``; it is moved to ``device``. With ``causal=True`` the triangle comes
    from ``masks.causal_mask(T_q, T_k, align)``. Returns a boolean tensor
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
    """
    causal = check_flag(causal, "causal")
    keep = None
    if mask is not None:
        keep = as_bool_mask(mask, "mask", to="torch", device=device)
        check_mask_shape(tuple(keep.shape), score_shape)
    if causal:
        t_q, t_k = score_shape[-2:]
        triangle = torch.from_numpy(causal_mask(t_q, t_k, align=align)).to(device)
        keep = triangle if keep is None else keep & triangle
    return keep


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
