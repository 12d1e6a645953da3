"""How one sequence is cut over the ranks of a group: the contiguous and zigzag layouts.

With ``P`` ranks (``N_dev`` in the book's notation) a sequence of ``T``
tokens is cut into equal chunks along its sequence axis:

- ``"contiguous"``: ``P`` chunks of ``T / P`` tokens; rank ``r`` holds
  chunk ``r``;
- ``"zigzag"``: ``2 P`` chunks of ``T / (2 P)`` tokens; rank ``r`` holds
  chunks ``r`` and ``2 P - 1 - r``, in that order, which balances the causal
  work of ring attention (chapter 19).

``shard_sequence`` cuts, ``gather_sequence`` undoes it, and ``ring_tiles``
lists the (query chunk, key chunk) tiles of scores that ring attention
computes on one rank.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .._checks import check_flag, check_positive_int, describe

LAYOUTS = ("contiguous", "zigzag")


def check_layout(layout: object) -> str:
    """Return ``layout`` if it is ``"contiguous"`` or ``"zigzag"``, else raise."""
    if not isinstance(layout, str):
        raise TypeError(f"layout must be 'contiguous' or 'zigzag', got {describe(layout)}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be 'contiguous' or 'zigzag', got {layout!r}")
    return layout


def _check_rank(world_size: object, rank: object) -> tuple[int, int]:
    world = check_positive_int(world_size, "world_size")
    index = check_positive_int(rank, "rank", allow_zero=True)
    if index >= world:
        raise ValueError(f"rank must be in 0 .. world_size - 1 = {world - 1}, got {index}")
    return world, index


def num_chunks(world_size: int, layout: str = "contiguous") -> int:
    """How many equal chunks a layout cuts the sequence into: ``P`` or ``2 P``.

    Examples
    --------
    >>> num_chunks(4, "contiguous"), num_chunks(4, "zigzag")
    (4, 8)
    """
    world = check_positive_int(world_size, "world_size")
    return world if check_layout(layout) == "contiguous" else 2 * world


def rank_chunks(world_size: int, rank: int, layout: str = "contiguous") -> tuple[int, ...]:
    """The chunks of the sequence that rank ``rank`` holds, in the order it holds them.

    Examples
    --------
    >>> rank_chunks(4, 1, "contiguous")
    (1,)
    >>> rank_chunks(4, 1, "zigzag")  # chunks r and 2 P - 1 - r of 2 P
    (1, 6)
    """
    world, index = _check_rank(world_size, rank)
    if check_layout(layout) == "contiguous":
        return (index,)
    return (index, 2 * world - 1 - index)


def _sequence_dim(x: torch.Tensor, dim: int) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"dim must be an int, got {describe(dim)}")
    if not -x.ndim <= dim < x.ndim:
        raise ValueError(f"dim={dim} is out of range for a tensor of shape {tuple(x.shape)}")
    return dim % x.ndim


def shard_sequence(
    x: torch.Tensor, world_size: int, rank: int, layout: str = "contiguous", dim: int = -2
) -> torch.Tensor:
    """Rank ``rank``'s part of the sequence ``x`` under ``layout``.

    Parameters
    ----------
    x : torch.Tensor
        The whole sequence, ``T`` long along ``dim`` (``(B, h, T, d)`` with
        the default ``dim=-2``).
    world_size : int
        ``P``, the number of ranks.
    rank : int
        Which rank's part to return, ``0 .. P - 1``.
    layout : {"contiguous", "zigzag"}
        Contiguous: chunk ``r`` of ``P``. Zigzag: chunks ``r`` and
        ``2 P - 1 - r`` of ``2 P``, concatenated.
    dim : int, default -2
        The sequence axis.

    Returns
    -------
    torch.Tensor
        ``x`` with ``T / P`` entries along ``dim`` (a copy for zigzag, a
        view for contiguous).

    Raises
    ------
    TypeError
        If ``x`` is not a tensor, or an argument has the wrong type.
    ValueError
        If ``T`` does not divide into the layout's ``P`` or ``2 P`` chunks,
        or ``rank`` or ``dim`` is out of range.

    Examples
    --------
    >>> import torch
    >>> x = torch.arange(8).reshape(8, 1)  # (T, 1), T = 8
    >>> shard_sequence(x, 2, 0, "zigzag").flatten().tolist()  # chunks 0 and 3 of 4
    [0, 1, 6, 7]
    >>> shard_sequence(x, 2, 1, "contiguous").flatten().tolist()
    [4, 5, 6, 7]
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {describe(x)}")
    world, index = _check_rank(world_size, rank)
    layout = check_layout(layout)
    axis = _sequence_dim(x, dim)
    n = num_chunks(world, layout)
    length = x.shape[axis]
    if length % n:
        raise ValueError(
            f"x has T = {length} along dim {dim}, which does not divide into the "
            f"{n} equal chunks of layout {layout!r} with world_size={world}"
        )
    pieces = x.chunk(n, dim=axis)
    held = [pieces[c] for c in rank_chunks(world, index, layout)]
    return held[0] if len(held) == 1 else torch.cat(held, dim=axis)


def gather_sequence(
    chunks: Sequence[torch.Tensor], layout: str = "contiguous", dim: int = -2
) -> torch.Tensor:
    """Undo ``shard_sequence``: the whole sequence from every rank's part, in rank order.

    Parameters
    ----------
    chunks : sequence of torch.Tensor
        Rank 0's part, rank 1's part, ... (``P`` tensors of one shape).
    layout : {"contiguous", "zigzag"}
        The layout the parts were cut with.
    dim : int, default -2
        The sequence axis.

    Returns
    -------
    torch.Tensor
        The sequence in its original order, ``P`` times as long along ``dim``.

    Raises
    ------
    TypeError
        If ``chunks`` is not a non-empty sequence of tensors.
    ValueError
        If the parts differ in shape, or a zigzag part has an odd length.

    Examples
    --------
    >>> import torch
    >>> x = torch.arange(8).reshape(8, 1)  # (T, 1)
    >>> parts = [shard_sequence(x, 2, r, "zigzag") for r in range(2)]
    >>> torch.equal(gather_sequence(parts, "zigzag"), x)
    True
    """
    if isinstance(chunks, torch.Tensor) or not isinstance(chunks, Sequence) or not chunks:
        raise TypeError(
            f"chunks must be a non-empty list of tensors, one per rank, got {describe(chunks)}"
        )
    for index, chunk in enumerate(chunks):
        if not isinstance(chunk, torch.Tensor):
            raise TypeError(f"chunks[{index}] must be a torch.Tensor, got {describe(chunk)}")
    layout = check_layout(layout)
    axis = _sequence_dim(chunks[0], dim)
    shape = tuple(chunks[0].shape)
    for index, chunk in enumerate(chunks):
        if tuple(chunk.shape) != shape:
            raise ValueError(
                f"every rank's part must have one shape: chunks[0] is {shape}, "
                f"chunks[{index}] is {tuple(chunk.shape)}"
            )
    world = len(chunks)
    if layout == "contiguous":
        return torch.cat(list(chunks), dim=axis)
    if shape[axis] % 2:
        raise ValueError(
            f"a zigzag part holds two equal chunks, so its length along dim {dim} "
            f"must be even, got {shape[axis]}"
        )
    ordered: list[torch.Tensor | None] = [None] * (2 * world)
    for rank, chunk in enumerate(chunks):
        first, second = chunk.chunk(2, dim=axis)
        low, high = rank_chunks(world, rank, layout)
        ordered[low], ordered[high] = first, second
    return torch.cat(ordered, dim=axis)  # type: ignore[arg-type]


def ring_tiles(
    world_size: int, rank: int, layout: str = "contiguous", causal: bool = True
) -> list[tuple[int, int]]:
    """The tiles of scores that ring attention computes on ``rank``, in ring order.

    A tile is one (query chunk, key chunk) pair of the layout's chunks (of
    ``T / P`` tokens for contiguous, ``T / (2 P)`` for zigzag). At step ``t``
    rank ``r`` holds the keys of rank ``(r - t) mod P``; with ``causal`` a
    tile whose keys all lie after its queries (key chunk > query chunk) is
    skipped, and a diagonal tile (equal chunks) is computed with a mask.

    Examples
    --------
    >>> ring_tiles(2, 0, "contiguous")  # rank 0 skips rank 1's keys
    [(0, 0)]
    >>> len(ring_tiles(2, 1, "contiguous")), len(ring_tiles(2, 0, "zigzag"))
    (2, 5)
    """
    world, index = _check_rank(world_size, rank)
    layout = check_layout(layout)
    causal = check_flag(causal, "causal")
    mine = rank_chunks(world, index, layout)
    tiles = []
    for step in range(world):
        source = (index - step) % world
        for q_chunk in mine:
            for k_chunk in rank_chunks(world, source, layout):
                if not causal or k_chunk <= q_chunk:
                    tiles.append((q_chunk, k_chunk))
    return tiles
