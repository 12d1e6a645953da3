"""Chapter 17 exercise: a few lines of Triton, the dV accumulation of one key block.

``check_dv_update`` takes the reader's ``@triton.jit`` function
``dv_update(dv, k, q, do, lse, scale)``, calls it inside a small kernel of
its own (one program, one block of keys against one block of queries) and
compares what it returns with ``dv + P^T dO`` computed in torch, where
``P^T = exp(scale * K Q^T - L)`` are the weights rebuilt from the row
log-sum-exp ``L``. It runs wherever ``selfattention.kernels`` runs: under
Triton's interpreter without a GPU, compiled on one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ._runner import Case, run_checks

_HARNESS = None


def _harness():
    """The kernel that calls the reader's function (built once, after the interpreter choice)."""
    global _HARNESS
    if _HARNESS is None:
        from .. import kernels  # noqa: F401, I001  (chooses the interpreter before triton)
        import triton
        import triton.language as tl

        @triton.jit
        def harness(
            DV, K, Q, DO, L, Out, scale,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, FN: tl.constexpr,
        ):  # fmt: skip
            i = tl.arange(0, BLOCK_M)  # (b_q,)
            j = tl.arange(0, BLOCK_N)  # (b_k,)
            c = tl.arange(0, D)  # (d,)
            dv = tl.load(DV + j[:, None] * D + c[None, :])  # (b_k, d_v)
            k = tl.load(K + j[:, None] * D + c[None, :])  # (b_k, d_k)
            q = tl.load(Q + i[:, None] * D + c[None, :])  # (b_q, d_k)
            do = tl.load(DO + i[:, None] * D + c[None, :])  # (b_q, d_v)
            lse = tl.load(L + i)  # (b_q,)
            dv = FN(dv, k, q, do, lse, scale)
            tl.store(Out + j[:, None] * D + c[None, :], dv)

        _HARNESS = harness
    return _HARNESS


def reference_dv_update(
    dv: torch.Tensor,
    k: torch.Tensor,
    q: torch.Tensor,
    do: torch.Tensor,
    lse: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """``dv + P^T dO`` with ``P^T = exp(scale * k q^T - L)``, in float64, as float32.

    ``dv`` and ``k`` are ``(b_k, d)``, ``q`` and ``do`` ``(b_q, d)``, ``lse``
    ``(b_q,)``: one block of keys against one block of queries.
    """
    p_t = torch.exp(scale * k.double() @ q.double().T - lse.double()[None, :])  # (b_k, b_q)
    return (dv.double() + p_t @ do.double()).float()


def _cases() -> list[tuple[str, int, int, int, float, int, bool]]:
    # name, b_q, b_k, d, scale, others (keys besides the block that L counts),
    # whether dv starts non-zero
    return [
        (
            "b_q = b_k = 16, d = 16, scale 0.25 (these are all the keys)",
            16, 16, 16, 0.25, 0, False,
        ),
        (
            "the block is one of three: L counts 32 more keys, so a softmax over "
            "the block alone is wrong",
            16, 16, 16, 0.25, 32, False,
        ),
        ("b_q = 32 queries, b_k = 16 keys (P^T is b_k x b_q)", 32, 16, 16, 0.25, 16, False),
        ("b_q = 16, b_k = 32, d = 32, scale 0.1", 16, 32, 32, 0.1, 32, False),
        ("a non-zero dv to add to", 16, 16, 16, 0.5, 16, True),
    ]  # fmt: skip


def _inputs(
    b_q: int, b_k: int, d: int, scale: float, others: int, accumulate: bool, seed: int
) -> tuple[torch.Tensor, ...]:
    from ..kernels import DEVICE

    generator = torch.Generator().manual_seed(seed)
    k = torch.randn(b_k, d, generator=generator)
    q = torch.randn(b_q, d, generator=generator)
    do = torch.randn(b_q, d, generator=generator)
    dv = torch.randn(b_k, d, generator=generator) if accumulate else torch.zeros(b_k, d)
    # L of each query row over all its keys: this block and `others` more from
    # other blocks, so that the block's weights of a row sum to less than 1
    # (to exactly 1 only where others = 0).
    elsewhere = torch.randn(others, d, generator=generator)
    lse = torch.logsumexp(scale * q @ torch.cat([k, elsewhere]).T, dim=-1)  # (b_q,)
    return tuple(t.contiguous().to(DEVICE) for t in (dv, k, q, do, lse))


def check_dv_update(fn: Callable[..., Any]) -> bool:
    """Check the reader's ``@triton.jit`` function ``fn(dv, k, q, do, lse, scale)``.

    It gets one block of keys ``k (b_k, d)``, one block of queries
    ``q (b_q, d)``, their output gradients ``do (b_q, d)``, the queries' row
    log-sum-exp ``lse (b_q,)`` and the scale, and must return
    ``dv + P^T dO`` ``(b_k, d)``, where ``P^T = exp(scale * k q^T - lse)``
    (``tl.exp`` or ``tl.math.exp2`` with ``log2(e)``; ``tl.trans`` and
    ``tl.dot``). The cases cover equal and unequal blocks (a transposition
    mistake changes the shape), two scales, a ``dv`` that is not zero, and
    an ``lse`` over more keys than the block's, as in the kernel, where a
    query sees many key blocks (a softmax over the block alone fails there).

    Examples
    --------
    >>> import selfattention.kernels  # first: without a GPU, selects the interpreter
    >>> import triton
    >>> import triton.language as tl
    >>> from selfattention.exercises import check_dv_update
    >>> @triton.jit
    ... def dv_update(dv, k, q, do, lse, scale):
    ...     p_t = tl.exp(tl.dot(k, tl.trans(q), input_precision="ieee") * scale
    ...                  - lse[None, :])
    ...     return dv + tl.dot(p_t, do, input_precision="ieee")
    >>> check_dv_update(dv_update)  # doctest: +ELLIPSIS
    ✓ check_dv_update: all 5 cases pass
    True
    """
    harness = _harness()

    settings = {name: (*rest, seed) for seed, (name, *rest) in enumerate(_cases())}

    def launched(name: str) -> torch.Tensor:
        b_q, b_k, d, scale, *_ = settings[name]
        dv, k, q, do, lse = _inputs(*settings[name])
        out = torch.empty_like(dv)
        harness[(1,)](dv, k, q, do, lse, out, scale, BLOCK_M=b_q, BLOCK_N=b_k, D=d, FN=fn)
        return out.cpu()

    def expected(name: str) -> torch.Tensor:
        scale = settings[name][3]
        return reference_dv_update(*_inputs(*settings[name]), scale).cpu()

    cases = [Case(name, (name,)) for name in settings]
    return run_checks("check_dv_update", launched, expected, cases, atol=1e-4, rtol=1e-4)
