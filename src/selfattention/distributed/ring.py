"""Ring attention (Liu et al., 2023): key/value blocks travel round a ring of ranks.

Each of ``P`` ranks holds its chunk of the queries, keys and values. At step
``t = 0 .. P - 1`` a rank holds the key/value block of rank
``(r - t) mod P``: it posts the send of that block to rank ``r + 1`` and
the receive of the next one from rank ``r - 1``, then folds the block into
its queries' online softmax (chapter 12) while the messages travel, then
waits for them. After ``P`` steps every query has seen every key, and the
output is exactly attention over the whole sequence.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from .._checks import (
    check_finite,
    check_flag,
    check_float_tensor,
    check_query_key_value_agree,
    check_real,
)
from .layout import check_layout, rank_chunks
from .traffic import note_sent, note_tile


def group_info(group: object) -> tuple[object, int, int]:
    """The process group to use, this process's rank in it, and its size.

    Raises ``RuntimeError`` outside a process group.
    """
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            "no process group: call this inside one, e.g. in a function run by "
            "selfattention.distributed.spawn, or after torch.distributed.init_process_group"
        )
    group = dist.group.WORLD if group is None else group
    return group, dist.get_rank(group), dist.get_world_size(group)


def check_qkv(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
) -> tuple[int, int, int, int, int, int]:
    """Check one rank's chunks; return ``B, h, h_kv, T_r, d_k, d_v``."""
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        check_float_tensor(tensor, name)
        if tensor.ndim != 4:
            raise ValueError(
                f"{name} must be 4-D, (B, heads, T_r, width), got shape {tuple(tensor.shape)}"
            )
    check_query_key_value_agree(query, key, value)
    b, h, t_r, d_k = query.shape
    if key.shape[0] != b or key.shape[2] != t_r or key.shape[3] != d_k:
        raise ValueError(
            f"key must be (B, h_kv, T_r, d_k) = ({b}, h_kv, {t_r}, {d_k}) for query "
            f"{tuple(query.shape)}, got {tuple(key.shape)}"
        )
    h_kv = key.shape[1]
    if tuple(value.shape[:3]) != (b, h_kv, t_r):
        raise ValueError(
            f"value must be (B, h_kv, T_r, d_v) = ({b}, {h_kv}, {t_r}, d_v) for key "
            f"{tuple(key.shape)}, got {tuple(value.shape)}"
        )
    if h % h_kv:
        raise ValueError(
            f"the query heads h = {h} must be a multiple of the key/value heads "
            f"h_kv = {h_kv} (grouped-query attention)"
        )
    if t_r == 0:
        raise ValueError(
            f"every rank needs at least one token, got T_r = 0 (query {tuple(query.shape)})"
        )
    for name, tensor in (("query", query), ("key", key), ("value", value)):
        check_finite(tensor, name)
    return b, h, h_kv, t_r, d_k, value.shape[3]


def _fold(
    m: torch.Tensor,
    acc: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v1: torch.Tensor,
    hide_future: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One block of keys into the running state: chapter 12's online softmax.

    ``m`` (..., n_q, 1) is the running maximum, ``acc`` (..., n_q, d_v + 1)
    the running output with the running sum in its last column (the values
    carry a column of ones, as in ``chunked_attention``); ``q`` is scaled.
    """
    s = q @ k.transpose(-2, -1)  # (B, h_kv, g, n_q, n_k) scaled scores
    if hide_future:  # a diagonal tile: query i sees keys j <= i of the same chunk
        n_q, n_k = s.shape[-2:]
        future = torch.ones(n_q, n_k, dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(future, float("-inf"))
    m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))  # (..., n_q, 1)
    alpha = torch.exp(m - m_new)  # rescales the old sum and output
    p = torch.exp(s - m_new)  # (..., n_q, n_k) unnormalised weights
    return m_new, acc * alpha + p @ v1


def ring_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    layout: str = "contiguous",
    group: object = None,
) -> torch.Tensor:
    """This rank's rows of attention over the whole sequence, by passing K/V round a ring.

    Call it on every rank of the group at once (inside ``spawn``), each with
    its own part of the sequence, as ``shard_sequence`` cuts it.

    Parameters
    ----------
    query : torch.Tensor
        ``(B, h, T_r, d_k)``, this rank's queries (``T_r = T / P``).
    key, value : torch.Tensor
        ``(B, h_kv, T_r, d_k)`` and ``(B, h_kv, T_r, d_v)``, this rank's keys
        and values; ``h`` must be a multiple of ``h_kv`` (grouped-query
        attention: query head ``i`` uses key/value head ``i // (h / h_kv)``).
        Every rank passes the same shapes.
    causal : bool, default False
        Query ``i`` sees keys ``j <= i`` of the whole sequence (positions as
        the layout places them); tiles wholly in the future are skipped.
    scale : float, optional
        Multiplies the scores; defaults to ``1 / sqrt(d_k)``.
    layout : {"contiguous", "zigzag"}
        How the sequence was cut (``shard_sequence``); zigzag needs an even
        ``T_r``.
    group : ProcessGroup, optional
        The ranks of the ring; the default group if None.

    Returns
    -------
    torch.Tensor
        ``(B, h, T_r, d_v)``: the rows of ``softmax(Q K^T * scale) V`` for
        this rank's queries, in the inputs' dtype.

    Raises
    ------
    RuntimeError
        Outside a process group.
    TypeError, ValueError
        For inputs of the wrong type, dtype, shape or value, as
        ``chunked_attention``; for an unknown layout, or an odd ``T_r`` with
        zigzag.

    Notes
    -----
    Communication overlaps computation: at each step the send of the
    current block and the receive of the next are posted (``isend`` and
    ``irecv``) before the current block is folded in. Each rank sends
    ``P - 1`` blocks of ``B h_kv T_r (d_k + d_v)`` numbers
    (``ring_bytes_per_rank``). Keys and values travel as one tensor, so each
    step is one message. float16 and bfloat16 are computed in float32.

    Examples
    --------
    Run in every rank of a group, here four processes started by ``spawn``
    (``demos.max_error`` shards a sequence, calls this function and compares
    its rows with SDPA on the whole sequence):

    >>> from selfattention.distributed import spawn
    >>> from selfattention.distributed.demos import max_error
    >>> errors = spawn(max_error, 4, "ring", "zigzag", True)  # doctest: +SKIP
    >>> max(errors) < 1e-12  # doctest: +SKIP
    True

    Outside a process group it says so:

    >>> import torch
    >>> q = torch.zeros(1, 2, 4, 8)  # (B, h, T_r, d_k)
    >>> ring_attention(q, q, q)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    RuntimeError: no process group: call this inside one, ...
    """
    b, h, h_kv, t_r, d_k, d_v = check_qkv(query, key, value)
    causal = check_flag(causal, "causal")
    scale = None if scale is None else check_real(scale, "scale", kind="a float or None")
    layout = check_layout(layout)
    if layout == "zigzag" and t_r % 2:
        raise ValueError(
            f"with layout='zigzag' a rank holds two equal chunks, so T_r must be even, got {t_r}"
        )
    group, rank, world = group_info(group)
    scale = 1.0 / math.sqrt(d_k) if scale is None else float(scale)
    out_dtype = query.dtype
    work = torch.float32 if out_dtype in (torch.float16, torch.bfloat16) else out_dtype
    g = h // h_kv

    mine = rank_chunks(world, rank, layout)
    n_pieces = len(mine)
    piece = t_r // n_pieces
    # (B, h_kv, g, T_r, d_k): query head i = kv head i // g, group member i % g.
    q = (query.to(work) * scale).reshape(b, h_kv, g, t_r, d_k)
    q_pieces = q.split(piece, dim=3)
    lowest = torch.finfo(work).min
    state = [
        (
            torch.full((b, h_kv, g, piece, 1), lowest, dtype=work, device=q.device),
            torch.zeros((b, h_kv, g, piece, d_v + 1), dtype=work, device=q.device),
        )
        for _ in mine
    ]
    # Keys and values travel as one message, (B, h_kv, T_r, d_k + d_v).
    block = torch.cat([key, value], dim=-1).contiguous()
    send_to = dist.get_global_rank(group, (rank + 1) % world)
    receive_from = dist.get_global_rank(group, (rank - 1) % world)
    for step in range(world):
        source = (rank - step) % world
        requests = []
        if step < world - 1:  # post the next block's transfer before computing
            incoming = torch.empty_like(block)
            requests = [
                dist.isend(block, dst=send_to, group=group),
                dist.irecv(incoming, src=receive_from, group=group),
            ]
            note_sent(block.numel() * block.element_size())
        kv = block.to(work)
        ones = torch.ones(b, h_kv, t_r, 1, dtype=work, device=kv.device)
        k_all = kv[..., :d_k].unsqueeze(2)  # (B, h_kv, 1, T_r, d_k)
        v1_all = torch.cat([kv[..., d_k:], ones], dim=-1).unsqueeze(
            2
        )  # (B, h_kv, 1, T_r, d_v + 1)
        for i, q_chunk in enumerate(mine):
            m, acc = state[i]
            for j, k_chunk in enumerate(rank_chunks(world, source, layout)):
                if causal and k_chunk > q_chunk:
                    continue  # every key lies after every query: nothing to see
                keys = slice(j * piece, (j + 1) * piece)
                m, acc = _fold(
                    m,
                    acc,
                    q_pieces[i],
                    k_all[..., keys, :],
                    v1_all[..., keys, :],
                    hide_future=causal and k_chunk == q_chunk,
                )
                note_tile(q_chunk, k_chunk, piece * piece)
            state[i] = (m, acc)
        for request in requests:
            request.wait()
        if requests:
            block = incoming
    # Every query saw at least its own key, so every running sum is positive.
    outs = [acc[..., :d_v] / acc[..., d_v:] for _, acc in state]
    out = torch.cat(outs, dim=3).reshape(b, h, t_r, d_v)
    if not torch.isfinite(out).all():
        raise ValueError(
            f"the scores Q K^T * scale overflow {work} (query {tuple(query.shape)}, "
            f"scale {scale}); rescale the inputs or compute in float64"
        )
    return out.to(out_dtype)
