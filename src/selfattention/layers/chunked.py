"""Memory-efficient attention: an online softmax over blocks (chapter 12).

``chunked_attention`` computes ``softmax(Q K^T * scale) V`` exactly, but walks
over tiles of queries and keys and keeps, for each query, only a running
maximum ``m``, a running sum ``z`` and a running output ``o`` (chapter 12's
names). The ``T_q x T_k`` score matrix is never held in memory, only one
``b_q x b_k`` tile of it at a time (``b_q = b_k = block_size``). This is the
idea behind FlashAttention (Dao et al., 2022), written with ordinary torch
operations instead of one fused kernel.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .._checks import (
    check_attention_shapes,
    check_finite,
    check_flag,
    check_float_tensor,
    check_positive_int,
    check_query_key_value_agree,
    check_real,
)

#: The default tile side, 256, is the largest power of two whose float32 tile
#: of scores and its query, key and value rows (d_k = d_v = 64) fit in 1 MiB,
#: a typical per-core L2 cache. Chapter 12, exercise 1, derives it and reports
#: the timings of the other block sizes (``make bench-attention`` measures them).
DEFAULT_BLOCK_SIZE = 256


def chunked_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> torch.Tensor:
    """Exact attention ``softmax(Q K^T * scale) V`` without the ``T_q x T_k`` matrix.

    Parameters
    ----------
    query, key, value : torch.Tensor
        ``(..., T_q, d_k)``, ``(..., T_k, d_k)`` and ``(..., T_k, d_v)``, one
        floating dtype; the leading dimensions broadcast against each other.
    causal : bool
        If True, query ``i`` attends only to keys ``j <= i`` (top-left
        aligned, as ``F.scaled_dot_product_attention(..., is_causal=True)``).
        Tiles that lie wholly in the future are skipped, not computed.
    scale : float, optional
        Multiplies the raw scores; defaults to ``1 / sqrt(d_k)``. Any finite
        number, as in PyTorch.
    block_size : int
        The side of one query-by-key tile of scores: ``b_q = b_k = block_size``
        queries and keys.

    Returns
    -------
    torch.Tensor
        ``(..., T_q, d_v)``, in the inputs' dtype. A query with no key to
        attend to (only possible when ``T_k = 0``) gets a row of zeros.

    Raises
    ------
    TypeError
        If an input is not a floating-point tensor, the three dtypes differ,
        ``causal`` is not a bool, ``scale`` is not a real number or
        ``block_size`` is not an int.
    ValueError
        If the shapes do not fit together, the tensors are on different
        devices (or ``meta``), an input holds NaN or inf, ``scale`` is not
        finite, ``block_size`` is not positive, or the scores overflow the
        dtype.

    Notes
    -----
    For each query the function keeps a running maximum ``m`` of the scores
    seen so far, a running sum ``z`` of ``exp(score - m)`` and a running
    unnormalised output ``o``. A new tile of scores ``s`` updates them as
    ``m' = max(m, max(s))``, ``z' = z exp(m - m') + sum(exp(s - m'))`` and
    ``o' = o exp(m - m') + exp(s - m') V_tile``; the output is ``o / z``
    (the online softmax of Milakov and Gimelshein, 2018). ``o`` and ``z``
    share one array, ``acc``: a column of ones appended to the values makes
    ``z`` its last column, so one matrix product updates both. Extra memory,
    per batch element and head, is ``O(T_q d_v)`` for the output,
    ``O(T_k d_v)`` for that copy of the values with a column of ones, and
    ``O(block_size (block_size + d_k + d_v))`` for one tile and its running
    state, instead of ``O(T_q T_k)``.
    float16 and bfloat16 inputs are computed in float32 and cast back.
    Gradients flow through the function, but autograd then stores every tile,
    so training memory is quadratic again (FlashAttention recomputes tiles in
    its backward pass instead).

    Examples
    --------
    >>> import torch
    >>> import torch.nn.functional as F
    >>> q, k, v = torch.randn(2, 5, 8), torch.randn(2, 7, 8), torch.randn(2, 7, 3)
    >>> out = chunked_attention(q, k, v, block_size=2)
    >>> out.shape
    torch.Size([2, 5, 3])
    >>> torch.allclose(out, F.scaled_dot_product_attention(q, k, v), atol=1e-6)
    True
    """
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        check_float_tensor(tensor, name)
    batch_shape = check_attention_shapes(tuple(query.shape), tuple(key.shape), tuple(value.shape))
    check_query_key_value_agree(query, key, value)
    causal = check_flag(causal, "causal")
    scale = None if scale is None else check_real(scale, "scale", kind="a float or None")
    block = check_positive_int(block_size, "block_size")
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        check_finite(tensor, name)  # also the keys a causal query never reaches

    t_q, d_k = query.shape[-2:]
    t_k, d_v = value.shape[-2:]
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale
    out_dtype = query.dtype
    work = torch.float32 if out_dtype in (torch.float16, torch.bfloat16) else out_dtype

    def flat(tensor: torch.Tensor, length: int, width: int) -> torch.Tensor:
        # (..., length, width) -> (N, length, width); N = prod(batch_shape).
        full = tensor.expand(*batch_shape, length, width)
        return full.reshape(math.prod(batch_shape), length, width).to(work)

    q = flat(query, t_q, d_k)  # (N, T_q, d_k)
    k_t = flat(key, t_k, d_k).transpose(1, 2)  # (N, d_k, T_k)
    v = flat(value, t_k, d_v)  # (N, T_k, d_v)
    n = q.shape[0]
    # A column of ones after the values: the product with the weights then
    # gives the running sum z as an extra output column, saving a pass over
    # every tile of scores. O(T_k d_v) memory, like the values themselves.
    v1 = torch.cat(
        [v, torch.ones(n, t_k, 1, dtype=work, device=v.device)], dim=-1
    )  # (N, T_k, d_v + 1)
    out = torch.empty(n, t_q, d_v, dtype=work, device=q.device)  # (N, T_q, d_v)
    # In-place updates save memory traffic; with autograd recording, the
    # out-of-place versions keep every saved tensor intact.
    inplace = not (
        torch.is_grad_enabled() and (q.requires_grad or k_t.requires_grad or v.requires_grad)
    )
    lowest = torch.finfo(work).min  # finite: a fully masked row never makes inf - inf

    # Views of the key and value tiles, cut once rather than once per query tile.
    k_blocks = k_t.split(block, dim=2)  # (N, d_k, b_k) each
    v_blocks = v1.split(block, dim=1)  # (N, b_k, d_v + 1) each
    pieces = []
    tile = None  # the reusable (N, block, block) buffer of scores
    for q0 in range(0, t_q, block):
        q1 = min(q0 + block, t_q)
        # The scale goes on the query tile: O(b_q d_k) work, not O(b_q T_k).
        q_tile = q[:, q0:q1] * scale  # (N, b_q, d_k)
        m = torch.full((n, q1 - q0, 1), lowest, dtype=work, device=q.device)  # running max
        # The running output o, unnormalised, and in its last column the running sum z.
        acc = torch.zeros((n, q1 - q0, d_v + 1), dtype=work, device=q.device)
        # Causal: query i sees keys j <= i, so keys from q1 on are all in the future.
        k_end = min(t_k, q1) if causal else t_k
        for index in range(-(-k_end // block)):  # ceil(k_end / block) key tiles
            # The whole key tile; with causal, its keys from q1 on are masked below.
            k0, k1 = index * block, min(index * block + block, t_k)
            if inplace and q1 - q0 == k1 - k0 == block:
                # Full tiles reuse one buffer: no allocation per tile.
                if tile is None:
                    tile = torch.empty(n, block, block, dtype=work, device=q.device)
                s = torch.bmm(q_tile, k_blocks[index], out=tile)  # (N, b_q, b_k) scaled scores
            else:
                s = torch.bmm(q_tile, k_blocks[index])  # (N, b_q, b_k) scaled scores
            if causal and k1 - 1 > q0:
                # A diagonal tile: hide key j from query i where j > i. Built
                # here, not with masks.causal_mask: a tile's diagonal is offset
                # by q0 - k0, and cutting it from the full triangle would hold
                # the T_q x T_k matrix this function exists to avoid.
                rows = torch.arange(q0, q1, device=q.device)[:, None]
                cols = torch.arange(k0, k1, device=q.device)[None, :]
                future = cols > rows  # (b_q, b_k)
                s = (
                    s.masked_fill_(future, float("-inf"))
                    if inplace
                    else s.masked_fill(future, float("-inf"))
                )
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (N, b_q, 1)
            alpha = torch.exp(m - m_new)  # (N, b_q, 1) rescales the old sum and output
            if inplace:
                p = s.sub_(m_new).exp_()  # (N, b_q, b_k) unnormalised weights
                acc.mul_(alpha).baddbmm_(p, v_blocks[index])  # acc * alpha + p [V | 1]
            else:
                p = torch.exp(s - m_new)
                acc = torch.baddbmm(acc * alpha, p, v_blocks[index])
            m = m_new
        row_sum = acc[:, :, d_v:]  # (N, b_q, 1) the running sum z
        # z = 0 only for a query with no key at all: its row stays zero.
        safe = torch.where(row_sum > 0, row_sum, torch.ones_like(row_sum))
        tile_out = acc[:, :, :d_v] / safe  # (N, b_q, d_v)
        # The inputs are finite (checked above), but scores that overflow
        # reach the output; checking tile by tile keeps the check's memory small.
        if not torch.isfinite(tile_out).all():
            _raise_overflow(query, key, work, scale)
        if inplace:
            out[:, q0:q1] = tile_out
        else:
            pieces.append(tile_out)
    if not inplace:
        out = torch.cat(pieces, dim=1) if pieces else out
    return out.reshape(*batch_shape, t_q, d_v).to(out_dtype)


def _raise_overflow(
    query: torch.Tensor, key: torch.Tensor, work: torch.dtype, scale: float
) -> None:
    """Say why an output tile of finite inputs is not finite: the scores overflow."""
    raise ValueError(
        f"the scores Q K^T * scale overflow {work} (query {tuple(query.shape)}, "
        f"key {tuple(key.shape)}, scale {scale}); rescale the inputs or compute in float64"
    )


class _TensorBytes(TorchDispatchMode):
    """Count the bytes of every tensor created by an operation inside the block.

    A new tensor is one whose storage is not shared with the operation's
    inputs (views and in-place results are not new memory). Each storage is
    counted until it is freed, so ``peak`` is the largest number of bytes
    alive at once.
    """

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._tracked: set[int] = set()

    def _free(self, key: int, nbytes: int) -> None:
        self._tracked.discard(key)
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        result = func(*args, **(kwargs or {}))
        inputs = {
            id(t.untyped_storage())
            for t in tree_leaves((args, kwargs))
            if isinstance(t, torch.Tensor)
        }
        for tensor in tree_leaves(result):
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            key = id(storage)
            if key in inputs or key in self._tracked:
                continue
            nbytes = storage.nbytes()
            self._tracked.add(key)
            self.live += nbytes
            self.peak = max(self.peak, self.live)
            weakref.finalize(storage, self._free, key, nbytes)
        return result


def peak_tensor_bytes(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """The most bytes of tensors that ``fn(*args, **kwargs)`` holds at one time.

    Every tensor created by a torch operation during the call is counted
    from its creation until it is freed; the inputs, views of them and
    in-place results are not new memory. The count is exact and the same on
    every machine, unlike the process's resident memory. It sees only
    tensors created through torch operations: not the allocator's overhead,
    nor scratch memory inside a C++ kernel. So a fused kernel counts as its
    outputs: ``F.scaled_dot_product_attention`` on 4-D CPU inputs runs its
    fused (flash) kernel, and counts as the output plus one log-sum-exp per
    query (0.25 MiB for one head, ``T = 1024``, ``d_k = 64``); on 2-D or 3-D
    inputs it takes its plain math path, which holds the ``T x T`` scores
    and weights (8.25 MiB). The result is dropped before returning, but is
    counted in the peak.

    Examples
    --------
    >>> import torch
    >>> x = torch.ones(1000)  # an input: not counted
    >>> peak_tensor_bytes(lambda t: (t * 2) + 1, x)  # two float32 temporaries
    8000
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    counter = _TensorBytes()
    with torch.no_grad(), counter:
        result = fn(*args, **kwargs)
        del result
    return counter.peak
