"""Chapter 10 exercise: a tokenizer's 1/0 attention_mask as an additive mask."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..masks import from_attention_mask, to_additive
from ._runner import Case, run_checks


def reference_additive_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """The additive float32 mask ``(B, 1, 1, T_k)``: 0 on tokens, -inf on padding.

    Examples
    --------
    >>> reference_additive_mask(torch.tensor([[1, 1, 0]])).tolist()
    [[[[0.0, 0.0, -inf]]]]
    """
    return to_additive(from_attention_mask(attention_mask), torch.float32)


def _cases() -> list[Case]:
    def mask(rows: list[list[int]]) -> torch.Tensor:
        return torch.tensor(rows, dtype=torch.int64)  # (B, T_k), as tokenizers return it

    return [
        Case(
            "lengths 6 and 3, right padding",
            (mask([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]]),),
        ),
        Case("one sentence with no padding, shape (1, 4)", (mask([[1, 1, 1, 1]]),)),
        Case(
            "left padding, as some decoders use: 0s first, shape (2, 5)",
            (mask([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]]),),
        ),
        Case(
            "3 sentences of 5 tokens, shape (3, 5)",
            (mask([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0]]),),
        ),
    ]


def check_additive_mask(fn: Callable[[torch.Tensor], Any]) -> bool:
    """Check ``fn(attention_mask)`` against the package's converters.

    ``attention_mask`` is an int64 tensor ``(B, T_k)`` with 1 for a real
    token and 0 for padding, as a tokenizer returns it. ``fn`` must return
    the float mask to add to the scores ``(B, h, T_q, T_k)``: shape ``(B, 1,
    1, T_k)``, 0 where ``attention_mask`` is 1 and ``-inf`` where it is 0.
    The cases catch an inverted mask, a missing or misplaced broadcast axis
    and ``0 * -inf = NaN``. Prints one line (or the first failing case with
    expected and got values) and returns True or False.

    Examples
    --------
    >>> def convert(attention_mask):
    ...     blocked = (attention_mask == 0)[:, None, None, :]
    ...     return torch.zeros(blocked.shape).masked_fill(blocked, float("-inf"))
    >>> check_additive_mask(convert)
    ✓ check_additive_mask: all 4 cases pass
    True
    """
    return run_checks("check_additive_mask", fn, reference_additive_mask, _cases())
