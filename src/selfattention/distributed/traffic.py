"""What the distributed attention functions send and compute, recorded and predicted.

``record()`` is a context manager: inside it, ``ring_attention`` and
``ulysses_attention`` note every message they send to another rank (its
bytes) and every tile of scores they compute, in the calling process. The
formulas ``ring_bytes_per_rank`` and ``ulysses_bytes_per_rank`` predict the
bytes, so a test or the chapter can compare the two.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .._checks import check_positive_int

_ACTIVE: list[CommLog] = []


@dataclass
class CommLog:
    """The traffic and the work of one rank, recorded by ``record()``.

    Attributes
    ----------
    bytes_sent : int
        Bytes this rank sent to other ranks (an all-to-all's part that a
        rank keeps for itself is not sent, and not counted).
    messages : int
        Point-to-point sends, plus one per all-to-all call.
    tiles : list of (int, int)
        The (query chunk, key chunk) tiles of scores ``ring_attention``
        computed, in order (see ``ring_tiles``).
    scores : int
        How many scores those tiles hold, per batch entry and query head
        (masked ones in a diagonal tile included).

    Examples
    --------
    >>> log = CommLog()
    >>> log.bytes_sent, log.messages, log.tiles, log.scores
    (0, 0, [], 0)
    """

    bytes_sent: int = 0
    messages: int = 0
    tiles: list[tuple[int, int]] = field(default_factory=list)
    scores: int = 0


@contextmanager
def record() -> Iterator[CommLog]:
    """Record what the package's distributed functions send and compute inside the block.

    Examples
    --------
    >>> with record() as log:
    ...     pass  # ring_attention(...) inside a process group
    >>> log.bytes_sent
    0
    """
    log = CommLog()
    _ACTIVE.append(log)
    try:
        yield log
    finally:
        _ACTIVE.remove(log)


def note_sent(nbytes: int) -> None:
    """Add one message of ``nbytes`` bytes to every active log."""
    for log in _ACTIVE:
        log.bytes_sent += nbytes
        log.messages += 1


def note_tile(q_chunk: int, k_chunk: int, scores: int) -> None:
    """Add one computed tile of ``scores`` scores to every active log."""
    for log in _ACTIVE:
        log.tiles.append((q_chunk, k_chunk))
        log.scores += scores


def _divide(total: int, parts: int, what: str) -> int:
    if total % parts:
        raise ValueError(f"{what} = {total} does not divide by world_size = {parts}")
    return total // parts


def ring_bytes_per_rank(
    world_size: int,
    batch: int,
    num_kv_heads: int,
    seq_len: int,
    d_k: int,
    d_v: int,
    element_size: int,
) -> int:
    """Bytes each rank sends in one ring attention: ``(P - 1) B h_kv (T / P) (d_k + d_v) e``.

    Each of the ``P - 1`` steps passes one block of keys and values,
    ``T / P`` tokens of ``h_kv`` heads, to the next rank; the last block is
    not passed on. Causal or not, the same blocks travel.

    Examples
    --------
    >>> ring_bytes_per_rank(4, 1, 4, 256, 32, 32, 8)  # the issue's prototype
    393216
    """
    world = check_positive_int(world_size, "world_size")
    sizes = [
        check_positive_int(value, name)
        for value, name in (
            (batch, "batch"),
            (num_kv_heads, "num_kv_heads"),
            (seq_len, "seq_len"),
            (d_k, "d_k"),
            (d_v, "d_v"),
            (element_size, "element_size"),
        )
    ]
    b, h_kv, t, dk, dv, e = sizes
    chunk = _divide(t, world, "seq_len")
    return (world - 1) * b * h_kv * chunk * (dk + dv) * e


def ulysses_bytes_per_rank(
    world_size: int,
    batch: int,
    num_heads: int,
    num_kv_heads: int,
    seq_len: int,
    d_k: int,
    d_v: int,
    element_size: int,
) -> int:
    """Bytes each rank sends in one all-to-all (Ulysses) attention.

    The first all-to-all sends queries, keys and values, the second the
    output; of each, a rank keeps the ``1 / P`` that is its own and sends
    the rest: ``(P - 1) / P * B (T / P) (h d_k + h_kv (d_k + d_v) + h d_v) e``.

    Examples
    --------
    >>> ulysses_bytes_per_rank(4, 1, 4, 4, 256, 32, 32, 8)  # the prototype's sizes
    196608
    """
    world = check_positive_int(world_size, "world_size")
    b, h, h_kv, t, dk, dv, e = (
        check_positive_int(value, name)
        for value, name in (
            (batch, "batch"),
            (num_heads, "num_heads"),
            (num_kv_heads, "num_kv_heads"),
            (seq_len, "seq_len"),
            (d_k, "d_k"),
            (d_v, "d_v"),
            (element_size, "element_size"),
        )
    )
    chunk = _divide(t, world, "seq_len")
    heads = _divide(h, world, "num_heads")
    kv_heads = _divide(h_kv, world, "num_kv_heads")
    per_peer = b * chunk * (heads * dk + kv_heads * (dk + dv) + heads * dv) * e
    return (world - 1) * per_peer
