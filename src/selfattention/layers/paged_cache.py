"""A paged key/value cache: blocks, block tables and copy-on-write (chapter 18 builds it).

A serving engine decodes many sequences at once, each of its own length.
Instead of one contiguous cache per sequence, reserved at the longest length
it might reach, the keys and values live in a pool of ``N_blk`` blocks of
``b`` token slots each, and every sequence has a *block table*: the list of
the blocks that hold its positions ``0 .. b - 1``, ``b .. 2b - 1`` and so on,
like the page table of virtual memory (Kwon et al., 2023, the vLLM paper).

- :class:`BlockAllocator` keeps the bookkeeping: the free list, the block
  tables, the lengths and a reference count per block. It holds no tensors,
  so several layers can share one (their pools then use the same block
  numbers, as in vLLM).
- :class:`PagedKVCache` is one layer's pool of keys and values, indexed by
  the allocator's block tables.
- :func:`~selfattention.paged_attention` is one decoding step for a ragged batch: each
  query reads its sequence's keys and values through the block table.
- :class:`OutOfBlocksError` is what an append raises when the pool is full;
  nothing has changed then.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import torch

from .._checks import (
    check_finite,
    check_float_dtype,
    check_float_tensor,
    check_int,
    check_positive_int,
    check_real,
    check_same_dtype_device,
    describe,
)
from .attention_torch import masked_softmax


class OutOfBlocksError(RuntimeError):
    """The pool has fewer free blocks than an append needs; nothing was changed.

    A scheduler catches it and waits (or preempts a sequence) until
    :meth:`BlockAllocator.free` returns blocks.

    Examples
    --------
    >>> allocator = BlockAllocator(num_blocks=1, block_size=2)
    >>> seq = allocator.new_sequence()
    >>> allocator.reserve([seq], 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    selfattention.layers.paged_cache.OutOfBlocksError: ... needs 2 blocks, 1 is free; ...
    """


def blocks_for(num_tokens: int, block_size: int) -> int:
    """The blocks that ``num_tokens`` positions fill, ``ceil(num_tokens / block_size)``.

    Examples
    --------
    >>> blocks_for(0, 4), blocks_for(1, 4), blocks_for(4, 4), blocks_for(5, 4)
    (0, 1, 1, 2)
    """
    num_tokens = check_positive_int(num_tokens, "num_tokens", allow_zero=True)
    block_size = check_positive_int(block_size, "block_size")
    return -(-num_tokens // block_size)


class BlockAllocator:
    """The bookkeeping of a paged cache: free list, block tables, lengths, reference counts.

    Blocks are numbered ``0 .. num_blocks - 1``. A sequence's block table
    lists the blocks that hold its positions in order, so position ``p``
    lives in slot ``p % block_size`` of block ``table[p // block_size]``.
    A block shared by several sequences (after :meth:`fork`) has a
    reference count above 1; the first append into a shared block that is
    only partly filled copies it first (copy-on-write), in every
    :class:`PagedKVCache` that uses this allocator.

    Every method checks its arguments before it changes anything; a call
    that raises leaves the tables, counts and free list as they were.

    Parameters
    ----------
    num_blocks : int
        Blocks in the pool, ``N_blk``.
    block_size : int
        Token slots per block, ``b``.

    Examples
    --------
    >>> allocator = BlockAllocator(num_blocks=4, block_size=2)
    >>> a = allocator.new_sequence()
    >>> _ = allocator.reserve([a], 3)  # 3 tokens: 2 blocks, the second half full
    >>> b = allocator.fork(a)  # shares both blocks
    >>> allocator.block_table(a), allocator.block_table(b), allocator.free_blocks
    ([0, 1], [0, 1], 2)
    >>> _ = allocator.reserve([b], 1)  # b writes into shared block 1: copied first
    >>> allocator.block_table(a), allocator.block_table(b), allocator.free_blocks
    ([0, 1], [0, 2], 1)
    """

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = check_positive_int(num_blocks, "num_blocks")
        self.block_size = check_positive_int(block_size, "block_size")
        self._free: deque[int] = deque(range(self.num_blocks))
        self._refs = [0] * self.num_blocks
        self._tables: dict[int, list[int]] = {}
        self._lengths: dict[int, int] = {}
        self._next_id = 0
        self._caches: list[PagedKVCache] = []  # the layers whose pools follow these tables

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_blocks={self.num_blocks}, block_size="
            f"{self.block_size}, sequences={len(self._tables)}, free_blocks={self.free_blocks})"
        )

    @property
    def free_blocks(self) -> int:
        """The number of blocks on the free list."""
        return len(self._free)

    @property
    def sequences(self) -> list[int]:
        """The ids of the sequences alive now (made and not freed), in order."""
        return sorted(self._tables)

    def _check_seq(self, seq: object, name: str = "seq") -> int:
        seq = check_int(seq, name)
        if seq not in self._tables:
            raise ValueError(
                f"{name}={seq} is not a live sequence of this cache (alive: "
                f"{self.sequences}); make one with new_sequence()"
            )
        return seq

    def length(self, seq: int) -> int:
        """How many positions sequence ``seq`` holds.

        Examples
        --------
        >>> allocator = BlockAllocator(4, 2)
        >>> seq = allocator.new_sequence()
        >>> _ = allocator.reserve([seq], 3)
        >>> allocator.length(seq)
        3
        """
        return self._lengths[self._check_seq(seq)]

    def block_table(self, seq: int) -> list[int]:
        """The blocks of sequence ``seq``, in order (a copy).

        Examples
        --------
        >>> allocator = BlockAllocator(4, 2)
        >>> seq = allocator.new_sequence()
        >>> _ = allocator.reserve([seq], 5)
        >>> allocator.block_table(seq)
        [0, 1, 2]
        """
        return list(self._tables[self._check_seq(seq)])

    def refcount(self, block: int) -> int:
        """How many block tables hold ``block`` (0 for a free block).

        Examples
        --------
        >>> allocator = BlockAllocator(4, 2)
        >>> seq = allocator.new_sequence()
        >>> _ = allocator.reserve([seq], 1)
        >>> _ = allocator.fork(seq)
        >>> allocator.refcount(0), allocator.refcount(1)
        (2, 0)
        """
        block = check_int(block, "block")
        if not 0 <= block < self.num_blocks:
            raise ValueError(f"block must be in 0 .. {self.num_blocks - 1}, got {block}")
        return self._refs[block]

    def new_sequence(self) -> int:
        """A new sequence id, with an empty block table and length 0.

        Examples
        --------
        >>> allocator = BlockAllocator(4, 2)
        >>> allocator.new_sequence(), allocator.new_sequence()
        (0, 1)
        """
        seq = self._next_id
        self._next_id += 1
        self._tables[seq] = []
        self._lengths[seq] = 0
        return seq

    def fork(self, seq: int) -> int:
        """A new sequence that shares every block of ``seq`` (reference counts + 1).

        Nothing is copied now; the first append into a shared block that is
        partly filled copies that block (copy-on-write).

        Examples
        --------
        >>> allocator = BlockAllocator(4, 2)
        >>> parent = allocator.new_sequence()
        >>> _ = allocator.reserve([parent], 3)
        >>> child = allocator.fork(parent)
        >>> allocator.block_table(child), allocator.length(child), allocator.free_blocks
        ([0, 1], 3, 2)
        """
        seq = self._check_seq(seq)
        child = self.new_sequence()
        self._tables[child] = list(self._tables[seq])
        self._lengths[child] = self._lengths[seq]
        for block in self._tables[seq]:
            self._refs[block] += 1
        return child

    def free(self, seq: int) -> list[int]:
        """End sequence ``seq``: return the blocks whose reference count drops to 0.

        Those blocks go back on the free list (at its end, so the most
        recently freed are reused last); blocks still shared stay.

        Examples
        --------
        >>> allocator = BlockAllocator(4, 2)
        >>> parent = allocator.new_sequence()
        >>> _ = allocator.reserve([parent], 3)
        >>> child = allocator.fork(parent)
        >>> allocator.free(parent), allocator.free(child), allocator.free_blocks
        ([], [0, 1], 4)
        """
        seq = self._check_seq(seq)
        freed = []
        for block in self._tables.pop(seq):
            self._refs[block] -= 1
            if self._refs[block] == 0:
                self._release(block)
                freed.append(block)
        del self._lengths[seq]
        return freed

    def _take(self) -> int:
        """Take the first free block (the prefix cache forgets what it held here)."""
        return self._free.popleft()

    def _release(self, block: int) -> None:
        """Put an unused block back on the free list."""
        self._free.append(block)

    def blocks_needed(self, seqs: Sequence[int], num_tokens: int | Sequence[int]) -> int:
        """Free blocks that ``reserve(seqs, num_tokens)`` would take; changes nothing.

        New blocks, plus one copy for each sequence whose last block is
        partly filled and still shared when its turn comes (the copies are
        counted in order, as ``reserve`` makes them: once one of two sharers
        has copied, the other owns the block alone).

        Examples
        --------
        >>> allocator = BlockAllocator(8, 4)
        >>> a = allocator.new_sequence()
        >>> _ = allocator.reserve([a], 6)
        >>> b = allocator.fork(a)
        >>> allocator.blocks_needed([a], 1), allocator.blocks_needed([a, b], 1)
        (1, 1)
        >>> allocator.blocks_needed([a], 3)  # one copy, then one new block
        2
        """
        seqs, counts = self._check_reserve(seqs, num_tokens)
        return self._plan(seqs, counts)

    def _check_reserve(
        self, seqs: Sequence[int], num_tokens: int | Sequence[int]
    ) -> tuple[list[int], list[int]]:
        if isinstance(seqs, (int, str, bytes)) or not isinstance(seqs, Sequence):
            raise TypeError(f"seqs must be a list of sequence ids, got {describe(seqs)}")
        checked = [self._check_seq(seq, f"seqs[{i}]") for i, seq in enumerate(seqs)]
        if len(set(checked)) != len(checked):
            raise ValueError(f"seqs must not repeat a sequence, got {checked}")
        if isinstance(num_tokens, Sequence) and not isinstance(num_tokens, (str, bytes)):
            if len(num_tokens) != len(checked):
                raise ValueError(
                    f"num_tokens has {len(num_tokens)} entries but seqs has {len(checked)}"
                )
            counts = [
                check_positive_int(n, f"num_tokens[{i}]", allow_zero=True)
                for i, n in enumerate(num_tokens)
            ]
        else:
            counts = [check_positive_int(num_tokens, "num_tokens", allow_zero=True)] * len(checked)
        return checked, counts

    def _plan(self, seqs: list[int], counts: list[int]) -> int:
        """Blocks needed, simulated on a copy of the reference counts."""
        refs: dict[int, int] = {}  # the counts that planned copies would change
        needed = 0
        for seq, count in zip(seqs, counts, strict=True):
            table, length = self._tables[seq], self._lengths[seq]
            if count == 0:
                continue
            if length % self.block_size and self._refs_in(refs, table[-1]) > 1:
                refs[table[-1]] = self._refs_in(refs, table[-1]) - 1  # copy-on-write
                needed += 1
            needed += blocks_for(length + count, self.block_size) - len(table)
        return needed

    def _refs_in(self, refs: dict[int, int], block: int) -> int:
        return refs[block] if block in refs else self._refs[block]

    def reserve(self, seqs: Sequence[int], num_tokens: int | Sequence[int]) -> list[torch.Tensor]:
        """Make room for ``num_tokens`` more positions in each sequence of ``seqs``.

        All or nothing: if the free list is too short for the whole batch,
        :class:`OutOfBlocksError` is raised and nothing changes. Otherwise
        each sequence first copies its last block if that block is partly
        filled and shared (copy-on-write, in every cache of this allocator),
        then takes new blocks from the free list as its positions need them.

        Parameters
        ----------
        seqs : list of int
            Live sequences, each at most once.
        num_tokens : int or list of int
            New positions per sequence (one number for all, or one each).

        Returns
        -------
        list of torch.Tensor
            For each sequence, the slots of its new positions, ``(num_tokens,)``
            int64: slot ``block * block_size + offset`` of the pool flattened
            to ``(num_blocks * block_size, ...)`` (vLLM's "slot mapping").

        Raises
        ------
        OutOfBlocksError
            If the batch needs more blocks than are free.
        TypeError, ValueError
            For a sequence that is not alive or is repeated, or a negative count.

        Examples
        --------
        >>> allocator = BlockAllocator(num_blocks=4, block_size=2)
        >>> a, b = allocator.new_sequence(), allocator.new_sequence()
        >>> [s.tolist() for s in allocator.reserve([a, b], [3, 1])]
        [[0, 1, 2], [4]]
        >>> allocator.block_table(a), allocator.block_table(b)
        ([0, 1], [2])
        """
        seqs, counts = self._check_reserve(seqs, num_tokens)
        needed = self._plan(seqs, counts)
        if needed > self.free_blocks:
            raise OutOfBlocksError(
                f"reserving {sum(counts)} positions for sequences {seqs} needs {needed} "
                f"blocks, {self.free_blocks} is free; nothing was changed (free a sequence, "
                "or wait for one to finish)"
            )
        slots = []
        for seq, count in zip(seqs, counts, strict=True):
            table, length = self._tables[seq], self._lengths[seq]
            if count and length % self.block_size and self._refs[table[-1]] > 1:
                source, copy = table[-1], self._take()
                for cache in self._caches:
                    cache._copy_block(source, copy)
                self._refs[source] -= 1
                self._refs[copy] = 1
                table[-1] = copy
            while len(table) < blocks_for(length + count, self.block_size):
                block = self._take()
                self._refs[block] = 1
                table.append(block)
            positions = torch.arange(length, length + count)  # (num_tokens,)
            blocks = torch.tensor(table, dtype=torch.int64)[positions // self.block_size]
            slots.append(blocks * self.block_size + positions % self.block_size)
            self._lengths[seq] = length + count
        return slots

    def _attach(self, cache: PagedKVCache) -> None:
        self._caches.append(cache)


class PagedKVCache:
    """One attention layer's keys and values in a pool of blocks, read through block tables.

    The pool holds ``key`` and ``value`` of shape ``(num_blocks, block_size,
    num_kv_heads, head_dim)``: block ``n``, slot ``s``. A sequence's
    positions are spread over the blocks of its block table, in order, so a
    sequence reserves at most ``block_size - 1`` slots it does not use,
    however long it grows. The tables, lengths and reference counts live in
    a :class:`BlockAllocator`; pass one ``allocator`` to the caches of every
    layer of a model so that they share the tables (and the prefix cache of
    :class:`~selfattention.PrefixCachingAllocator`).

    Methods follow :class:`~selfattention.KVCache`: every argument is
    checked before anything changes, and an append that does not fit raises
    :class:`OutOfBlocksError` and changes nothing.

    Parameters
    ----------
    num_blocks : int
        Blocks in the pool, ``N_blk``.
    block_size : int
        Token slots per block, ``b``.
    num_kv_heads : int
        Key/value heads, ``h_kv``.
    head_dim : int
        Width of one key and one value, ``d_k``.
    dtype : torch.dtype, default torch.float32
        The pool's floating-point dtype.
    device : torch.device or str, optional
        The pool's device (default: the CPU).
    allocator : BlockAllocator, optional
        Shared bookkeeping; a new one of ``num_blocks`` and ``block_size``
        by default. If given, its sizes must match.

    Examples
    --------
    >>> import torch
    >>> cache = PagedKVCache(num_blocks=8, block_size=4, num_kv_heads=2, head_dim=3)
    >>> seq = cache.new_sequence()
    >>> cache.append(seq, torch.ones(2, 6, 3), torch.ones(2, 6, 3))  # (h_kv, t, d)
    >>> cache.block_table(seq), cache.free_blocks, cache.length(seq)
    ([0, 1], 6, 6)
    >>> key, value = cache.keys_values(seq)
    >>> tuple(key.shape)
    (2, 6, 3)
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
        allocator: BlockAllocator | None = None,
    ) -> None:
        num_blocks = check_positive_int(num_blocks, "num_blocks")
        block_size = check_positive_int(block_size, "block_size")
        self.num_kv_heads = check_positive_int(num_kv_heads, "num_kv_heads")
        self.head_dim = check_positive_int(head_dim, "head_dim")
        dtype = check_float_dtype(dtype)
        device = torch.device("cpu" if device is None else device)
        if allocator is None:
            allocator = BlockAllocator(num_blocks, block_size)
        elif not isinstance(allocator, BlockAllocator):
            raise TypeError(f"allocator must be a BlockAllocator, got {describe(allocator)}")
        elif (allocator.num_blocks, allocator.block_size) != (num_blocks, block_size):
            raise ValueError(
                f"allocator has num_blocks={allocator.num_blocks}, block_size="
                f"{allocator.block_size}; this cache was asked for {num_blocks}, {block_size}"
            )
        self.allocator = allocator
        shape = (num_blocks, block_size, self.num_kv_heads, self.head_dim)
        self.key = torch.zeros(shape, dtype=dtype, device=device)
        self.value = torch.zeros(shape, dtype=dtype, device=device)
        allocator._attach(self)

    def __repr__(self) -> str:
        return (
            f"PagedKVCache(num_blocks={self.num_blocks}, block_size={self.block_size}, "
            f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}, "
            f"free_blocks={self.free_blocks})"
        )

    @property
    def num_blocks(self) -> int:
        """Blocks in the pool, ``N_blk``."""
        return self.allocator.num_blocks

    @property
    def block_size(self) -> int:
        """Token slots per block, ``b``."""
        return self.allocator.block_size

    @property
    def free_blocks(self) -> int:
        """The number of free blocks in the pool."""
        return self.allocator.free_blocks

    @property
    def nbytes(self) -> int:
        """Bytes the pool reserves (keys and values of every block), used or not."""
        return 2 * self.key.numel() * self.key.element_size()

    def new_sequence(self) -> int:
        """A new sequence id, empty (see :meth:`BlockAllocator.new_sequence`)."""
        return self.allocator.new_sequence()

    def fork(self, seq: int) -> int:
        """A sequence sharing every block of ``seq`` (see :meth:`BlockAllocator.fork`)."""
        return self.allocator.fork(seq)

    def free(self, seq: int) -> list[int]:
        """End ``seq``; the blocks whose count drops to 0 (see :meth:`BlockAllocator.free`)."""
        return self.allocator.free(seq)

    def block_table(self, seq: int) -> list[int]:
        """The blocks of ``seq``, in order (see :meth:`BlockAllocator.block_table`)."""
        return self.allocator.block_table(seq)

    def length(self, seq: int) -> int:
        """How many positions ``seq`` holds (see :meth:`BlockAllocator.length`)."""
        return self.allocator.length(seq)

    def _check_kv(self, key: object, value: object) -> tuple[torch.Tensor, torch.Tensor]:
        """Raise unless ``key`` and ``value`` are ``(h_kv, t, d)`` tensors that fit the pool."""
        for name, tensor in (("key", key), ("value", value)):
            check_float_tensor(tensor, name)
            expected = f"(num_kv_heads, t, head_dim) = ({self.num_kv_heads}, t, {self.head_dim})"
            if tensor.dim() != 3 or (tensor.shape[0], tensor.shape[2]) != (
                self.num_kv_heads,
                self.head_dim,
            ):
                raise ValueError(f"{name} must have shape {expected}, got {tuple(tensor.shape)}")
            check_same_dtype_device(tensor, name, self.key.dtype, self.key.device, "the cache")
        if key.shape != value.shape:
            raise ValueError(
                f"key and value must have the same shape: key {tuple(key.shape)}, "
                f"value {tuple(value.shape)}"
            )
        check_finite(key, "key")
        check_finite(value, "value")
        return key, value

    def append(self, seq: int, key: torch.Tensor, value: torch.Tensor) -> None:
        """Add ``key`` and ``value`` ``(num_kv_heads, t, head_dim)`` at the end of ``seq``.

        Takes blocks from the free list as needed, copying a shared, partly
        filled last block first (copy-on-write). Everything is checked first:
        a call that raises (:class:`OutOfBlocksError` when the pool is full)
        leaves the tables, the free list and the pool as they were.

        With an allocator shared by several layers, use it for one layer only:
        a model reserves the positions once and each layer writes its own keys
        (:func:`~selfattention.paged_forward` does both).

        Raises
        ------
        OutOfBlocksError
            If the free blocks do not suffice.
        TypeError
            If ``key`` or ``value`` is not a floating-point tensor of the pool's
            dtype, or ``seq`` is not an int.
        ValueError
            If a shape does not fit ``(num_kv_heads, t, head_dim)``, the two
            differ, a tensor holds NaN or inf or is on another device, or
            ``seq`` is not alive.

        Examples
        --------
        >>> import torch
        >>> cache = PagedKVCache(num_blocks=1, block_size=4, num_kv_heads=1, head_dim=2)
        >>> seq = cache.new_sequence()
        >>> cache.append(seq, torch.ones(1, 5, 2), torch.ones(1, 5, 2))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        selfattention.layers.paged_cache.OutOfBlocksError: ... needs 2 blocks, 1 is free; ...
        >>> cache.length(seq), cache.free_blocks  # unchanged
        (0, 1)
        """
        seq = self.allocator._check_seq(seq)
        key, value = self._check_kv(key, value)
        (slots,) = self.allocator.reserve([seq], key.shape[1])
        self._write(slots, key, value)

    def _write(self, slots: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        """Store checked ``key``, ``value`` ``(h_kv, t, d)`` in the flat ``slots`` ``(t,)``."""
        slots = slots.to(self.key.device)
        flat = (-1, self.num_kv_heads, self.head_dim)
        self.key.view(flat)[slots] = key.transpose(0, 1)  # (t, h_kv, d)
        self.value.view(flat)[slots] = value.transpose(0, 1)

    def _write_last(self, seq: int, key: torch.Tensor, value: torch.Tensor) -> None:
        """Store checked keys and values for the last ``t`` positions ``seq`` has reserved."""
        length, count = self.allocator.length(seq), key.shape[1]
        positions = torch.arange(length - count, length)  # (t,)
        table = torch.tensor(self.allocator.block_table(seq), dtype=torch.int64)
        slots = table[positions // self.block_size] * self.block_size + positions % self.block_size
        self._write(slots, key, value)

    def _copy_block(self, source: int, target: int) -> None:
        """Copy-on-write: block ``target`` becomes a copy of block ``source``."""
        self.key[target] = self.key[source]
        self.value[target] = self.value[source]

    def keys_values(self, seq: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The keys and values of ``seq``, gathered in order, each ``(num_kv_heads, T, head_dim)``.

        A copy: the blocks of the table are gathered from the pool and the
        unused slots of the last block cut off.

        Examples
        --------
        >>> import torch
        >>> cache = PagedKVCache(num_blocks=4, block_size=2, num_kv_heads=1, head_dim=1)
        >>> seq = cache.new_sequence()
        >>> keys = torch.arange(3.0).view(1, 3, 1)  # (h_kv, t, d)
        >>> cache.append(seq, keys, keys)
        >>> cache.keys_values(seq)[0].flatten().tolist()
        [0.0, 1.0, 2.0]
        """
        seq = self.allocator._check_seq(seq)
        length = self.allocator.length(seq)
        table = torch.tensor(self.allocator.block_table(seq), dtype=torch.int64)
        table = table.to(self.key.device)
        shape = (-1, self.num_kv_heads, self.head_dim)
        key = self.key[table].reshape(shape)[:length]  # (T, h_kv, d)
        value = self.value[table].reshape(shape)[:length]
        return key.transpose(0, 1), value.transpose(0, 1)  # (h_kv, T, d) each


def _block_tables(cache: PagedKVCache, seqs: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch's block tables padded with block 0 ``(B, n_max)`` and lengths ``(B,)``."""
    tables = [cache.allocator.block_table(seq) for seq in seqs]
    widest = max(len(table) for table in tables)
    padded = [table + [0] * (widest - len(table)) for table in tables]
    device = cache.key.device
    lengths = [cache.allocator.length(seq) for seq in seqs]
    return (
        torch.tensor(padded, dtype=torch.int64, device=device),
        torch.tensor(lengths, dtype=torch.int64, device=device),
    )


def _paged_attend(
    query: torch.Tensor, cache: PagedKVCache, seqs: list[int], scale: float
) -> torch.Tensor:
    """Attention of checked ``query (B, h, T_q, d)``: the last ``T_q`` positions of each
    sequence, causal (bottom-right), over its keys read through its block table."""
    batch, heads, t_q, d = query.shape
    tables, lengths = _block_tables(cache, seqs)  # (B, n_max), (B,)
    # The gathered copy: every block of every table, (B, n_max, b, h_kv, d) -> (B, T_max, h_kv, d).
    # A fused kernel (vLLM's PagedAttention) reads the blocks in place instead.
    key = cache.key[tables].flatten(1, 2)  # (B, T_max, h_kv, d), T_max = n_max * b
    value = cache.value[tables].flatten(1, 2)  # (B, T_max, h_kv, d)
    groups = heads // cache.num_kv_heads
    q = query.reshape(batch, cache.num_kv_heads, groups, t_q, d)  # head r reads kv head r // g
    scores = torch.einsum("bkgqd,btkd->bkgqt", q, key) * scale  # (B, h_kv, g, T_q, T_max)
    j = torch.arange(key.shape[1], device=query.device)  # (T_max,): key positions
    i = (
        lengths[:, None] - t_q + torch.arange(t_q, device=query.device)
    )  # (B, T_q): query positions
    keep = j[None, None, :] <= i[:, :, None]  # (B, T_q, T_max): causal, and inside the length
    weights = masked_softmax(scores, keep[:, None, None])  # (B, h_kv, g, T_q, T_max)
    out = torch.einsum("bkgqt,btkd->bkgqd", weights, value)  # (B, h_kv, g, T_q, d)
    return out.reshape(batch, heads, t_q, d)


def paged_attention(
    query: torch.Tensor, cache: PagedKVCache, seqs: Sequence[int], scale: float | None = None
) -> torch.Tensor:
    """One decoding step for a ragged batch: each query attends to its own sequence's cache.

    ``query[i]`` ``(h, d)`` is the newest token of sequence ``seqs[i]``, whose
    keys and values (the new token's included: append them first) are read
    from the pool through its block table, an index, never through a
    per-sequence contiguous cache. Row ``i`` of the result equals
    ``F.scaled_dot_product_attention`` over ``cache.keys_values(seqs[i])``.
    With ``h_kv < h`` (grouped-query attention) query head ``r`` reads
    key/value head ``r // (h // h_kv)``.

    In torch the blocks are gathered into one padded tensor ``(B,
    n_max * b, h_kv, d)`` before the matrix products: a copy of every
    sequence's keys and values per step. A fused GPU kernel (vLLM's
    PagedAttention) reads each block where it lies and never makes that copy.

    Parameters
    ----------
    query : torch.Tensor, shape ``(B, h, d)``
        One new token per sequence, in the cache's dtype and device.
    cache : PagedKVCache
        The layer's pool; ``h_kv`` divides ``h`` and ``d`` is its ``head_dim``.
    seqs : list of int
        ``B`` distinct live sequences, each holding at least one position.
    scale : float, optional
        Multiplies the scores; ``1 / sqrt(d)`` by default.

    Returns
    -------
    torch.Tensor, shape ``(B, h, d)``

    Raises
    ------
    TypeError
        If ``query`` is not a floating-point tensor of the cache's dtype,
        ``cache`` is not a ``PagedKVCache`` or ``scale`` is not a number.
    ValueError
        For a shape that does not fit, NaN or inf, another device, a
        sequence that is not alive, repeated or empty, or a scale not above 0.

    Examples
    --------
    >>> import torch
    >>> import torch.nn.functional as F
    >>> _ = torch.manual_seed(0)
    >>> cache = PagedKVCache(num_blocks=8, block_size=4, num_kv_heads=1, head_dim=8)
    >>> seqs = [cache.new_sequence() for _ in range(3)]
    >>> for seq, length in zip(seqs, [1, 5, 9]):  # a ragged batch
    ...     cache.append(seq, torch.randn(1, length, 8), torch.randn(1, length, 8))
    >>> query = torch.randn(3, 2, 8)  # (B, h, d): 2 query heads share 1 key/value head
    >>> out = paged_attention(query, cache, seqs)  # (B, h, d)
    >>> key, value = cache.keys_values(seqs[2])  # (h_kv, T, d)
    >>> ref = F.scaled_dot_product_attention(query[2][:, None], key, value)  # (h, 1, d)
    >>> torch.allclose(out[2], ref[:, 0], atol=1e-6)
    True
    """
    if not isinstance(cache, PagedKVCache):
        raise TypeError(f"cache must be a PagedKVCache, got {describe(cache)}")
    check_float_tensor(query, "query")
    if query.dim() != 3 or query.shape[-1] != cache.head_dim:
        raise ValueError(
            f"query must have shape (B, h, head_dim) with head_dim={cache.head_dim}, "
            f"got {tuple(query.shape)}"
        )
    if query.shape[1] % cache.num_kv_heads:
        raise ValueError(
            f"the cache's num_kv_heads={cache.num_kv_heads} must divide the query's "
            f"h={query.shape[1]} (query shape {tuple(query.shape)})"
        )
    check_same_dtype_device(query, "query", cache.key.dtype, cache.key.device, "the cache")
    seqs = _check_batch(cache, seqs, query.shape[0])
    for seq in seqs:
        if cache.allocator.length(seq) == 0:
            raise ValueError(
                f"sequence {seq} holds no positions; append its new key and value first"
            )
    scale = 1 / math.sqrt(cache.head_dim) if scale is None else check_real(scale, "scale")
    if scale <= 0:
        raise ValueError(f"scale must be above 0, got {scale}")
    check_finite(query, "query")
    return _paged_attend(query[:, :, None], cache, seqs, scale)[:, :, 0]


def _check_batch(cache: PagedKVCache, seqs: object, batch: int) -> list[int]:
    """``seqs`` as a list of ``batch`` distinct live sequences of ``cache``."""
    if isinstance(seqs, (int, str, bytes)) or not isinstance(seqs, Sequence):
        raise TypeError(f"seqs must be a list of sequence ids, got {describe(seqs)}")
    if len(seqs) != batch:
        raise ValueError(f"seqs has {len(seqs)} sequences but the batch has B={batch}")
    checked = [cache.allocator._check_seq(seq, f"seqs[{i}]") for i, seq in enumerate(seqs)]
    if len(set(checked)) != len(checked):
        raise ValueError(f"seqs must not repeat a sequence, got {checked}")
    return checked
