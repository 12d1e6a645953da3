"""Chapter 19 exercises: the causal work per rank, the bytes per rank, one ring step.

The references are the arithmetic of ``selfattention.distributed``: the
tiles ``ring_attention`` computes (``ring_tiles``), the bytes it sends
(``ring_bytes_per_rank``) and the online-softmax step it takes for each
block that arrives, with the causal mask set by the tokens' positions in the
whole sequence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..distributed.layout import num_chunks, ring_tiles
from ..distributed.traffic import ring_bytes_per_rank
from ._runner import Case, run_checks


def reference_causal_scores(world_size: int, rank: int, layout: str, seq_len: int) -> int:
    """How many scores causal ring attention computes on ``rank``, per batch entry and head.

    Each tile is a (query chunk, key chunk) pair of ``T / P`` (contiguous) or
    ``T / (2 P)`` (zigzag) tokens; diagonal tiles are computed whole, with a
    mask. So the count is the number of tiles times the chunk length squared.

    Examples
    --------
    >>> [reference_causal_scores(4, r, "contiguous", 64) for r in range(4)]
    [256, 512, 768, 1024]
    >>> [reference_causal_scores(4, r, "zigzag", 64) for r in range(4)]
    [576, 576, 576, 576]
    """
    chunk = seq_len // num_chunks(world_size, layout)
    return len(ring_tiles(world_size, rank, layout, causal=True)) * chunk * chunk


def check_causal_scores(fn: Callable[[int, int, str, int], Any]) -> bool:
    """Check ``fn(world_size, rank, layout, seq_len) -> int``, the causal work of one rank.

    The result is the number of query-key scores that causal ring attention
    computes on rank ``rank`` of ``world_size`` for one batch entry and one
    head, under ``layout`` ("contiguous" or "zigzag"), when the whole
    sequence has ``seq_len`` tokens. A tile of keys wholly after its queries
    is skipped; a diagonal tile is computed whole (its hidden half counts).
    """
    cases = [
        Case("one rank, contiguous: the whole diagonal tile", (1, 0, "contiguous", 16)),
        Case("one rank, zigzag: chunks 0 and 1, three tiles", (1, 0, "zigzag", 16)),
        Case("P = 4, contiguous, rank 0: only its own chunk", (4, 0, "contiguous", 64)),
        Case("P = 4, contiguous, rank 3: every chunk", (4, 3, "contiguous", 64)),
        Case("P = 4, zigzag, rank 0: chunks 0 and 7", (4, 0, "zigzag", 64)),
        Case("P = 4, zigzag, rank 2: chunks 2 and 5", (4, 2, "zigzag", 64)),
        Case("P = 8, zigzag, rank 5", (8, 5, "zigzag", 160)),
        Case("P = 8, contiguous, rank 5", (8, 5, "contiguous", 160)),
    ]
    return run_checks("check_causal_scores", fn, reference_causal_scores, cases, atol=0, rtol=0)


def check_ring_bytes(fn: Callable[[int, int, int, int, int, int, int], Any]) -> bool:
    """Check ``fn(world_size, batch, num_kv_heads, seq_len, d_k, d_v, element_size) -> int``.

    The result is the number of bytes one rank sends in one ring attention
    over a sequence of ``seq_len`` tokens split over ``world_size`` ranks
    (the reference is ``selfattention.distributed.ring_bytes_per_rank``).
    The cases cover one rank (nothing to send), grouped-query attention
    (only the key/value heads travel), values wider than keys, and float16.
    """
    cases = [
        Case("one rank: nothing to send", (1, 1, 4, 256, 32, 32, 8)),
        Case(
            "the issue's prototype: P = 4, h_kv = 4, T = 256, float64", (4, 1, 4, 256, 32, 32, 8)
        ),
        Case("grouped-query: 2 key/value heads, P = 2", (2, 3, 2, 64, 16, 16, 4)),
        Case("values wider than keys: d_k = 8, d_v = 24", (4, 1, 1, 32, 8, 24, 4)),
        Case("float16, P = 8, batch 2", (8, 2, 8, 4096, 128, 128, 2)),
    ]
    return run_checks("check_ring_bytes", fn, ring_bytes_per_rank, cases, atol=0, rtol=0)


def reference_ring_step(
    m: np.ndarray,
    z: np.ndarray,
    o: np.ndarray,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    q_pos: np.ndarray,
    k_pos: np.ndarray,
    scale: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fold one arriving key/value block into a rank's running state, causally.

    ``m (n_q,)``, ``z (n_q,)``, ``o (n_q, d_v)`` are the running maximum,
    sum and unnormalised output of the rank's queries ``q (n_q, d_k)``;
    ``k (n_k, d_k)`` and ``v (n_k, d_v)`` the block; ``q_pos (n_q,)`` and
    ``k_pos (n_k,)`` the tokens' positions in the whole sequence: query ``i``
    sees key ``j`` when ``k_pos[j] <= q_pos[i]``. A query that sees none of
    the block's keys keeps its state, even the empty one (``m = -inf``).

    Examples
    --------
    >>> m, z, o = np.full(1, -np.inf), np.zeros(1), np.zeros((1, 1))
    >>> q, k, v = np.ones((1, 1)), np.ones((2, 1)), np.array([[1.0], [3.0]])
    >>> m, z, o = reference_ring_step(m, z, o, q, k, v, np.array([5]), np.array([2, 9]), 1.0)
    >>> m, z, o / z[:, None]  # key 9 is in the future: only value 1 is seen
    (array([1.]), array([1.]), array([[1.]]))
    """
    scores = (q @ k.T) * scale  # (n_q, n_k)
    visible = k_pos[None, :] <= q_pos[:, None]  # (n_q, n_k)
    scores = np.where(visible, scores, -np.inf)
    m_new = np.maximum(m, scores.max(axis=-1))  # (n_q,) -inf while nothing was seen
    shift = np.where(np.isfinite(m_new), m_new, 0.0)  # never -inf - -inf
    alpha = np.exp(m - shift)  # (n_q,) 0 for the empty state
    p = np.exp(scores - shift[:, None])  # (n_q, n_k) 0 where hidden
    return m_new, z * alpha + p.sum(axis=-1), o * alpha[:, None] + p @ v


def check_ring_step(fn: Callable[..., Any]) -> bool:
    """Check ``fn(m, z, o, q, k, v, q_pos, k_pos, scale) -> (m, z, o)``, one causal ring step.

    Shapes: ``m (n_q,)``, ``z (n_q,)``, ``o (n_q, d_v)``, ``q (n_q, d_k)``,
    ``k (n_k, d_k)``, ``v (n_k, d_v)``, ``q_pos (n_q,)``, ``k_pos (n_k,)``.
    The cases: a block wholly in the past, the diagonal block, a zigzag
    block that half of the queries see entirely and the other half not at
    all (from the empty state and from a state that must stay as it is),
    and a block whose scores raise the running maximum.
    """
    rng = np.random.default_rng(19)
    n_q, d_k, d_v = 4, 3, 2
    q = rng.normal(size=(n_q, d_k))
    empty = (np.full(n_q, -np.inf), np.zeros(n_q), np.zeros((n_q, d_v)))
    zig_q = np.array([0, 1, 6, 7])  # zigzag rank 0 of P = 2: chunks 0 and 3

    def block(n_k: int, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        return rng.normal(size=(n_k, d_k)) + shift, rng.normal(size=(n_k, d_v))

    k0, v0 = block(4)
    own = (*empty, q, k0, v0, zig_q, zig_q, 0.5)
    state = reference_ring_step(*own)
    k1, v1 = block(4)
    k2, v2 = block(4, 2.0)
    past_q = np.arange(8, 12)
    cases = [
        Case(
            "a block wholly in the past, from the empty state",
            (*empty, q, k1, v1, past_q, np.arange(4), 0.5),
        ),
        Case(
            "the diagonal block: query i sees keys j <= i",
            (*empty, q, k0, v0, np.arange(4), np.arange(4), 0.5),
        ),
        Case("zigzag: the rank's own two chunks, from the empty state", own),
        Case(
            "zigzag: keys 2-5 arrive; queries 0, 1 see none and keep m = -inf",
            (*empty, q, k1, v1, zig_q, np.arange(2, 6), 0.5),
        ),
        Case(
            "zigzag: keys 2-5 after the own block; queries 0, 1 keep their state",
            (*state, q, k1, v1, zig_q, np.arange(2, 6), 0.5),
        ),
        Case(
            "larger scores: the running maximum rises, old sum and output rescale",
            (*state, q, k2, v2, zig_q, np.arange(2, 6), 2.0),
        ),
    ]
    return run_checks("check_ring_step", fn, reference_ring_step, cases)
