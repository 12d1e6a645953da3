"""Automatic prefix caching: reuse the cached blocks of a prompt another request began with.

Many requests to a server begin with the same tokens (a system prompt, a
few-shot preamble). Their keys and values are the same too, position by
position, so a block filled by one request can serve the next. A full block
is named by a hash of its token ids *chained* with the hash of the block
before it, so equal hashes mean equal tokens from position 0 to the end of
the block, not only inside it (as vLLM and the small engines after it do).

The per-layer :class:`~selfattention.PagedKVCache` never sees token ids, so
the prefix cache lives in the allocator that every layer shares:
:class:`PrefixCachingAllocator`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from .._checks import check_int, check_positive_int, describe
from .paged_cache import BlockAllocator


def _check_tokens(token_ids: object, name: str = "token_ids") -> list[int]:
    if isinstance(token_ids, (str, bytes)) or not isinstance(token_ids, Sequence):
        raise TypeError(f"{name} must be a list of ints, got {describe(token_ids)}")
    return [check_int(token, f"{name}[{i}]") for i, token in enumerate(token_ids)]


def block_hashes(token_ids: Sequence[int], block_size: int) -> list[bytes]:
    """The chained hash of every full block of ``token_ids`` (a partial last block has none).

    Block ``n``'s hash is SHA-256 of block ``n - 1``'s hash followed by the
    block's ``block_size`` token ids, so it names the whole prefix up to the
    block's end: two prompts that differ in one token share no hash from
    that token's block on.

    Examples
    --------
    >>> a = block_hashes([1, 2, 3, 4, 5, 6, 7], block_size=2)
    >>> b = block_hashes([1, 2, 9, 4, 5, 6, 7], block_size=2)
    >>> len(a), [x == y for x, y in zip(a, b)]  # 3 full blocks; equal only before the change
    (3, [True, False, False])
    """
    tokens = _check_tokens(token_ids)
    block_size = check_positive_int(block_size, "block_size")
    hashes, previous = [], b""
    for start in range(0, len(tokens) - block_size + 1, block_size):
        block = tokens[start : start + block_size]
        digest = hashlib.sha256(previous)
        digest.update(b",".join(str(token).encode() for token in block))
        previous = digest.digest()
        hashes.append(previous)
    return hashes


class PrefixCachingAllocator(BlockAllocator):
    """A :class:`~selfattention.BlockAllocator` that remembers full blocks by their tokens.

    After a request's prompt is in the cache, :meth:`register` records each
    of its full blocks under the chained hash of its tokens
    (:func:`block_hashes`). A new request made with
    ``new_sequence(token_ids)`` starts with the longest run of recorded
    blocks that its prompt begins with: their reference counts go up, and
    its length starts at the number of tokens they hold, whose prefill it
    skips. At least one prompt token is always left to compute (its output
    is the one that predicts the next token).

    A freed block keeps its contents and its hash while it waits on the free
    list, so a later request can still reuse it; it is forgotten only when
    the free list hands it out again. Full blocks are never written again,
    so a shared prefix block is never copied.

    Share one allocator between the caches of every layer (``PagedKVCache(...,
    allocator=...)``): a reused block then holds every layer's keys.

    Examples
    --------
    >>> allocator = PrefixCachingAllocator(num_blocks=8, block_size=4)
    >>> system = list(range(10))  # a 10-token system prompt: 2 full blocks
    >>> first = allocator.new_sequence(system + [42])
    >>> allocator.length(first)  # nothing cached yet
    0
    >>> _ = allocator.reserve([first], 11)  # prefill (the caches write the keys)
    >>> allocator.register(first, system + [42])
    2
    >>> second = allocator.new_sequence(system + [7, 7])
    >>> shared = allocator.block_table(second)[:2] == allocator.block_table(first)[:2]
    >>> allocator.length(second), shared
    (8, True)
    """

    def __init__(self, num_blocks: int, block_size: int) -> None:
        super().__init__(num_blocks, block_size)
        self._by_hash: dict[bytes, int] = {}
        self._hash_of: dict[int, bytes] = {}

    def cached_blocks(self, token_ids: Sequence[int]) -> list[int]:
        """The recorded blocks that a prompt ``token_ids`` would reuse; changes nothing.

        The longest run of leading full blocks whose chained hashes are
        recorded, leaving at least one token of the prompt to compute.

        Examples
        --------
        >>> allocator = PrefixCachingAllocator(num_blocks=4, block_size=2)
        >>> allocator.cached_blocks([1, 2, 3])
        []
        """
        tokens = _check_tokens(token_ids)
        usable = max(len(tokens) - 1, 0) // self.block_size  # keep one token to compute
        blocks = []
        for digest in block_hashes(tokens, self.block_size)[:usable]:
            if digest not in self._by_hash:
                break
            blocks.append(self._by_hash[digest])
        return blocks

    def new_sequence(self, token_ids: Sequence[int] | None = None) -> int:
        """A new sequence; with ``token_ids`` (its prompt), starting from the cached prefix.

        The sequence's block table starts with :meth:`cached_blocks`, its
        length with the tokens they hold: prefill only the rest.

        Examples
        --------
        >>> allocator = PrefixCachingAllocator(num_blocks=4, block_size=2)
        >>> seq = allocator.new_sequence([5, 6, 7])
        >>> allocator.length(seq), allocator.block_table(seq)
        (0, [])
        """
        blocks = [] if token_ids is None else self.cached_blocks(token_ids)
        seq = super().new_sequence()
        for block in blocks:
            if self._refs[block] == 0:  # waiting on the free list: take it back
                self._free.remove(block)
            self._refs[block] += 1
        self._tables[seq] = list(blocks)
        self._lengths[seq] = len(blocks) * self.block_size
        return seq

    def register(self, seq: int, token_ids: Sequence[int]) -> int:
        """Record the full blocks of ``seq``, whose first positions hold ``token_ids``.

        Call it once the keys and values of those tokens are in every
        layer's cache (after the prefill). Returns how many blocks were newly
        recorded; a block whose tokens are recorded already (in another
        block) is left as it is.

        Raises
        ------
        ValueError
            If ``seq`` is not alive or holds fewer positions than ``token_ids``.

        Examples
        --------
        >>> allocator = PrefixCachingAllocator(num_blocks=4, block_size=2)
        >>> seq = allocator.new_sequence()
        >>> _ = allocator.reserve([seq], 5)
        >>> allocator.register(seq, [1, 2, 3, 4, 5]), allocator.register(seq, [1, 2, 3, 4, 5])
        (2, 0)
        """
        seq = self._check_seq(seq)
        tokens = _check_tokens(token_ids)
        if len(tokens) > self._lengths[seq]:
            raise ValueError(
                f"token_ids has {len(tokens)} tokens but sequence {seq} holds "
                f"{self._lengths[seq]} positions"
            )
        added = 0
        for digest, block in zip(
            block_hashes(tokens, self.block_size), self._tables[seq], strict=False
        ):
            if digest in self._by_hash or block in self._hash_of:
                continue
            self._by_hash[digest] = block
            self._hash_of[block] = digest
            added += 1
        return added

    def _take(self) -> int:
        block = super()._take()
        digest = self._hash_of.pop(block, None)  # reused for other tokens: forget it
        if digest is not None:
            del self._by_hash[digest]
        return block
