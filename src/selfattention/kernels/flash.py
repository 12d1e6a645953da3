"""FlashAttention in Triton: the forward kernel (chapter 16) and the backward (chapter 17).

Import it as ``from selfattention.kernels import flash_attention``: the
package ``selfattention.kernels`` chooses Triton's interpreter on a machine
without a CUDA GPU before ``triton`` is imported.

The kernel is chapter 12's ``chunked_attention`` moved into one program per
tile of queries: a grid of ``ceil(T_q / b_q) x (B h)`` programs, each of
which loads its ``b_q`` queries once, walks over the keys and values
``b_k`` at a time with the online softmax (running maximum ``m``, running
sum ``z``, running unnormalised output ``o``), and writes its ``b_q`` rows
of the output once. The ``T_q x T_k`` scores exist only one ``b_q x b_k``
tile at a time, in the program's registers and on-chip memory.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import triton
import triton.language as tl

from .._checks import (
    all_finite,
    check_finite,
    check_flag,
    check_float_tensor,
    check_positive_int,
    check_real,
    check_same_dtype_device,
)

# exp(x) = 2^(x log2(e)); exp2 is the GPU's native instruction.
_LOG2E = 1.4426950408889634


@triton.jit
def _attend_key_block(
    q,
    m,
    z,
    o,
    k_head,
    v_head,
    start_n,
    offs_m,
    offs_n,
    offs_d,
    offs_dv,
    T_k,
    stride_kt,
    stride_kd,
    stride_vt,
    stride_vd,
    scale_log2,
    stats,
    D: tl.constexpr,
    DV: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    CAUSAL_MASK: tl.constexpr,
    BOUND_MASK: tl.constexpr,
    PRECISION: tl.constexpr,
    STATS: tl.constexpr,
):
    """Fold one block of b_k keys into the running (m, z, o) of b_q queries."""
    if STATS:  # debugging counters (tests): blocks loaded, blocks masked
        tl.atomic_add(stats, 1)
        if BOUND_MASK or CAUSAL_MASK:
            tl.atomic_add(stats + 1, 1)
    keys = start_n + offs_n  # (b_k,) key indices j
    k_ptrs = k_head + offs_d[:, None] * stride_kd + keys[None, :] * stride_kt
    v_ptrs = v_head + keys[:, None] * stride_vt + offs_dv[None, :] * stride_vd
    # The K^T tile (d_k, b_k) and the V tile (b_k, d_v), from HBM to the chip;
    # masked only where the block passes T_k or d is padded to a power of two.
    if BOUND_MASK or D != BLOCK_D:
        k_t = tl.load(k_ptrs, mask=(offs_d[:, None] < D) & (keys[None, :] < T_k), other=0.0)
    else:
        k_t = tl.load(k_ptrs)
    if BOUND_MASK or DV != BLOCK_DV:
        v = tl.load(v_ptrs, mask=(keys[:, None] < T_k) & (offs_dv[None, :] < DV), other=0.0)
    else:
        v = tl.load(v_ptrs)
    # Scores in the base-2 domain: s = (q k^T) * scale * log2(e), (b_q, b_k).
    s = tl.dot(q, k_t, input_precision=PRECISION) * scale_log2
    if BOUND_MASK:
        s = tl.where(keys[None, :] < T_k, s, float("-inf"))
    if CAUSAL_MASK:
        s = tl.where(keys[None, :] <= offs_m[:, None], s, float("-inf"))
    m_new = tl.maximum(m, tl.max(s, 1))  # (b_q,)
    alpha = tl.math.exp2(m - m_new)  # (b_q,) rescales the old sum and output
    p = tl.math.exp2(s - m_new[:, None])  # (b_q, b_k) unnormalised weights
    z = z * alpha + tl.sum(p, 1)
    o = o * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    return m_new, z, o


@triton.jit
def _flash_forward_kernel(
    Q,
    K,
    V,
    Out,
    Lse,
    Stats,
    stride_qb,
    stride_qh,
    stride_qt,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_kt,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vt,
    stride_vd,
    stride_ob,
    stride_oh,
    stride_ot,
    stride_od,
    H,
    GROUP,
    T_q,
    T_k,
    scale_log2,
    D: tl.constexpr,
    DV: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr,
    STATS: tl.constexpr,
):
    """One program: b_q queries of one head against every key it may see.

    Writes the program's rows of the output and of the row log-sum-exp
    ``L_i = log sum_j exp(s_ij)`` (natural log), which the backward pass
    uses to rebuild the weights.
    """
    pid_m = tl.program_id(0)  # which block of queries
    pid_bh = tl.program_id(1)  # which (batch, query head) pair
    b = pid_bh // H
    r = pid_bh % H  # query head r
    g = r // GROUP  # its key/value head g (grouped-query attention)
    q0 = pid_m * BLOCK_M
    offs_m = q0 + tl.arange(0, BLOCK_M)  # (b_q,) query indices i
    offs_n = tl.arange(0, BLOCK_N)  # (b_k,)
    offs_d = tl.arange(0, BLOCK_D)  # (d_k,) padded to a power of two
    offs_dv = tl.arange(0, BLOCK_DV)  # (d_v,) padded to a power of two

    q_head = Q + b * stride_qb + r * stride_qh
    k_head = K + b * stride_kb + g * stride_kh
    v_head = V + b * stride_vb + g * stride_vh
    q_mask = (offs_m[:, None] < T_q) & (offs_d[None, :] < D)
    q = tl.load(
        q_head + offs_m[:, None] * stride_qt + offs_d[None, :] * stride_qd, mask=q_mask, other=0.0
    )  # (b_q, d_k), loaded once

    m = tl.full((BLOCK_M,), float("-inf"), tl.float32)  # running max
    z = tl.zeros((BLOCK_M,), tl.float32)  # running sum
    o = tl.zeros((BLOCK_M, BLOCK_DV), tl.float32)  # running output
    stats = Stats + 2 * (pid_bh * tl.num_programs(0) + pid_m)  # used if STATS

    if CAUSAL:
        # Query i sees keys j <= i. Key blocks that end at or before the
        # block's first query q0 are wholly visible: no mask. The blocks
        # after them, up to the last query, need the mask; the rest are
        # wholly in the future and are never loaded (the early exit).
        end_full = (tl.minimum(q0 + 1, T_k) // BLOCK_N) * BLOCK_N
        end = tl.minimum(q0 + BLOCK_M, T_k)
    else:
        end_full = (T_k // BLOCK_N) * BLOCK_N
        end = T_k
    for start_n in range(0, end_full, BLOCK_N):
        m, z, o = _attend_key_block(
            q, m, z, o, k_head, v_head, start_n, offs_m, offs_n, offs_d, offs_dv, T_k,
            stride_kt, stride_kd, stride_vt, stride_vd, scale_log2, stats,
            D, DV, BLOCK_D, BLOCK_DV, False, False, PRECISION, STATS,
        )  # fmt: skip
    for start_n in range(end_full, end, BLOCK_N):
        m, z, o = _attend_key_block(
            q, m, z, o, k_head, v_head, start_n, offs_m, offs_n, offs_d, offs_dv, T_k,
            stride_kt, stride_kd, stride_vt, stride_vd, scale_log2, stats,
            D, DV, BLOCK_D, BLOCK_DV, CAUSAL, True, PRECISION, STATS,
        )  # fmt: skip

    # Key 0 is visible to every query, so z > 0 for every row.
    o = o / z[:, None]
    out_ptrs = Out + b * stride_ob + r * stride_oh
    out_ptrs = out_ptrs + offs_m[:, None] * stride_ot + offs_dv[None, :] * stride_od
    tl.store(
        out_ptrs,
        o.to(Out.dtype.element_ty),
        mask=(offs_m[:, None] < T_q) & (offs_dv[None, :] < DV),
    )
    # L_i = ln(z) + m / log2(e): m is in the base-2 domain of the scores.
    lse = (m + tl.math.log2(z)) * 0.6931471805599453  # times ln(2)
    tl.store(Lse + pid_bh * T_q + offs_m, lse, mask=offs_m < T_q)


# --- the backward pass: a key-major and a query-major loop, no atomics -------------


@triton.jit
def _flash_backward_preprocess(
    Out,
    DOut,
    Delta,
    stride_ob,
    stride_oh,
    stride_ot,
    stride_od,
    stride_dob,
    stride_doh,
    stride_dot,
    stride_dod,
    H,
    T_q,
    DV: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    """D_i = sum_l dO_il O_il for b_q rows of one head, in float32."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    r = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (b_q,)
    offs_dv = tl.arange(0, BLOCK_DV)
    mask = (offs_m[:, None] < T_q) & (offs_dv[None, :] < DV)
    o = tl.load(
        Out + b * stride_ob + r * stride_oh
        + offs_m[:, None] * stride_ot + offs_dv[None, :] * stride_od,
        mask=mask, other=0.0,
    )  # fmt: skip
    do = tl.load(
        DOut + b * stride_dob + r * stride_doh
        + offs_m[:, None] * stride_dot + offs_dv[None, :] * stride_dod,
        mask=mask, other=0.0,
    )  # fmt: skip
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)  # (b_q,)
    tl.store(Delta + pid_bh * T_q + offs_m, delta, mask=offs_m < T_q)


@triton.jit
def _dkdv_query_block(
    dk,
    dv,
    k,
    v,
    q_head,
    do_head,
    lse_head,
    delta_head,
    start_m,
    offs_n,
    offs_d,
    offs_dv,
    T_q,
    stride_qt,
    stride_qd,
    stride_dot,
    stride_dod,
    scale_log2,
    D: tl.constexpr,
    DV: tl.constexpr,
    BLOCK_M: tl.constexpr,
    CAUSAL_MASK: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Add one block of b_q queries' share to dK and dV of b_k keys (transposed tiles)."""
    queries = start_m + tl.arange(0, BLOCK_M)  # (b_q,) query indices i
    rows = queries < T_q
    q = tl.load(
        q_head + queries[:, None] * stride_qt + offs_d[None, :] * stride_qd,
        mask=rows[:, None] & (offs_d[None, :] < D),
        other=0.0,
    )  # fmt: skip  (b_q, d_k)
    do = tl.load(
        do_head + queries[:, None] * stride_dot + offs_dv[None, :] * stride_dod,
        mask=rows[:, None] & (offs_dv[None, :] < DV),
        other=0.0,
    )  # fmt: skip  (b_q, d_v)
    # Rows past T_q get L = +inf, so that their weights exp(s - L) are 0.
    lse2 = tl.load(lse_head + queries, mask=rows, other=float("inf")) * 1.4426950408889634
    delta = tl.load(delta_head + queries, mask=rows, other=0.0)  # (b_q,)
    # The weights rebuilt from Q, K and L, transposed: P^T (b_k, b_q).
    s_t = tl.dot(k, tl.trans(q), input_precision=PRECISION) * scale_log2
    p_t = tl.math.exp2(s_t - lse2[None, :])
    if CAUSAL_MASK:
        p_t = tl.where(offs_n[:, None] <= queries[None, :], p_t, 0.0)
    dv += tl.dot(p_t.to(do.dtype), do, input_precision=PRECISION)  # dV += P^T dO
    dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)  # (dO V^T)^T
    ds_t = p_t * (dp_t - delta[None, :])  # dS^T = P^T o (dP^T - D)
    dk += tl.dot(ds_t.to(q.dtype), q, input_precision=PRECISION)  # dK += dS^T Q
    return dk, dv


@triton.jit
def _flash_backward_dkdv_kernel(
    Q,
    K,
    V,
    DOut,
    Lse,
    Delta,
    DK,
    DV_,
    stride_qb,
    stride_qh,
    stride_qt,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_kt,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vt,
    stride_vd,
    stride_dob,
    stride_doh,
    stride_dot,
    stride_dod,
    stride_dkb,
    stride_dkh,
    stride_dkt,
    stride_dkd,
    stride_dvb,
    stride_dvh,
    stride_dvt,
    stride_dvd,
    H,
    H_KV,
    GROUP,
    T_q,
    T_k,
    scale,
    scale_log2,
    D: tl.constexpr,
    DV: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One program: dK and dV of b_k keys of one key/value head.

    It loads its keys and values once and walks over the queries b_q at a
    time, for every query head of its group (grouped-query attention: the
    gradients of a shared key sum over the heads that read it), so each
    program owns its rows of dK and dV and needs no atomics.
    """
    pid_n = tl.program_id(0)  # which block of keys
    pid_bg = tl.program_id(1)  # which (batch, key/value head) pair
    b = pid_bg // H_KV
    g = pid_bg % H_KV
    n0 = pid_n * BLOCK_N
    offs_n = n0 + tl.arange(0, BLOCK_N)  # (b_k,) key indices j
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    keys = offs_n < T_k
    k = tl.load(
        K
        + b * stride_kb
        + g * stride_kh
        + offs_n[:, None] * stride_kt
        + offs_d[None, :] * stride_kd,
        mask=keys[:, None] & (offs_d[None, :] < D),
        other=0.0,
    )  # fmt: skip  (b_k, d_k)
    v = tl.load(
        V
        + b * stride_vb
        + g * stride_vh
        + offs_n[:, None] * stride_vt
        + offs_dv[None, :] * stride_vd,
        mask=keys[:, None] & (offs_dv[None, :] < DV),
        other=0.0,
    )  # fmt: skip  (b_k, d_v)
    dk = tl.zeros((BLOCK_N, BLOCK_D), tl.float32)
    dv = tl.zeros((BLOCK_N, BLOCK_DV), tl.float32)

    if CAUSAL:
        # Key j is seen by queries i >= j: the query blocks before the one
        # holding query n0 see none of these keys and are skipped; the blocks
        # up to the one holding query n0 + b_k - 1 straddle the diagonal
        # (masked); the later ones see every key of the block (no mask).
        start = (n0 // BLOCK_M) * BLOCK_M
        start_full = tl.minimum(tl.cdiv(n0 + BLOCK_N - 1, BLOCK_M) * BLOCK_M, T_q)
    else:
        start = 0
        start_full = 0
    for r in range(g * GROUP, g * GROUP + GROUP):  # the query heads of group g
        q_head = Q + b * stride_qb + r * stride_qh
        do_head = DOut + b * stride_dob + r * stride_doh
        lse_head = Lse + (b * H + r) * T_q
        delta_head = Delta + (b * H + r) * T_q
        for start_m in range(start, start_full, BLOCK_M):
            dk, dv = _dkdv_query_block(
                dk, dv, k, v, q_head, do_head, lse_head, delta_head, start_m,
                offs_n, offs_d, offs_dv, T_q, stride_qt, stride_qd, stride_dot,
                stride_dod, scale_log2, D, DV, BLOCK_M, True, PRECISION,
            )  # fmt: skip
        for start_m in range(start_full, T_q, BLOCK_M):
            dk, dv = _dkdv_query_block(
                dk, dv, k, v, q_head, do_head, lse_head, delta_head, start_m,
                offs_n, offs_d, offs_dv, T_q, stride_qt, stride_qd, stride_dot,
                stride_dod, scale_log2, D, DV, BLOCK_M, False, PRECISION,
            )  # fmt: skip

    dk = dk * scale  # dS was taken with respect to the scaled scores
    tl.store(
        DK + b * stride_dkb + g * stride_dkh
        + offs_n[:, None] * stride_dkt + offs_d[None, :] * stride_dkd,
        dk.to(DK.dtype.element_ty), mask=keys[:, None] & (offs_d[None, :] < D),
    )  # fmt: skip
    tl.store(
        DV_ + b * stride_dvb + g * stride_dvh
        + offs_n[:, None] * stride_dvt + offs_dv[None, :] * stride_dvd,
        dv.to(DV_.dtype.element_ty), mask=keys[:, None] & (offs_dv[None, :] < DV),
    )  # fmt: skip


@triton.jit
def _dq_key_block(
    dq,
    q,
    do,
    lse2,
    delta,
    k_head,
    v_head,
    start_n,
    offs_m,
    offs_d,
    offs_dv,
    T_k,
    stride_kt,
    stride_kd,
    stride_vt,
    stride_vd,
    scale_log2,
    D: tl.constexpr,
    DV: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL_MASK: tl.constexpr,
    BOUND_MASK: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Add one block of b_k keys' share to dQ of b_q queries."""
    keys = start_n + tl.arange(0, BLOCK_N)  # (b_k,)
    inside = keys < T_k
    k = tl.load(
        k_head + keys[:, None] * stride_kt + offs_d[None, :] * stride_kd,
        mask=inside[:, None] & (offs_d[None, :] < D),
        other=0.0,
    )  # fmt: skip  (b_k, d_k)
    v = tl.load(
        v_head + keys[:, None] * stride_vt + offs_dv[None, :] * stride_vd,
        mask=inside[:, None] & (offs_dv[None, :] < DV),
        other=0.0,
    )  # fmt: skip  (b_k, d_v)
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale_log2  # (b_q, b_k)
    p = tl.math.exp2(s - lse2[:, None])  # the forward's weights, rebuilt
    if BOUND_MASK:
        p = tl.where(inside[None, :], p, 0.0)
    if CAUSAL_MASK:
        p = tl.where(keys[None, :] <= offs_m[:, None], p, 0.0)
    dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)  # dP = dO V^T
    ds = p * (dp - delta[:, None])  # dS = P o (dP - D)
    dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)  # dQ += dS K
    return dq


@triton.jit
def _flash_backward_dq_kernel(
    Q,
    K,
    V,
    DOut,
    Lse,
    Delta,
    DQ,
    stride_qb,
    stride_qh,
    stride_qt,
    stride_qd,
    stride_kb,
    stride_kh,
    stride_kt,
    stride_kd,
    stride_vb,
    stride_vh,
    stride_vt,
    stride_vd,
    stride_dob,
    stride_doh,
    stride_dot,
    stride_dod,
    stride_dqb,
    stride_dqh,
    stride_dqt,
    stride_dqd,
    H,
    GROUP,
    T_q,
    T_k,
    scale,
    scale_log2,
    D: tl.constexpr,
    DV: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    CAUSAL: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """One program: dQ of b_q queries of one head, over the keys they see."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    r = pid_bh % H
    g = r // GROUP
    q0 = pid_m * BLOCK_M
    offs_m = q0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    rows = offs_m < T_q
    q = tl.load(
        Q
        + b * stride_qb
        + r * stride_qh
        + offs_m[:, None] * stride_qt
        + offs_d[None, :] * stride_qd,
        mask=rows[:, None] & (offs_d[None, :] < D),
        other=0.0,
    )  # fmt: skip  (b_q, d_k)
    do = tl.load(
        DOut
        + b * stride_dob
        + r * stride_doh
        + offs_m[:, None] * stride_dot
        + offs_dv[None, :] * stride_dod,
        mask=rows[:, None] & (offs_dv[None, :] < DV),
        other=0.0,
    )  # fmt: skip  (b_q, d_v)
    lse2 = tl.load(Lse + pid_bh * T_q + offs_m, mask=rows, other=float("inf")) * 1.4426950408889634
    delta = tl.load(Delta + pid_bh * T_q + offs_m, mask=rows, other=0.0)
    k_head = K + b * stride_kb + g * stride_kh
    v_head = V + b * stride_vb + g * stride_vh
    dq = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    if CAUSAL:  # the forward's loop bounds: visible blocks, then the diagonal
        end_full = (tl.minimum(q0 + 1, T_k) // BLOCK_N) * BLOCK_N
        end = tl.minimum(q0 + BLOCK_M, T_k)
    else:
        end_full = (T_k // BLOCK_N) * BLOCK_N
        end = T_k
    for start_n in range(0, end_full, BLOCK_N):
        dq = _dq_key_block(
            dq, q, do, lse2, delta, k_head, v_head, start_n, offs_m, offs_d, offs_dv,
            T_k, stride_kt, stride_kd, stride_vt, stride_vd, scale_log2,
            D, DV, BLOCK_N, False, False, PRECISION,
        )  # fmt: skip
    for start_n in range(end_full, end, BLOCK_N):
        dq = _dq_key_block(
            dq, q, do, lse2, delta, k_head, v_head, start_n, offs_m, offs_d, offs_dv,
            T_k, stride_kt, stride_kd, stride_vt, stride_vd, scale_log2,
            D, DV, BLOCK_N, CAUSAL, True, PRECISION,
        )  # fmt: skip
    dq = dq * scale
    tl.store(
        DQ + b * stride_dqb + r * stride_dqh
        + offs_m[:, None] * stride_dqt + offs_d[None, :] * stride_dqd,
        dq.to(DQ.dtype.element_ty), mask=rows[:, None] & (offs_d[None, :] < D),
    )  # fmt: skip


def _check_block(value: object, name: str) -> int:
    block = check_positive_int(value, name)
    if block < 16 or block & (block - 1):
        raise ValueError(
            f"{name} must be a power of two of at least 16, got {block}: block shapes "
            "are powers of two (tl.arange), and on a GPU the inner dimension of each "
            "tl.dot must be at least 16 for 16-bit inputs (b_k in the forward's P V and "
            "the backward's dS K, b_q in the backward's P^T dO and dS^T Q)"
        )
    return block


def _block_width(d: int) -> int:
    """A feature width padded for the kernels: a power of two, at least 16 (tl.dot)."""
    return max(16, triton.next_power_of_2(d))


def _default_blocks(d_k: int, d_v: int, dtype: torch.dtype) -> tuple[int, int]:
    """``(block_m, block_n)`` chosen by the padded width and the dtype.

    ``(128, 64)`` up to a padded width of 64; up to 128, ``(64, 64)`` in
    float32 and ``(128, 64)`` in 16 bits; wider, ``(32, 32)`` in float32 and
    ``(64, 32)`` in 16 bits. Each fits the shared memory of an A100
    (163 KB) and an H100 (227 KB), forward and backward, which
    ``tests/test_kernels.py`` checks against each GPU's limit from the
    compiled kernels' metadata.
    """
    width = max(_block_width(d_k), _block_width(d_v))
    if width <= 64:
        return 128, 64
    if width <= 128:
        return (64, 64) if dtype == torch.float32 else (128, 64)
    return (32, 32) if dtype == torch.float32 else (64, 32)


def _launch_options(kind: str, dtype: torch.dtype, block_m: int, width: int) -> dict:
    """``num_warps``, ``num_stages`` and fp fusion for one of the kernels.

    ``kind`` is ``"forward"``, ``"dkdv"`` or ``"dq"``. ``num_stages`` is how
    many copies of the blocks a loop keeps in flight; float32 blocks are
    twice as large as 16-bit ones, so they get fewer (3 stages at d = 128
    would not fit an A100's shared memory).
    """
    if kind == "forward":
        stages = 2 if dtype == torch.float32 else 3
    else:  # the backward holds more tiles per step (P, dP, dS and two inputs)
        stages = 1 if dtype == torch.float32 and width > 64 else 2
    return {
        "num_warps": 8 if block_m >= 128 else 4,
        "num_stages": stages,
        "enable_fp_fusion": True,  # multiply-adds fused, as Triton's default
    }


def _precision(dtype: torch.dtype) -> str:
    # float32 on a GPU: exact float32 products ("ieee"), not TensorFloat-32;
    # the 16-bit dtypes ignore it (tensor cores, float32 accumulation).
    return "ieee" if dtype == torch.float32 else "tf32"


def _check_inputs_finite(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
    """Raise ``ValueError`` naming the input that holds NaN or inf.

    The package's non-finite policy (``_checks.check_finite``) with one
    device synchronisation for the three inputs instead of three: their sums
    go to the host together, and only a sum that is not finite (bad input,
    or a sum that overflows) pays for the entry-by-entry check.
    """
    inputs = {"query": query, "key": key, "value": value}
    with torch.no_grad():  # a check, not part of autograd's graph
        sums = torch.stack([tensor.sum(dtype=torch.float32) for tensor in inputs.values()])
    if bool(torch.isfinite(sums).all()):
        return
    for name, tensor in inputs.items():
        check_finite(tensor, name)


def _nothing_to_attend(out: torch.Tensor, t_k: int) -> bool:
    """Whether the kernels have no work: an empty output (no batch, head, query
    or value feature) or no key. The forward and the backward both skip them."""
    return out.numel() == 0 or t_k == 0


def _forward_with_lse(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    causal: bool,
    scale: float,
    block_m: int,
    block_n: int,
    stats: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch the forward kernel on checked inputs: the output and ``L`` (B, h, T_q).

    ``stats``, if given, is an int32 tensor of ``2 x programs`` zeros: each
    program adds the key blocks it loads and those it masks (the tests'
    window into the causal early exit and the masking at the diagonal).
    """
    batch, heads, t_q, d_k = query.shape
    kv_heads, t_k, d_v = key.shape[1], key.shape[2], value.shape[3]
    out = torch.empty((batch, heads, t_q, d_v), dtype=query.dtype, device=query.device)
    lse = torch.empty((batch, heads, t_q), dtype=torch.float32, device=query.device)
    if _nothing_to_attend(out, t_k):  # rows of zeros
        return out.zero_(), lse.fill_(-math.inf)
    grid = (triton.cdiv(t_q, block_m), batch * heads)
    width = max(_block_width(d_k), _block_width(d_v))
    # The interpreter computes with numpy, which warns where scores overflow;
    # flash_attention checks the output instead and names the cause.
    with np.errstate(over="ignore", invalid="ignore"):
        _flash_forward_kernel[grid](
            query, key, value, out, lse, lse if stats is None else stats,
            *query.stride(), *key.stride(), *value.stride(), *out.stride(),
            heads, heads // kv_heads, t_q, t_k, scale * _LOG2E,
            D=d_k, DV=d_v, BLOCK_D=_block_width(d_k), BLOCK_DV=_block_width(d_v),
            BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
            PRECISION=_precision(query.dtype), STATS=stats is not None,
            **_launch_options("forward", query.dtype, block_m, width),
        )  # fmt: skip
    return out, lse


def _forward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    causal: bool,
    scale: float,
    block_m: int,
    block_n: int,
) -> torch.Tensor:
    """Launch the kernel on checked inputs; no checks here (the benchmark times this)."""
    return _forward_with_lse(query, key, value, causal, scale, block_m, block_n)[0]


def _backward(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    dout: torch.Tensor,
    causal: bool,
    scale: float,
    block_m: int,
    block_n: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Launch the three backward kernels: ``D``, then dK and dV, then dQ. No checks."""
    batch, heads, t_q, d_k = query.shape
    kv_heads, t_k, d_v = key.shape[1], key.shape[2], value.shape[3]
    dq = torch.zeros_like(query, memory_format=torch.contiguous_format)
    dk = torch.zeros_like(key, memory_format=torch.contiguous_format)
    dv = torch.zeros_like(value, memory_format=torch.contiguous_format)
    # The forward's test: where it ran no kernel, L is its -inf and nothing
    # depends on the inputs, so every gradient is 0.
    if _nothing_to_attend(out, t_k):
        return dq, dk, dv
    delta = torch.empty((batch, heads, t_q), dtype=torch.float32, device=query.device)
    width = max(_block_width(d_k), _block_width(d_v))
    shapes = dict(D=d_k, DV=d_v, BLOCK_D=_block_width(d_k), BLOCK_DV=_block_width(d_v))
    blocks = dict(BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal)
    precision = _precision(query.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        _flash_backward_preprocess[(triton.cdiv(t_q, block_m), batch * heads)](
            out, dout, delta, *out.stride(), *dout.stride(), heads, t_q,
            DV=d_v, BLOCK_DV=_block_width(d_v), BLOCK_M=block_m,
        )  # fmt: skip
        _flash_backward_dkdv_kernel[(triton.cdiv(t_k, block_n), batch * kv_heads)](
            query, key, value, dout, lse, delta, dk, dv,
            *query.stride(), *key.stride(), *value.stride(), *dout.stride(),
            *dk.stride(), *dv.stride(),
            heads, kv_heads, heads // kv_heads, t_q, t_k, scale, scale * _LOG2E,
            **shapes, **blocks, PRECISION=precision,
            **_launch_options("dkdv", query.dtype, block_n, width),
        )  # fmt: skip
        _flash_backward_dq_kernel[(triton.cdiv(t_q, block_m), batch * heads)](
            query, key, value, dout, lse, delta, dq,
            *query.stride(), *key.stride(), *value.stride(), *dout.stride(), *dq.stride(),
            heads, heads // kv_heads, t_q, t_k, scale, scale * _LOG2E,
            **shapes, **blocks, PRECISION=precision,
            **_launch_options("dq", query.dtype, block_m, width),
        )  # fmt: skip
    return dq, dk, dv


class _FlashAttentionFunction(torch.autograd.Function):
    """Autograd's view of the kernels: the forward saves Q, K, V, O and L only."""

    @staticmethod
    def forward(ctx, query, key, value, causal, scale, block_m, block_n):  # noqa: D102
        out, lse = _forward_with_lse(query, key, value, causal, scale, block_m, block_n)
        ctx.save_for_backward(query, key, value, out, lse)
        ctx.settings = (causal, scale, block_m, block_n)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout):  # noqa: D102
        query, key, value, out, lse = ctx.saved_tensors
        if not all_finite(dout):
            raise ValueError(
                f"the gradient of flash_attention's output (shape {tuple(dout.shape)}) "
                "contains NaN or inf"
            )
        dout = dout.to(out.dtype)
        grads = _backward(query, key, value, out, lse, dout, *ctx.settings)
        for name, grad in zip(("query", "key", "value"), grads, strict=True):
            if not all_finite(grad):
                raise ValueError(
                    f"the gradient of {name} is not finite (scores, values or the "
                    "output's gradient too large); rescale the inputs"
                )
        return (*grads, None, None, None, None)


def flash_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    block_m: int | None = None,
    block_n: int | None = None,
) -> torch.Tensor:
    """Exact attention ``softmax(Q K^T * scale) V`` in one fused Triton kernel.

    FlashAttention (Dao et al., 2022, 2023), with its backward pass. In the
    forward pass each program of the kernel owns ``block_m`` queries of one
    head, walks over the keys ``block_n`` at a time with the online softmax,
    and writes its rows of the output and of the row log-sum-exp ``L`` once:
    the ``T_q x T_k`` scores are never stored. When an input requires a gradient, autograd saves
    ``Q``, ``K``, ``V``, the output and ``L`` (``(B, h, T_q)`` float32), and
    the backward pass rebuilds the weights tile by tile from them: one
    kernel computes ``D = rowsum(dO o O)``, one owns blocks of keys and
    accumulates ``dK`` and ``dV`` over the queries (FlashAttention-2's
    loop), and one owns blocks of queries and accumulates ``dQ`` over the
    keys, instead of FlashAttention-2's atomic additions into ``dQ`` (as
    Triton's fused-attention tutorial does): deterministic gradients.

    Parameters
    ----------
    query : torch.Tensor
        ``(B, h, T_q, d_k)``.
    key : torch.Tensor
        ``(B, h_kv, T_k, d_k)``, where ``h_kv`` divides ``h``: query head
        ``r`` uses key/value head ``r // (h / h_kv)`` (grouped-query
        attention, the layout of ``F.scaled_dot_product_attention(...,
        enable_gqa=True)``). The gradients of a shared key and value head
        sum over the query heads that read it.
    value : torch.Tensor
        ``(B, h_kv, T_k, d_v)``.
    causal : bool
        If True, query ``i`` attends only to keys ``j <= i`` (top-left
        aligned, as ``F.scaled_dot_product_attention(..., is_causal=True)``,
        also when ``T_q != T_k``). Key blocks wholly in the future of a
        program's queries are never loaded, and only the blocks at the
        diagonal are masked; the backward skips the same blocks.
    scale : float, optional
        Multiplies the raw scores; defaults to ``1 / sqrt(d_k)``.
    block_m, block_n : int, optional
        ``b_q`` and ``b_k``, Triton's ``BLOCK_M`` and ``BLOCK_N``: queries
        per program and keys per step (the backward's programs own
        ``block_n`` keys or ``block_m`` queries). Powers of two, at least 16:
        on a GPU the inner dimension of each ``tl.dot`` must be at least 16
        for 16-bit inputs, and each block size is the inner dimension of a
        product somewhere (``b_k`` in ``P V``, ``b_q`` in ``P^T dO``).
        ``T_q`` and ``T_k`` need not be multiples of them. By default chosen
        by the padded width and the dtype: ``(128, 64)`` for ``d <= 128``
        (``(64, 64)`` for float32 at ``64 < d <= 128``), smaller for wider
        heads, so that every kernel fits the shared memory of an A100 and an
        H100 (checked by the tests for d up to 256). Other sizes, or wider
        heads, may not fit a GPU (Triton's ``OutOfResources``).

    Returns
    -------
    torch.Tensor
        ``(B, h, T_q, d_v)``, in the inputs' dtype. With ``T_k = 0`` every
        row is zero (and so are the gradients).

    Raises
    ------
    TypeError
        If an input is not a floating-point tensor, the three dtypes differ,
        the dtype is not supported on this machine (float32 under the
        interpreter; float16, bfloat16 or float32 on a GPU), or ``causal``
        or ``scale`` has the wrong type.
    ValueError
        If a shape does not fit the ones above, the inputs are on different
        devices or not on the kernels' device, a block size is not a power
        of two of at least 16, an input holds NaN or inf (checked before the
        kernel runs), ``scale`` is not finite, or the output is not finite
        (scores or values too large). In the backward pass, if the output's
        gradient holds NaN or inf, or a gradient is not finite.

    Notes
    -----
    On a machine without a CUDA GPU, Triton's interpreter runs the kernels
    on the CPU with numpy, one program after another: the numbers are the
    kernels', the speed is not. Scores, the running state and the gradient
    accumulators are kept in float32 whatever the input dtype. On a GPU,
    float32 inputs are multiplied in full float32 (``input_precision=
    "ieee"``): exact products on the ordinary float32 units, with no tensor
    cores (the float32 kernel compiled for sm_90 has no ``mma``
    instruction). ``"tf32"`` would round the inputs to TensorFloat-32's 10
    mantissa bits and use the tensor cores: several times faster, with
    errors near ``1e-3`` instead of ``1e-6``. float16 and bfloat16 always
    use the tensor cores. The softmax uses ``exp2`` on scores
    pre-multiplied by ``log2(e)``, which is the same softmax. The backward
    is not differentiable again (no second derivatives).

    Examples
    --------
    >>> import torch
    >>> import torch.nn.functional as F
    >>> from selfattention.kernels import DEVICE, flash_attention
    >>> q = torch.randn(1, 4, 40, 16, device=DEVICE)  # (B, h, T_q, d_k)
    >>> k = torch.randn(1, 2, 40, 16, device=DEVICE)  # (B, h_kv, T_k, d_k)
    >>> v = torch.randn(1, 2, 40, 8, device=DEVICE)   # (B, h_kv, T_k, d_v)
    >>> out = flash_attention(q, k, v, causal=True, block_m=16, block_n=16)
    >>> out.shape
    torch.Size([1, 4, 40, 8])
    >>> ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    >>> bool((out - ref).abs().max() < 1e-5)
    True
    >>> _ = k.requires_grad_()
    >>> flash_attention(q, k, v, causal=True, block_m=16, block_n=16).sum().backward()
    >>> k.grad.shape  # summed over the two query heads that share each key head
    torch.Size([1, 2, 40, 16])
    """
    from . import DEVICE, INTERPRETED

    for name, tensor in (("query", query), ("key", key), ("value", value)):
        check_float_tensor(tensor, name)
        if tensor.dim() != 4:
            layout = {"query": "(B, h, T_q, d_k)", "key": "(B, h_kv, T_k, d_k)"}
            raise ValueError(
                f"{name} must have 4 dimensions {layout.get(name, '(B, h_kv, T_k, d_v)')}, "
                f"got shape {tuple(tensor.shape)}"
            )
    shapes = f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
    if not (query.shape[0] == key.shape[0] == value.shape[0]):
        raise ValueError(f"query, key and value must share the batch size B, got {shapes}")
    if key.shape[1] != value.shape[1] or key.shape[2] != value.shape[2]:
        raise ValueError(f"key and value must share h_kv and T_k, got {shapes}")
    if query.shape[3] != key.shape[3]:
        raise ValueError(f"query and key must share the feature size d_k, got {shapes}")
    heads, kv_heads = query.shape[1], key.shape[1]
    if kv_heads == 0 or heads % kv_heads:
        raise ValueError(f"the key/value heads h_kv must divide the query heads h, got {shapes}")
    for name, tensor in (("key", key), ("value", value)):
        check_same_dtype_device(tensor, name, query.dtype, query.device, "query")
    supported = (torch.float32,) if INTERPRETED else (torch.float16, torch.bfloat16, torch.float32)
    if query.dtype not in supported:
        where = "under Triton's interpreter" if INTERPRETED else "on a GPU"
        names = ", ".join(str(dtype) for dtype in supported)
        raise TypeError(
            f"query, key and value: flash_attention {where} takes {names}; got {query.dtype}"
        )
    if not INTERPRETED and query.device.type != DEVICE:
        raise ValueError(
            f"the compiled kernel runs on the GPU: query, key and value must be on "
            f"{DEVICE!r}, got {query.device}"
        )
    causal = check_flag(causal, "causal")
    checked_scale = None if scale is None else check_real(scale, "scale", kind="a float or None")
    default_m, default_n = _default_blocks(query.shape[3], value.shape[3], query.dtype)
    block_m = default_m if block_m is None else _check_block(block_m, "block_m")
    block_n = default_n if block_n is None else _check_block(block_n, "block_n")
    _check_inputs_finite(query, key, value)
    d_k = query.shape[3]
    scale_value = checked_scale if checked_scale is not None else 1.0 / math.sqrt(max(d_k, 1))

    settings = (causal, scale_value, block_m, block_n)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)):
        out = _FlashAttentionFunction.apply(query, key, value, *settings)
    else:
        out = _forward(query, key, value, *settings)
    if not all_finite(out):  # finite inputs: the scores or the values were too large
        raise ValueError(
            f"the output is not finite (scores or values too large: {shapes}, "
            f"scale {scale_value}); rescale the inputs"
        )
    return out
