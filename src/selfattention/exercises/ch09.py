"""Chapter 9 exercises: splitting a tensor into heads, and sharing key/value heads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..layers.attention_torch import _expand_kv_heads, _split_heads
from ._runner import Case, run_checks


def reference_split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, T, d_model) -> (B, num_heads, T, d_model // num_heads)`` with view + transpose.

    Head ``r`` holds features ``r * d_k`` to ``(r + 1) * d_k - 1`` of
    every token, and row ``i`` of every head is token ``i``.

    Examples
    --------
    >>> x = torch.arange(12.0).view(1, 3, 4)  # (B, T, d_model) = (1, 3, 4)
    >>> reference_split_heads(x, 2)[0, 1]      # head 1: features 2 and 3
    tensor([[ 2.,  3.],
            [ 6.,  7.],
            [10., 11.]])
    """
    return _split_heads(x, num_heads)  # the package's own, which MultiHeadAttention uses


def reference_expand_kv_heads(kv: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, num_kv_heads, T, d_k) -> (B, num_heads, T, d_k)`` for grouped-query attention.

    Each key/value head is repeated for the ``num_heads // num_kv_heads``
    consecutive query heads of its group, so query head ``r`` reads key/value
    head ``g = r // (num_heads // num_kv_heads)``: the layout of
    ``F.scaled_dot_product_attention(..., enable_gqa=True)``.

    Examples
    --------
    >>> kv = torch.tensor([10.0, 20.0]).view(1, 2, 1, 1)  # two key/value heads
    >>> reference_expand_kv_heads(kv, 4).flatten()
    tensor([10., 10., 20., 20.])
    """
    return _expand_kv_heads(kv, num_heads)  # the package's own, which MultiHeadAttention uses


def _labelled(batch: int, length: int, width: int) -> torch.Tensor:
    """A float tensor whose entry ``[s, i, l]`` is ``100 s + 10 i + l``: easy to read back.

    ``s`` is the sequence in the batch, ``i`` the token, ``l`` the feature.
    """
    sequence = torch.arange(batch, dtype=torch.float64).view(-1, 1, 1)
    token = torch.arange(length, dtype=torch.float64).view(1, -1, 1)
    feature = torch.arange(width, dtype=torch.float64).view(1, 1, -1)
    return 100 * sequence + 10 * token + feature


def check_split_heads(fn: Callable[[torch.Tensor, int], Any]) -> bool:
    """Check ``fn(x, num_heads)`` that splits ``x (B, T, d_model)`` into ``(B, h, T, d_k)``.

    The first case holds the numbers ``10 i + l`` (token ``i``, feature
    ``l``), so a failure shows which token and feature landed where. A bare
    ``x.view(B, h, T, d_k)`` fails it: each of its heads holds a run of the
    token stream (``T / h`` tokens' worth of numbers, which can end in the
    middle of a token), not a slice of every token's features.
    """
    generator = torch.Generator().manual_seed(9)
    cases = [
        Case("h = 2, T = 3, entries 10 i + l", (_labelled(1, 3, 4), 2)),
        Case(
            "B = 2, T = 5, d_model = 12, h = 3",
            (torch.randn(2, 5, 12, generator=generator, dtype=torch.float64), 3),
        ),
        Case("h = 4, d_model = 8, float32", (torch.randn(2, 4, 8, generator=generator), 4)),
        Case("one head: only adds an axis", (_labelled(2, 3, 4), 1)),
        Case("one token, T = 1", (_labelled(2, 1, 6), 3)),
    ]
    return run_checks("check_split_heads", fn, reference_split_heads, cases)


def check_expand_kv_heads(fn: Callable[[torch.Tensor, int], Any]) -> bool:
    """Check ``fn(kv, num_heads)`` that shares key/value heads among ``num_heads`` query heads.

    ``kv`` has shape ``(B, num_kv_heads, T, d_k)``; the result has shape
    ``(B, num_heads, T, d_k)``.

    The first case labels each key/value head by its number, so a failure
    shows the order of the heads that came back. ``kv.repeat(1, g, 1, 1)``
    (the whole stack of heads, ``g`` times) fails it: query head 1 must read
    key/value head 0, as in ``repeat_interleave``.
    """
    generator = torch.Generator().manual_seed(90)
    head_numbers = torch.arange(2, dtype=torch.float64).view(1, 2, 1, 1)
    cases = [
        Case("kv heads 0, 1; 4 query heads", (head_numbers.expand(1, 2, 2, 3).clone(), 4)),
        Case(
            "B = 2, 3 kv heads, 6 query heads",
            (torch.randn(2, 3, 4, 5, generator=generator, dtype=torch.float64), 6),
        ),
        Case(
            "multi-query: 1 kv head, 4 heads",
            (torch.randn(2, 1, 3, 4, generator=generator, dtype=torch.float64), 4),
        ),
        Case(
            "3 kv heads, 3 query heads",
            (torch.randn(1, 3, 2, 4, generator=generator, dtype=torch.float64), 3),
        ),
        Case("2 kv heads, 8 heads, float32", (torch.randn(1, 2, 5, 3, generator=generator), 8)),
    ]
    return run_checks("check_expand_kv_heads", fn, reference_expand_kv_heads, cases)
