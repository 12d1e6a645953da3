"""Chapter 16 exercises: the index arithmetic of the FlashAttention kernel.

Both checkers take plain Python integers and compare the reader's function
with the arithmetic of ``selfattention.kernels.flash``: which key/value
head a program reads (grouped-query attention by index arithmetic instead of
repeating K and V), and how many key blocks a causal program loads before
its early exit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._runner import Case, run_checks


def reference_kv_head_offset(
    program: int, num_heads: int, num_kv_heads: int, t_k: int, d_k: int
) -> int:
    """Where program ``program`` of the kernel's head axis finds its keys.

    The kernel's second grid axis has ``B h`` programs, one per (batch,
    query head) pair: ``program = b h + r``. Query head ``r`` reads key/value
    head ``g = r // (h / h_kv)``, the layout of
    ``F.scaled_dot_product_attention(..., enable_gqa=True)`` (each key/value
    head serves ``h / h_kv`` consecutive query heads). Returns the element
    offset of that head's first key in a contiguous ``(B, h_kv, T_k, d_k)``
    tensor: ``(b h_kv + g) T_k d_k``.
    """
    b, r = divmod(program, num_heads)
    g = r // (num_heads // num_kv_heads)
    return (b * num_kv_heads + g) * t_k * d_k


def check_kv_head_offset(fn: Callable[[int, int, int, int, int], Any]) -> bool:
    """Check ``fn(program, num_heads, num_kv_heads, t_k, d_k) -> int``.

    ``program`` counts the (batch, query head) pairs, ``b h + r``; the result
    is the element offset of the first key of the key/value head that query
    head ``r`` of batch ``b`` reads, in a contiguous ``(B, h_kv, T_k, d_k)``
    key tensor. The cases cover multi-head attention (``h_kv = h``),
    multi-query attention (``h_kv = 1``), grouped-query attention with 2 and
    4 query heads per group, and programs of the second and third batch
    entries (the batch offset is easy to forget).
    """
    cases = [
        Case("multi-head: h = h_kv = 4, program 3 is head 3", (3, 4, 4, 10, 8)),
        Case("multi-query: h = 8, h_kv = 1, program 5 reads head 0", (5, 8, 1, 10, 8)),
        Case("grouped: h = 8, h_kv = 4, program 3 (heads 2, 3 share g = 1)", (3, 8, 4, 12, 16)),
        Case("grouped: h = 8, h_kv = 2, program 5 (heads 4-7 share g = 1)", (5, 8, 2, 12, 16)),
        Case("grouped: h = 8, h_kv = 2, program 6 (g = 1, not r % h_kv = 0)", (6, 8, 2, 7, 4)),
        Case("grouped: h = 4, h_kv = 2, program 1 (g = 0, not r % h_kv = 1)", (1, 4, 2, 7, 4)),
        Case("batch entry 1: h = 4, h_kv = 2, program 6 is b = 1, r = 2", (6, 4, 2, 5, 3)),
        Case("batch entry 2: h = 6, h_kv = 3, program 17 is b = 2, r = 5", (17, 6, 3, 9, 4)),
    ]
    return run_checks("check_kv_head_offset", fn, reference_kv_head_offset, cases, atol=0, rtol=0)


def reference_causal_key_blocks(program: int, block_m: int, block_n: int, t_k: int) -> int:
    """How many key blocks a causal program loads before its early exit.

    Program ``program`` of the kernel's query axis owns queries
    ``q0 = program * block_m`` to ``q0 + block_m - 1``. With the causal mask
    aligned top-left, its last query sees keys ``0 .. q0 + block_m - 1``, and
    there are only ``t_k`` keys, so it walks keys ``0`` to
    ``min(q0 + block_m, t_k) - 1`` in blocks of ``block_n``:
    ``ceil(min(q0 + block_m, t_k) / block_n)`` blocks.
    """
    end = min((program + 1) * block_m, t_k)
    return -(-end // block_n)


def check_causal_key_blocks(fn: Callable[[int, int, int, int], Any]) -> bool:
    """Check ``fn(program, block_m, block_n, t_k) -> int``, the causal early exit.

    The result is the number of key blocks of ``block_n`` keys that program
    ``program`` (queries ``program * block_m`` to ``program * block_m +
    block_m - 1``) loads under a top-left causal mask with ``t_k`` keys. The
    cases cover equal blocks, ``block_m`` larger and smaller than
    ``block_n``, a ``t_k`` that is not a multiple of ``block_n``, programs
    whose queries reach past the last key (``T_q > T_k``), and fewer keys
    than one block.
    """
    cases = [
        Case("the first program, block_m = block_n = 16", (0, 16, 16, 64)),
        Case("program 2, block_m = block_n = 16: three blocks", (2, 16, 16, 64)),
        Case("block_m = 64, block_n = 16: program 1 needs 8 blocks", (1, 64, 16, 256)),
        Case("block_m = 16, block_n = 64: program 5 needs 2 blocks", (5, 16, 64, 256)),
        Case("t_k = 100, not a multiple of block_n = 32: program 3", (3, 32, 32, 100)),
        Case("T_q > T_k: program 6 of block 16 with t_k = 40 sees all keys", (6, 16, 16, 40)),
        Case("fewer keys than one block: t_k = 5", (2, 16, 16, 5)),
    ]
    return run_checks(
        "check_causal_key_blocks", fn, reference_causal_key_blocks, cases, atol=0, rtol=0
    )
