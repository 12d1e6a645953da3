"""One sequence over several processes: ring and all-to-all attention on torch.distributed.

Chapter 19 builds these and proves them equal to attention over the whole
sequence:

- ``spawn``: run a function in several processes that form one ``gloo``
  group on this machine (127.0.0.1), and collect the results in rank order;
- ``shard_sequence`` and ``gather_sequence``: cut a sequence into the
  ranks' parts and put it back, in the contiguous or the zigzag layout;
- ``ring_attention`` (Liu et al., 2023): key/value blocks travel round a
  ring while each rank folds them into its queries' online softmax;
- ``ulysses_attention`` (Jacobs et al., 2023): an all-to-all turns the
  sequence split into a head split, each rank attends over the whole
  sequence for its heads, and a second all-to-all turns it back;
- ``record`` and the byte formulas: what each rank sends and computes.

The same code runs on GPUs with ``backend="nccl"``, one process per GPU
(started by ``torchrun``); only ``spawn`` is tied to gloo and one machine.
Import this package where it is used (``import selfattention`` does not
import it); importing it starts no process.
"""

from __future__ import annotations

from .launch import RankError, spawn
from .layout import gather_sequence, num_chunks, rank_chunks, ring_tiles, shard_sequence
from .ring import ring_attention
from .traffic import CommLog, record, ring_bytes_per_rank, ulysses_bytes_per_rank
from .ulysses import ulysses_attention

__all__ = [
    "CommLog",
    "RankError",
    "gather_sequence",
    "num_chunks",
    "rank_chunks",
    "record",
    "ring_attention",
    "ring_bytes_per_rank",
    "ring_tiles",
    "shard_sequence",
    "spawn",
    "ulysses_attention",
    "ulysses_bytes_per_rank",
]
