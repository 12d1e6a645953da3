"""FlashAttention's forward pass as one Triton kernel (chapter 16).

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
    D: tl.constexpr,
    DV: tl.constexpr,
    BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    CAUSAL_MASK: tl.constexpr,
    BOUND_MASK: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Fold one block of b_k keys into the running (m, z, o) of b_q queries."""
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
):
    """One program: b_q queries of one head against every key it may see."""
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
            stride_kt, stride_kd, stride_vt, stride_vd, scale_log2,
            D, DV, BLOCK_D, BLOCK_DV, False, False, PRECISION,
        )  # fmt: skip
    for start_n in range(end_full, end, BLOCK_N):
        m, z, o = _attend_key_block(
            q, m, z, o, k_head, v_head, start_n, offs_m, offs_n, offs_d, offs_dv, T_k,
            stride_kt, stride_kd, stride_vt, stride_vd, scale_log2,
            D, DV, BLOCK_D, BLOCK_DV, CAUSAL, True, PRECISION,
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


def _check_block(value: object, name: str) -> int:
    block = check_positive_int(value, name)
    if block < 16 or block & (block - 1):
        raise ValueError(
            f"{name} must be a power of two of at least 16 (Triton's tl.arange and "
            f"tl.dot need it), got {block}"
        )
    return block


def _check_inputs_finite(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
    """Raise ``ValueError`` naming the input that holds NaN or inf.

    The package's non-finite policy (``_checks.check_finite``) with one
    device synchronisation for the three inputs instead of three: their sums
    go to the host together, and only a sum that is not finite (bad input,
    or a sum that overflows) pays for the entry-by-entry check.
    """
    inputs = {"query": query, "key": key, "value": value}
    sums = torch.stack([tensor.sum(dtype=torch.float32) for tensor in inputs.values()])  # (3,)
    if bool(torch.isfinite(sums).all()):
        return
    for name, tensor in inputs.items():
        check_finite(tensor, name)


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
    batch, heads, t_q, d_k = query.shape
    kv_heads, t_k, d_v = key.shape[1], key.shape[2], value.shape[3]
    out = torch.empty((batch, heads, t_q, d_v), dtype=query.dtype, device=query.device)
    if out.numel() == 0:
        return out
    if t_k == 0:  # no key to attend to: rows of zeros, as chunked_attention
        return out.zero_()
    grid = (triton.cdiv(t_q, block_m), batch * heads)
    # The interpreter computes with numpy, which warns where scores overflow;
    # flash_attention checks the output instead and names the cause.
    with np.errstate(over="ignore", invalid="ignore"):
        _flash_forward_kernel[grid](
            query, key, value, out,
            *query.stride(), *key.stride(), *value.stride(), *out.stride(),
            heads, heads // kv_heads, t_q, t_k, scale * _LOG2E,
            D=d_k, DV=d_v,
            BLOCK_D=max(16, triton.next_power_of_2(d_k)),
            BLOCK_DV=max(16, triton.next_power_of_2(d_v)),
            BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
            # float32 on a GPU: exact float32 products, not TensorFloat-32.
            PRECISION="ieee" if query.dtype == torch.float32 else "tf32",
            num_warps=8 if block_m >= 128 else 4,
            # Copies of the K and V blocks in flight; float32 blocks are twice
            # as large, and 3 stages at d = 128 would not fit an A100's SRAM.
            num_stages=2 if query.dtype == torch.float32 else 3,
            enable_fp_fusion=True,  # multiply-adds fused, as Triton's default
        )  # fmt: skip
    return out


def flash_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    block_m: int = 128,
    block_n: int = 64,
) -> torch.Tensor:
    """Exact attention ``softmax(Q K^T * scale) V`` in one fused Triton kernel.

    The forward pass of FlashAttention (Dao et al., 2022, 2023). Each program
    of the kernel owns ``block_m`` queries of one head, walks over the keys
    ``block_n`` at a time with the online softmax, and writes its rows of the
    output once: the ``T_q x T_k`` scores are never stored.

    Parameters
    ----------
    query : torch.Tensor
        ``(B, h, T_q, d_k)``.
    key : torch.Tensor
        ``(B, h_kv, T_k, d_k)``, where ``h_kv`` divides ``h``: query head
        ``r`` uses key/value head ``r // (h / h_kv)`` (grouped-query
        attention, the layout of ``F.scaled_dot_product_attention(...,
        enable_gqa=True)``).
    value : torch.Tensor
        ``(B, h_kv, T_k, d_v)``.
    causal : bool
        If True, query ``i`` attends only to keys ``j <= i`` (top-left
        aligned, as ``F.scaled_dot_product_attention(..., is_causal=True)``,
        also when ``T_q != T_k``). Key blocks wholly in the future of a
        program's queries are never loaded.
    scale : float, optional
        Multiplies the raw scores; defaults to ``1 / sqrt(d_k)``.
    block_m, block_n : int
        ``b_q`` and ``b_k``, Triton's ``BLOCK_M`` and ``BLOCK_N``: queries
        per program and keys per step. Powers of two, at least 16. ``T_q``
        and ``T_k`` need not be multiples of them.

    Returns
    -------
    torch.Tensor
        ``(B, h, T_q, d_v)``, in the inputs' dtype. With ``T_k = 0`` every
        row is zero.

    Raises
    ------
    TypeError
        If an input is not a floating-point tensor, the three dtypes differ,
        the dtype is not supported on this machine (float32 under the
        interpreter; float16, bfloat16 or float32 on a GPU), or ``causal``
        or ``scale`` has the wrong type.
    ValueError
        If a shape does not fit the ones above, the inputs are on different
        devices or not on the kernels' device, an input requires a gradient
        (there is no backward pass), a block size is not a power of two of
        at least 16, an input holds NaN or inf (checked before the kernel
        runs), ``scale`` is not finite, or the output is not finite
        (overflowing scores).

    Notes
    -----
    On a machine without a CUDA GPU, Triton's interpreter runs the kernel on
    the CPU with numpy, one program after another: the numbers are the
    kernel's, the speed is not. Scores and the running state are kept in
    float32 whatever the input dtype; on a GPU, float32 inputs are
    multiplied in full float32 (``input_precision="ieee"``), not in
    TensorFloat-32. The softmax uses ``exp2`` on scores pre-multiplied by
    ``log2(e)``, which is the same softmax. There is no backward pass.

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
    if torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)):
        raise ValueError(
            "flash_attention has no backward pass, and an input (query, key or value) "
            "requires a gradient: call it under torch.no_grad(), or use "
            "F.scaled_dot_product_attention to train"
        )
    causal = check_flag(causal, "causal")
    checked_scale = None if scale is None else check_real(scale, "scale", kind="a float or None")
    block_m = _check_block(block_m, "block_m")
    block_n = _check_block(block_n, "block_n")
    _check_inputs_finite(query, key, value)
    d_k = query.shape[3]
    scale_value = checked_scale if checked_scale is not None else 1.0 / math.sqrt(max(d_k, 1))

    out = _forward(query, key, value, causal, scale_value, block_m, block_n)
    if not all_finite(out):  # finite inputs: only the scores can have overflowed
        raise ValueError(
            f"the scores Q K^T * scale overflow float32 ({shapes}, scale {scale_value}); "
            "rescale the inputs"
        )
    return out
