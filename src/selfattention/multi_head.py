"""Multi-head attention as a torch module (chapter 9 builds it)."""

from __future__ import annotations

import torch
from torch import nn

from ._checks import check_positive_int
from .attention_torch import attend, check_float_tensor, combine_masks


class MultiHeadAttention(nn.Module):
    """``num_heads`` attention heads of size ``d_model // num_heads`` in parallel.

    ``q_proj``, ``k_proj``, ``v_proj`` and ``out_proj`` each map
    ``d_model -> d_model``. Inputs are batch-first.
    """

    def __init__(
        self, d_model: int, num_heads: int, bias: bool = True, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        self.num_heads = check_positive_int(num_heads, "num_heads")
        if d_model % num_heads:
            raise ValueError(
                f"d_model={d_model} is not divisible by num_heads={num_heads}"
            )
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.head_dim = d_model // num_heads
        self.dropout = float(dropout)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def _check_input(self, tensor: torch.Tensor, name: str) -> None:
        check_float_tensor(tensor, name)
        if tensor.dim() != 3:
            raise ValueError(f"{name} must have shape (B, T, d_model), got {tuple(tensor.shape)}")
        if tensor.shape[-1] != self.d_model:
            raise ValueError(
                f"{name} has feature size {tensor.shape[-1]} but the module has "
                f"d_model={self.d_model} ({name} shape {tuple(tensor.shape)})"
            )

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, T, d_model) -> (B, num_heads, T, head_dim)`` with view + transpose.

        A bare ``view(B, num_heads, T, head_dim)`` would mix positions and
        features; the transpose keeps each token's features together.
        """
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, num_heads, T, head_dim) -> (B, T, d_model)``, the inverse of ``split_heads``."""
        batch, _, length, _ = x.shape
        return x.transpose(1, 2).reshape(batch, length, self.d_model)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        causal: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from ``query (B, Tq, d_model)`` to ``key``/``value (B, Tk, d_model)``.

        ``key`` and ``value`` default to ``query`` (self-attention). ``mask`` is
        boolean, broadcastable to ``(B, num_heads, Tq, Tk)``, True = may attend.
        Returns ``output (B, Tq, d_model)`` and per-head ``weights
        (B, num_heads, Tq, Tk)``. In training mode with dropout the weights are
        the dropped-out ones, and their rows no longer sum to 1.
        """
        key = query if key is None else key
        value = key if value is None else value
        self._check_input(query, "query")
        self._check_input(key, "key")
        self._check_input(value, "value")
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(
                f"key and value must have the same batch size and length: key has shape "
                f"{tuple(key.shape)}, value has shape {tuple(value.shape)}"
            )
        if query.shape[0] != key.shape[0]:
            raise ValueError(
                f"query and key must have the same batch size: query has shape "
                f"{tuple(query.shape)}, key has shape {tuple(key.shape)}"
            )
        batch, t_q, _ = query.shape
        t_k = key.shape[1]
        keep = combine_masks(mask, causal, (batch, self.num_heads, t_q, t_k), query.device)
        q = self.split_heads(self.q_proj(query))  # (B, H, Tq, head_dim)
        k = self.split_heads(self.k_proj(key))  # (B, H, Tk, head_dim)
        v = self.split_heads(self.v_proj(value))  # (B, H, Tk, head_dim)
        context, weights = attend(q, k, v, keep, self.dropout, self.training)
        return self.out_proj(self.merge_heads(context)), weights

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy the weights of a ``torch.nn.MultiheadAttention`` into a new module.

        PyTorch packs the three input projections into one ``in_proj_weight``
        of shape ``(3 * d_model, d_model)``; it is split into ``q_proj``,
        ``k_proj`` and ``v_proj`` in that order. Only the plain configuration
        is supported (same kdim/vdim as embed_dim, no bias_k/bias_v, no
        zero attention). Note that ``nn.MultiheadAttention`` masks with
        True = blocked, the opposite of this module.
        """
        if not isinstance(module, nn.MultiheadAttention):
            raise TypeError(f"module must be a torch.nn.MultiheadAttention, got {type(module).__name__}")
        if not module._qkv_same_embed_dim:
            raise ValueError("module has kdim/vdim different from embed_dim; not supported")
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("module uses add_bias_kv or add_zero_attn; not supported")
        has_bias = module.in_proj_bias is not None
        copy = cls(module.embed_dim, module.num_heads, bias=has_bias, dropout=module.dropout)
        weight = module.in_proj_weight
        copy = copy.to(device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            for proj, w_part in zip((copy.q_proj, copy.k_proj, copy.v_proj), weight.chunk(3, dim=0)):
                proj.weight.copy_(w_part)
            copy.out_proj.weight.copy_(module.out_proj.weight)
            if has_bias:
                for proj, b_part in zip(
                    (copy.q_proj, copy.k_proj, copy.v_proj), module.in_proj_bias.chunk(3, dim=0)
                ):
                    proj.bias.copy_(b_part)
                copy.out_proj.bias.copy_(module.out_proj.bias)
        copy.train(module.training)
        return copy
