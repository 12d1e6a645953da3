"""Chapter 13 exercise: rotary position embeddings in the interleaved layout, by the reader."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..layers.rotary import rotary_embedding
from ._runner import Case, _to_numpy, run_checks


def reference_rotary_embedding(
    x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0
) -> torch.Tensor:
    """The package's RoPE in the interleaved layout: pair ``l`` is features ``(2l, 2l+1)``.

    Examples
    --------
    >>> x = torch.tensor([[1.0, 0.0]], dtype=torch.float64)  # (T, d_k)
    >>> reference_rotary_embedding(x, torch.tensor([2])).round(decimals=3).tolist()
    [[-0.416, 0.909]]
    """
    return rotary_embedding(x, positions, base=base, layout="interleaved")


def _common_mistakes(x: torch.Tensor, positions: torch.Tensor) -> dict[str, torch.Tensor]:
    """Wrong rotations readers often write, each with a hint that names the mistake."""
    d_k = x.shape[-1]
    theta_wrong = 10000.0 ** (-torch.arange(d_k // 2, dtype=torch.float64) / d_k)  # (d_k/2,)
    angles = positions.to(torch.float64)[:, None] * theta_wrong  # (T, d_k/2)
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], d_k // 2, 2))  # (..., T, d_k/2)
    no_two = torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles))
    return {
        "you paired feature l with feature l + d_k/2 (the half layout); this exercise "
        "pairs adjacent features (2l, 2l+1), as view_as_complex does": rotary_embedding(
            x, positions, layout="half"
        ),
        "you turned the pairs clockwise: multiply by exp(+i pos theta_l), "
        "torch.polar(ones, +angles)": rotary_embedding(x, -positions, layout="interleaved"),
        "the frequency misses the factor 2: theta_l = base ** (-2l / d_k), "
        "i.e. torch.arange(0, d_k, 2) / d_k": no_two.flatten(-2),
    }


def _hint(fn: Callable[..., Any]) -> str | None:
    """If ``fn`` reproduces a known mistake on a probe case, say which one."""
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    positions = torch.arange(3, 8)  # (T,)
    try:
        got = np.asarray(_to_numpy(fn(x.clone(), positions.clone())), dtype=np.float64)
    except Exception:  # noqa: BLE001 - the failing case has already been reported
        return None
    for hint, wrong in _common_mistakes(x, positions).items():
        if got.shape == tuple(wrong.shape) and np.allclose(got, wrong.numpy(), atol=1e-6):
            return hint
    return None


def _cases() -> list[Case]:
    gen = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    return [
        Case("one pair (d_k = 2) at positions 0..4", (rand(5, 2), torch.arange(5))),
        Case("d_k = 8, positions 0..5", (rand(6, 8), torch.arange(6))),
        Case(
            "heads (B, h, T, d_k) = (2, 3, 7, 16) at positions 100..106",
            (rand(2, 3, 7, 16), torch.arange(100, 107)),
        ),
        Case("positions out of order, [5, 0, 3]", (rand(3, 4), torch.tensor([5, 0, 3]))),
        Case("base = 500", (rand(4, 8), torch.arange(4)), {"base": 500.0}),
        Case("d_k = 64 at positions 4090..4095", (rand(6, 64), torch.arange(4090, 4096))),
    ]


def check_rotary_embedding(fn: Callable[..., Any]) -> bool:
    """Check ``fn(x, positions, base=10000.0)`` against the package's interleaved RoPE.

    ``x`` is a float64 tensor ``(..., T, d_k)`` and ``positions`` an int64
    tensor ``(T,)``; ``fn`` returns the rotated ``x``, same shape. Pair ``l``
    is features ``(2l, 2l+1)`` and turns by ``positions * base ** (-2l /
    d_k)``, counter-clockwise. On failure the first failing case is printed,
    followed by a hint when the answer matches a common mistake (the half
    layout, turning clockwise, a frequency without the factor 2).
    """
    passed = run_checks(
        "check_rotary_embedding", fn, reference_rotary_embedding, _cases(), atol=1e-9, rtol=1e-9
    )
    if not passed:
        hint = _hint(fn)
        if hint:
            print(f"  hint: {hint}")
    return passed
