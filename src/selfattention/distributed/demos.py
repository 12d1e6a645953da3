"""Functions that ``spawn`` runs in each rank, for chapter 19 and the tests.

``spawn`` starts fresh processes that import the function they run by its
module and name, so these live here, in an importable module, rather than
in the notebook. Each takes ``(rank, world_size, ...)`` and returns
something that pickles.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from .layout import shard_sequence
from .ring import ring_attention
from .traffic import record
from .ulysses import ulysses_attention


def rank_and_size(rank: int, world_size: int) -> tuple[int, int]:
    """Return ``(rank, world_size)``: the smallest check that a group starts."""
    return rank, world_size


def raise_on(rank: int, world_size: int, bad_rank: int) -> int:
    """Rank ``bad_rank`` raises a ``ValueError``; the others wait for it in a barrier."""
    if rank == bad_rank:
        raise ValueError(f"rank {rank} was told to fail")
    dist.barrier()  # never passes: the failing rank never arrives
    return rank


def sleep_forever(rank: int, world_size: int) -> int:
    """Never return (until ``spawn``'s timeout ends the process)."""
    while True:
        time.sleep(0.05)


def parent_process(rank: int, world_size: int) -> int:
    """The process id of the rank's parent: the forkserver on Linux."""
    return os.getppid()


def make_qkv(
    seed: int, batch: int, heads: int, kv_heads: int, seq_len: int, d_k: int, d_v: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The whole sequence's queries, keys and values, float64, the same on every rank."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, seq_len, d_k, generator=generator, dtype=torch.float64)
    k = torch.randn(batch, kv_heads, seq_len, d_k, generator=generator, dtype=torch.float64)
    v = torch.randn(batch, kv_heads, seq_len, d_v, generator=generator, dtype=torch.float64)
    return q, k, v


def reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None = None
) -> torch.Tensor:
    """SDPA on the whole sequence, the reference every method must equal."""
    return F.scaled_dot_product_attention(
        q, k, v, is_causal=causal, scale=scale, enable_gqa=q.shape[1] != k.shape[1]
    )


def max_error(
    rank: int, world_size: int, method: str, layout: str, causal: bool, seed: int = 0
) -> float:
    """This rank's largest difference from SDPA: B = 1, h = 4, h_kv = 2, T = 16 P, d = 8."""
    q, k, v = make_qkv(seed, 1, 4, 2, 16 * world_size, 8, 8)
    expected = shard_sequence(reference(q, k, v, causal), world_size, rank, layout)
    parts = [shard_sequence(x, world_size, rank, layout) for x in (q, k, v)]
    if method == "ring":
        out = ring_attention(*parts, causal=causal, layout=layout)
    else:
        out = ulysses_attention(*parts, causal=causal)
    return (out - expected).abs().max().item()


def _subgroups(world_size: int) -> dict[int, list[tuple[list[int], Any]]]:
    """Every rank's groups of sizes 1, 2, 4, ... that divide the world (all ranks create all)."""
    groups: dict[int, list[tuple[list[int], Any]]] = {}
    size = 1
    while size <= world_size:
        if world_size % size == 0:
            for start in range(0, world_size, size):
                ranks = list(range(start, start + size))
                group = dist.group.WORLD if size == world_size else dist.new_group(ranks)
                groups.setdefault(size, []).append((ranks, group))
        size *= 2
    return groups


def attention_cases(rank: int, world_size: int, cases: list[dict[str, Any]]) -> list[dict]:
    """Run ``ring_attention`` or ``ulysses_attention`` on each case, in sub-groups.

    Each case is a dict with ``method`` ("ring" or "ulysses"), ``world``
    (the sub-group size, dividing ``world_size``), ``layout``, ``causal``,
    ``scale`` and ``shape`` = (B, h, h_kv, T, d_k, d_v), and ``seed``. Every
    rank builds the whole sequence from the seed, takes its part, and
    returns its output chunk and what it sent and computed, or, for a case
    the function refuses (``ValueError`` or ``TypeError``), the message.
    """
    groups = _subgroups(world_size)
    answers = []
    for case in cases:
        size = case["world"]
        ranks, group = next((r, g) for r, g in groups[size] if rank in r)
        sub_rank = ranks.index(rank)
        q, k, v = make_qkv(case["seed"], *case["shape"])
        layout = case.get("layout", "contiguous")
        parts = [shard_sequence(x, size, sub_rank, layout) for x in (q, k, v)]
        try:
            with record() as log:
                if case["method"] == "ring":
                    out = ring_attention(
                        *parts,
                        causal=case["causal"],
                        scale=case.get("scale"),
                        layout=layout,
                        group=group,
                    )
                else:
                    out = ulysses_attention(
                        *parts, causal=case["causal"], scale=case.get("scale"), group=group
                    )
        except (ValueError, TypeError) as error:  # a case that must be refused
            answers.append({"rank": sub_rank, "ranks": ranks, "error": str(error)})
            continue
        answers.append(
            {
                "rank": sub_rank,
                "ranks": ranks,
                "out": out,
                "bytes_sent": log.bytes_sent,
                "messages": log.messages,
                "tiles": log.tiles,
            }
        )
    return answers


def chapter_run(rank: int, world_size: int, shape: tuple[int, ...], seed: int) -> dict:
    """Chapter 19's one run: ring (both layouts) and Ulysses, causal and not.

    Returns this rank's output chunks, its logs (bytes, messages, tiles)
    and, as observations only, the wall-clock seconds of each call
    (the fastest of three); under ``"ulysses-limit"``, the error that
    ``ulysses_attention`` raises for 6 query heads over the ranks.
    """
    q, k, v = make_qkv(seed, *shape)
    runs: dict[str, Any] = {}
    for method, layout in (("ring", "contiguous"), ("ring", "zigzag"), ("ulysses", "contiguous")):
        parts = [shard_sequence(x, world_size, rank, layout) for x in (q, k, v)]
        for causal in (False, True):
            times = []
            for _ in range(3):
                dist.barrier()
                start = time.perf_counter()
                with record() as log:
                    if method == "ring":
                        out = ring_attention(*parts, causal=causal, layout=layout)
                    else:
                        out = ulysses_attention(*parts, causal=causal)
                times.append(time.perf_counter() - start)
            runs[f"{method}-{layout}-{'causal' if causal else 'full'}"] = {
                "out": out,
                "bytes_sent": log.bytes_sent,
                "messages": log.messages,
                "tiles": log.tiles,
                "scores": log.scores,
                "seconds": min(times),
            }
    # Ulysses' limit: 6 query heads and 2 key/value heads do not split over 4 ranks.
    t_r = shape[3] // world_size
    try:
        ulysses_attention(q[:, :6, :t_r], k[:, :2, :t_r], v[:, :2, :t_r])
        runs["ulysses-limit"] = "no error"
    except Exception as error:  # noqa: BLE001 - the chapter prints whatever is raised
        runs["ulysses-limit"] = f"{type(error).__name__}: {error}"
    return runs
