"""Chapter 18 exercises: counting the blocks of a paged cache.

Both references run the package's :class:`~selfattention.BlockAllocator`
itself, so the reader's formula is checked against the bookkeeping the
chapter builds, not against a second formula: the blocks a ragged batch
needs, and the blocks ``n`` samples of one prompt hold after ``fork`` and
copy-on-write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..layers.paged_cache import BlockAllocator
from ._runner import Case, run_checks


def reference_blocks_for_batch(lengths: list[int], block_size: int) -> int:
    """The blocks a batch of sequences of ``lengths`` takes from a paged cache.

    Each sequence reserves its own blocks, ``ceil(length / block_size)``.

    Examples
    --------
    >>> reference_blocks_for_batch([1, 4, 5], block_size=4)
    4
    """
    allocator = BlockAllocator(num_blocks=max(1, sum(lengths)), block_size=block_size)
    for length in lengths:
        allocator.reserve([allocator.new_sequence()], length)
    return allocator.num_blocks - allocator.free_blocks


def check_blocks_for_batch(fn: Callable[[list[int], int], Any]) -> bool:
    """Check ``fn(lengths, block_size) -> int``, the blocks a batch of sequences needs.

    ``lengths`` lists the positions of each sequence; each sequence has its
    own blocks, so the answer is a sum over sequences. The cases include
    lengths that fill their blocks exactly, a length of 1, block size 1, and
    a batch whose total would fit in fewer blocks if the sequences could
    share them (they cannot).
    """
    cases = [
        Case("one sequence of 10 positions, block size 4", ([10], 4)),
        Case("lengths that fill their blocks exactly: [8, 4], block size 4", ([8, 4], 4)),
        Case("block size 1: one block per position", ([3, 5, 1], 1)),
        Case("three sequences of 1 position, block size 16: 3 blocks, not 1", ([1, 1, 1], 16)),
        Case("a ragged batch [7, 9, 16, 17], block size 8", ([7, 9, 16, 17], 8)),
        Case("an empty sequence holds no block: [0, 5], block size 4", ([0, 5], 4)),
    ]
    return run_checks(
        "check_blocks_for_batch", fn, reference_blocks_for_batch, cases, atol=0, rtol=0
    )


def reference_blocks_for_samples(
    prompt_length: int, num_samples: int, new_tokens: int, block_size: int
) -> int:
    """Blocks in use after ``num_samples`` samples of one prompt each generate ``new_tokens``.

    The prompt is prefilled once into one sequence, which is forked
    ``num_samples - 1`` times (the parent is sample 0); then every sample
    appends ``new_tokens >= 1`` tokens, one at a time, in turn. The full
    blocks of the prompt stay shared; a partly filled last block is copied by
    every sample but the last one to write into it.

    Examples
    --------
    >>> reference_blocks_for_samples(prompt_length=6, num_samples=3, new_tokens=1, block_size=4)
    4
    """
    total = prompt_length + new_tokens
    allocator = BlockAllocator(num_blocks=num_samples * (total + 1), block_size=block_size)
    parent = allocator.new_sequence()
    allocator.reserve([parent], prompt_length)
    samples = [parent] + [allocator.fork(parent) for _ in range(num_samples - 1)]
    for _ in range(new_tokens):
        allocator.reserve(samples, 1)
    return allocator.num_blocks - allocator.free_blocks


def check_blocks_for_samples(fn: Callable[[int, int, int, int], Any]) -> bool:
    """Check ``fn(prompt_length, num_samples, new_tokens, block_size) -> int``.

    The blocks in use once ``num_samples`` samples forked from one prefilled
    prompt have each appended ``new_tokens >= 1`` tokens. The cases cover a
    prompt that fills its blocks exactly (nothing is copied), a partly
    filled last block (copied by all samples but one), a single sample, and
    generations that cross a block boundary.
    """
    cases = [
        Case("prompt of 8 fills 2 blocks of 4 exactly; 3 samples, 1 token", (8, 3, 1, 4)),
        Case("prompt of 6 (last block half full); 3 samples, 1 token", (6, 3, 1, 4)),
        Case("one sample: no fork, no copy", (6, 1, 5, 4)),
        Case("prompt of 5, 4 samples of 7 tokens, block size 4", (5, 4, 7, 4)),
        Case("block size 1: nothing is ever partly filled", (5, 3, 2, 1)),
        Case("prompt of 30, 2 samples of 3 tokens, block size 16", (30, 2, 3, 16)),
    ]
    return run_checks(
        "check_blocks_for_samples", fn, reference_blocks_for_samples, cases, atol=0, rtol=0
    )
