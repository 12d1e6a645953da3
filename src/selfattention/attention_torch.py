"""The attention formula in torch, shared by ``SelfAttention`` and ``MultiHeadAttention``.

Written out by hand (no call to PyTorch's fused kernel) because the book
teaches it; the tests compare it with ``F.scaled_dot_product_attention``.
"""

from __future__ import annotations

import math

import torch

from ._checks import check_mask_shape


def check_float_tensor(tensor: object, name: str) -> torch.Tensor:
    """Raise ``TypeError`` unless ``tensor`` is a floating-point torch tensor."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if not tensor.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {tensor.dtype}")
    return tensor


def combine_masks(
    mask: torch.Tensor | None,
    causal: bool,
    score_shape: tuple[int, ...],
    device: torch.device,
) -> torch.Tensor | None:
    """Validate ``mask`` (True = may attend) and fold in the causal mask."""
    keep = None
    if mask is not None:
        if not isinstance(mask, torch.Tensor):
            raise TypeError(f"mask must be a torch.Tensor, got {type(mask).__name__}")
        if mask.dtype != torch.bool:
            raise TypeError(
                f"mask must be boolean (True = may attend), got dtype {mask.dtype}; "
                "convert an additive or 0/1 mask first"
            )
        check_mask_shape(tuple(mask.shape), score_shape)
        keep = mask.to(device)
    if causal:
        t_q, t_k = score_shape[-2:]
        lower = torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril()
        keep = lower if keep is None else keep & lower
    return keep


def attend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    keep: torch.Tensor | None = None,
    dropout: float = 0.0,
    training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(Q K^T / sqrt(d_k)) V`` for already-validated tensors.

    ``query (..., Tq, d_k)``, ``key (..., Tk, d_k)``, ``value (..., Tk, d_v)``;
    ``keep`` is a boolean mask broadcastable to ``(..., Tq, Tk)``. Returns the
    output ``(..., Tq, d_v)`` and the weights ``(..., Tq, Tk)`` that produced it.
    Rows with nothing to attend to get zero weights, without NaN in the values
    or the gradients. With dropout, the returned weights are the dropped-out
    ones, whose rows no longer sum to 1.
    """
    d_k = query.shape[-1]
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., Tq, Tk)
    if keep is not None:
        # A finite fill keeps fully masked rows free of NaN; the product with
        # ``keep`` afterwards sets their (uniform) weights to exactly zero.
        scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    if keep is not None:
        weights = weights * keep
    if dropout > 0.0 and training:
        weights = torch.nn.functional.dropout(weights, p=dropout, training=True)
    return weights @ value, weights
