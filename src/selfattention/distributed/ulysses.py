"""All-to-all sequence parallelism (DeepSpeed-Ulysses, Jacobs et al., 2023).

Each of ``P`` ranks holds ``T / P`` tokens of every head. One all-to-all
swaps the split: afterwards each rank holds ``h / P`` heads of the whole
sequence, attends over all ``T`` tokens locally (``chunked_attention``,
chapter 12), and a second all-to-all swaps the output back to the sequence
split. The number of heads limits ``P``: ``h`` and ``h_kv`` must divide by it.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from .._checks import check_flag, check_real
from ..layers.chunked import chunked_attention
from .ring import check_qkv, group_info
from .traffic import note_sent


def _all_to_all(x: torch.Tensor, group: object, world: int) -> torch.Tensor:
    """Swap ``x`` (P, ...): part ``j`` goes to rank ``j``; part ``j`` of the result is from it."""
    x = x.contiguous()
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x, group=group)
    note_sent(x.numel() * x.element_size() * (world - 1) // world)  # its own part stays
    return out


def ulysses_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
    group: object = None,
) -> torch.Tensor:
    """This rank's rows of attention over the whole sequence, by two all-to-alls.

    Call it on every rank of the group at once, each with its contiguous
    part of the sequence (``shard_sequence(..., layout="contiguous")``).

    Parameters
    ----------
    query : torch.Tensor
        ``(B, h, T_r, d_k)``, this rank's queries.
    key, value : torch.Tensor
        ``(B, h_kv, T_r, d_k)`` and ``(B, h_kv, T_r, d_v)``; ``h`` a multiple
        of ``h_kv`` (grouped-query attention).
    causal : bool, default False
        Query ``i`` sees keys ``j <= i`` of the whole sequence.
    scale : float, optional
        Multiplies the scores; defaults to ``1 / sqrt(d_k)``.
    group : ProcessGroup, optional
        The ranks; the default group if None.

    Returns
    -------
    torch.Tensor
        ``(B, h, T_r, d_v)``, this rank's rows of attention.

    Raises
    ------
    RuntimeError
        Outside a process group.
    ValueError
        If ``h`` or ``h_kv`` does not divide by the group's size ``P``
        (each rank must get whole heads), or for inputs as ``ring_attention``.

    Notes
    -----
    Each all-to-all sends ``(P - 1) / P`` of what it is given
    (``ulysses_bytes_per_rank``): the queries, keys and values on the way
    in, the output on the way out.

    Examples
    --------
    Run in every rank of a group, here four processes started by ``spawn``:

    >>> from selfattention.distributed import spawn
    >>> from selfattention.distributed.demos import max_error
    >>> errors = spawn(max_error, 4, "ulysses", "contiguous", True)  # doctest: +SKIP
    >>> max(errors) < 1e-12  # doctest: +SKIP
    True
    """
    b, h, h_kv, t_r, d_k, d_v = check_qkv(query, key, value)
    causal = check_flag(causal, "causal")
    scale = None if scale is None else check_real(scale, "scale", kind="a float or None")
    group, _, world = group_info(group)
    for name, heads in (("h", h), ("h_kv", h_kv)):
        if heads % world:
            raise ValueError(
                f"ulysses_attention gives each rank whole heads, so {name} must divide by "
                f"the world size: {name} = {heads}, world size {world} (query "
                f"{tuple(query.shape)}, key {tuple(key.shape)})"
            )
    t = t_r * world

    def parts(x: torch.Tensor) -> torch.Tensor:
        # (B, heads, T_r, w) -> (P, B * heads/P * T_r * w): part j, heads of rank j.
        heads, width = x.shape[1], x.shape[3]
        split = x.reshape(b, world, heads // world, t_r, width).transpose(0, 1)
        return split.reshape(world, -1)

    def whole(x: torch.Tensor, heads: int, width: int) -> torch.Tensor:
        # (P, B * heads/P * T_r * w), part j = sequence chunk j -> (B, heads/P, T, w).
        split = x.reshape(world, b, heads // world, t_r, width)
        return split.permute(1, 2, 0, 3, 4).reshape(b, heads // world, t, width)

    # First all-to-all: queries, keys and values in one message per pair of ranks.
    sizes = [
        b * h // world * t_r * d_k,
        b * h_kv // world * t_r * d_k,
        b * h_kv // world * t_r * d_v,
    ]
    sent = torch.cat([parts(query), parts(key), parts(value)], dim=1)  # (P, sum(sizes))
    got_q, got_k, got_v = _all_to_all(sent, group, world).split(sizes, dim=1)
    q = whole(got_q, h, d_k)  # (B, h/P, T, d_k)
    k = whole(got_k, h_kv, d_k)  # (B, h_kv/P, T, d_k)
    v = whole(got_v, h_kv, d_v)  # (B, h_kv/P, T, d_v)
    g = h // h_kv
    # Grouped-query attention by broadcasting: (B, h_kv/P, g, T, .) against (B, h_kv/P, 1, T, .).
    local = chunked_attention(
        q.reshape(b, h_kv // world, g, t, d_k),
        k.unsqueeze(2),
        v.unsqueeze(2),
        causal=causal,
        scale=scale,
    ).reshape(b, h // world, t, d_v)
    # Back: part j = sequence chunk j of my heads, for rank j.
    parts = local.reshape(b, h // world, world, t_r, d_v).permute(2, 0, 1, 3, 4)
    got = _all_to_all(parts, group, world)  # (P, B, h/P, T_r, d_v): part j = heads of rank j
    return got.transpose(0, 1).reshape(b, h, t_r, d_v)
