"""Chapter 11 exercise: masked mean pooling, the average over the real tokens only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..toys.models import masked_mean
from ._runner import Case, run_checks


def reference_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The package's masked mean: ``values (B, T, d)``, ``mask (B, T)`` -> ``(B, d)``."""
    return masked_mean(values, mask)


def _masked_mean_cases() -> list[Case]:
    generator = torch.Generator().manual_seed(11)
    random_values = torch.randn(4, 6, 3, generator=generator, dtype=torch.float64)
    lengths = torch.tensor([6, 1, 4, 2])
    random_mask = torch.arange(6)[None, :] < lengths[:, None]  # (4, 6)
    random_values[~random_mask] = 50.0  # padding vectors hold large garbage
    return [
        Case(
            "one line of 3 real tokens, no padding, d = 2",
            (
                torch.tensor([[[1.0, 2.0], [3.0, 4.0], [5.0, 9.0]]], dtype=torch.float64),
                torch.tensor([[True, True, True]]),
            ),
        ),
        Case(
            "two lines, the second padded from position 2; padding vectors hold 100",
            (
                torch.tensor(
                    [
                        [[1.0, 1.0], [3.0, 3.0], [5.0, 2.0]],
                        [[2.0, 4.0], [4.0, 0.0], [100.0, 100.0]],
                    ],
                    dtype=torch.float64,
                ),
                torch.tensor([[True, True, True], [True, True, False]]),
            ),
        ),
        Case(
            "a masked word in the middle (an ablation), not only at the end",
            (
                torch.tensor([[[1.0], [7.0], [3.0], [0.0]]], dtype=torch.float64),
                torch.tensor([[True, False, True, False]]),
            ),
        ),
        Case(
            "a real token whose vector is all zeros still counts",
            (
                torch.tensor([[[0.0, 0.0], [4.0, 2.0]]], dtype=torch.float64),
                torch.tensor([[True, True]]),
            ),
        ),
        Case(
            "a batch of 4 random lines of lengths 6, 1, 4, 2 (B, T, d) = (4, 6, 3)",
            (random_values, random_mask),
        ),
    ]


def check_masked_mean(fn: Callable[[torch.Tensor, torch.Tensor], Any]) -> bool:
    """Check ``fn(values, mask) -> pooled`` against the package's ``masked_mean``.

    ``values`` is a float64 tensor ``(B, T, d)``, ``mask`` a bool tensor
    ``(B, T)`` with True = real token; ``pooled`` is ``(B, d)``, the mean of
    each line's real token vectors. The cases put large numbers on the
    padding, mask a word in the middle of a line, and include a real token
    whose vector is zero.

    Examples
    --------
    >>> def pool(values, mask):
    ...     keep = mask.unsqueeze(-1).to(values.dtype)     # (B, T, 1)
    ...     return (values * keep).sum(1) / keep.sum(1)   # (B, d)
    >>> check_masked_mean(pool)
    ✓ check_masked_mean: all 5 cases pass
    True
    """
    return run_checks("check_masked_mean", fn, reference_masked_mean, _masked_mean_cases())
