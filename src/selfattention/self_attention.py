"""Single-head self-attention as a torch module (chapter 8 builds it)."""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_positive_int
from .attention_torch import attend, check_model_input, combine_masks


class SelfAttention(nn.Module):
    """One attention head: project to Q, K, V, attend, project back.

    ``q_proj`` and ``k_proj`` map ``d_model -> d_k``, ``v_proj`` maps
    ``d_model -> d_v`` and ``out_proj`` maps ``d_v -> d_model``. ``d_k``
    defaults to ``d_model`` and ``d_v`` to ``d_k``.
    """

    def __init__(
        self, d_model: int, d_k: int | None = None, d_v: int | None = None, bias: bool = True
    ) -> None:
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        self.d_k = check_positive_int(d_model if d_k is None else d_k, "d_k")
        self.d_v = check_positive_int(self.d_k if d_v is None else d_v, "d_v")
        self.q_proj = nn.Linear(self.d_model, self.d_k, bias=bias)
        self.k_proj = nn.Linear(self.d_model, self.d_k, bias=bias)
        self.v_proj = nn.Linear(self.d_model, self.d_v, bias=bias)
        self.out_proj = nn.Linear(self.d_v, self.d_model, bias=bias)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, causal: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend over ``x`` of shape ``(B, T, d_model)`` or ``(T, d_model)``.

        ``mask`` is boolean, broadcastable to ``(B, T, T)`` (or ``(T, T)``),
        True = may attend. Returns ``output`` shaped like ``x`` and
        ``weights`` of shape ``(B, T, T)`` (or ``(T, T)``).
        """
        check_model_input(x, "x", self.d_model, ranks=(3, 2))
        t = x.shape[-2]
        keep = combine_masks(mask, causal, tuple(x.shape[:-2]) + (t, t), x.device)
        query = self.q_proj(x)  # (..., T, d_k)
        key = self.k_proj(x)  # (..., T, d_k)
        value = self.v_proj(x)  # (..., T, d_v)
        context, weights = attend(query, key, value, keep)  # (..., T, d_v), (..., T, T)
        return self.out_proj(context), weights
