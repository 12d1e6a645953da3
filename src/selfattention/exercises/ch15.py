"""Chapter 15 exercise: the prefix-matching (induction) score of attention heads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..toys.induction import prefix_matching_score
from ._runner import Case, run_checks


def reference_prefix_matching_score(weights: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The package's score over all queries with a match: ``(B, h, T, T), (B, T) -> (h,)``."""
    return prefix_matching_score(weights, ids)


def _one_hot_heads(length: int, targets: list[list[int]]) -> torch.Tensor:
    """``(1, h, T, T)`` weights: head ``r`` sends query ``i`` entirely to key ``targets[r][i]``."""
    weights = torch.zeros(1, len(targets), length, length, dtype=torch.float64)
    for r, keys in enumerate(targets):
        for i, j in enumerate(keys):
            weights[0, r, i, j] = 1.0
    return weights


def _causal_softmax(scores: torch.Tensor) -> torch.Tensor:
    length = scores.shape[-1]
    keep = torch.ones(length, length, dtype=torch.bool).tril()  # (T, T)
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)


def _prefix_matching_cases() -> list[Case]:
    # BOS a b c a b c, with a, b, c = 0, 1, 2 and BOS = 9.
    abcabc = torch.tensor([[9, 0, 1, 2, 0, 1, 2]])  # (1, 7)
    right = [0, 1, 2, 3, 2, 3, 4]  # queries 4..6 -> keys 2..4: the token after
    early = [0, 1, 2, 3, 1, 2, 3]  # queries 4..6 -> keys 1..3: the match itself
    # BOS a b a c a: the last a occurred twice before (positions 1 and 3), so
    # both keys 2 (b) and 4 (c) count; head 0 splits its weight between them.
    twice = torch.tensor([[9, 0, 1, 0, 2, 0]])  # (1, 6)
    split = torch.zeros(1, 2, 6, 6, dtype=torch.float64)
    split[0, :, torch.arange(6), torch.arange(6)] = 1.0  # everyone looks at itself
    split[0, 0, 5] = torch.tensor([0.0, 0.0, 0.3, 0.0, 0.5, 0.2])
    split[0, 0, 3] = torch.tensor([0.0, 0.0, 0.6, 0.4, 0.0, 0.0])  # query 3 (a) -> key 2
    # BOS a a: query 2's earlier a is at 1, so the key after it is 2, itself.
    adjacent = torch.tensor([[9, 0, 0]])  # (1, 3)
    generator = torch.Generator().manual_seed(15)
    random_ids = torch.randint(0, 4, (3, 12), generator=generator)  # (B, T), many repeats
    random_ids[:, 0] = 4  # BOS
    scores = torch.randn(3, 2, 12, 12, generator=generator, dtype=torch.float64)
    return [
        Case(
            "a b c a b c; head 1 one step early",
            (_one_hot_heads(7, [right, early]), abcabc),
        ),
        Case(
            "a b a c a: two earlier a's",
            (split, twice),
        ),
        Case(
            "a a: the next key is the query",
            (_one_hot_heads(3, [[0, 0, 2], [0, 1, 1]]), adjacent),
        ),
        Case(
            "random weights (3, 2, 12, 12)",
            (_causal_softmax(scores), random_ids),
        ),
    ]


def check_prefix_matching_score(fn: Callable[[torch.Tensor, torch.Tensor], Any]) -> bool:
    """Check ``fn(weights, ids) -> scores`` against the package's ``prefix_matching_score``.

    ``weights`` is a float64 tensor ``(B, h, T, T)`` of one layer's attention
    weights and ``ids`` an int64 tensor ``(B, T)``; ``scores`` is ``(h,)``:
    for every query ``i`` whose token occurred earlier, at some position
    ``j - 1 < i``, the total weight on the keys ``j`` that followed those
    occurrences, averaged over all such queries of the batch. The cases
    include a head that is one step too early, a token that occurred twice,
    a key equal to the query itself, and a random batch.

    Examples
    --------
    >>> def score(weights, ids):
    ...     before = torch.full_like(ids, -1)
    ...     before[:, 1:] = ids[:, :-1]                      # token before key j
    ...     T = ids.shape[1]
    ...     keys = (before[:, None, :] == ids[:, :, None]) & torch.ones(
    ...         T, T, dtype=torch.bool).tril()              # (B, T, T)
    ...     chosen = keys.any(dim=-1)                        # (B, T)
    ...     per_query = (weights * keys[:, None]).sum(-1)    # (B, h, T)
    ...     return per_query.transpose(0, 1)[:, chosen].mean(dim=-1)
    >>> check_prefix_matching_score(score)
    ✓ check_prefix_matching_score: all 4 cases pass
    True
    """
    return run_checks(
        "check_prefix_matching_score",
        fn,
        reference_prefix_matching_score,
        _prefix_matching_cases(),
    )
