"""The paged KV cache's and the prefix cache's contract (chapter 18).

Written against the survivors of `make mutate-package` in
`layers/paged_cache.py` and `layers/prefix_cache.py` (docs/mutation-score.md):
messages that lost their argument's name or what it got, checks that let a
value through to a later one, the copy-on-write plan of a batch, the exact
chained block hashes, and the prefix cache's bookkeeping at its edges.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

import pytest
import torch

from selfattention import (
    BlockAllocator,
    KVCache,
    MultiHeadAttention,
    OutOfBlocksError,
    PagedKVCache,
    PrefixCachingAllocator,
    block_hashes,
    paged_attention,
    paged_forward,
)
from selfattention.layers.paged_cache import blocks_for

F64 = torch.float64


def make_cache(**options: object) -> PagedKVCache:
    """A small float32 pool: 4 blocks of 2 slots, 1 key/value head of width 2."""
    settings = {"num_blocks": 4, "block_size": 2, "num_kv_heads": 1, "head_dim": 2}
    return PagedKVCache(**{**settings, **options})


def snapshot(allocator: BlockAllocator, cache: PagedKVCache | None = None) -> tuple:
    """What a call could change, read through the public API: tables, counts, free list, pool."""
    tables = [(s, allocator.block_table(s), allocator.length(s)) for s in allocator.sequences]
    refs = [allocator.refcount(b) for b in range(allocator.num_blocks)]
    pool = () if cache is None else (cache.key.clone(), cache.value.clone())
    return repr(allocator), tables, refs, pool


def same(a: tuple, b: tuple) -> bool:
    return a[:3] == b[:3] and all(torch.equal(x, y) for x, y in zip(a[3], b[3], strict=True))


def refuses(
    error: type[Exception],
    message: str,
    call: Callable[[], object],
    allocator: BlockAllocator | None = None,
    cache: PagedKVCache | None = None,
) -> None:
    """``call()`` raises ``error`` with exactly ``message``, and the allocator/cache stay."""
    before = None if allocator is None else snapshot(allocator, cache)
    with pytest.raises(error, match="^" + re.escape(message) + "$"):
        call()
    if allocator is not None:
        assert same(before, snapshot(allocator, cache))


# ---------------------------------------------------------------------------
# blocks_for, the reprs, refcount
# ---------------------------------------------------------------------------


def test_blocks_for_names_the_count_or_the_block_size():
    refuses(ValueError, "num_tokens must be non-negative, got -1", lambda: blocks_for(-1, 2))
    refuses(TypeError, "num_tokens must be an int, got float 3.0", lambda: blocks_for(3.0, 2))
    refuses(ValueError, "block_size must be positive, got 0", lambda: blocks_for(3, 0))
    refuses(TypeError, "block_size must be an int, got str '2'", lambda: blocks_for(3, "2"))


def test_the_allocators_repr_names_its_class_and_counts():
    allocator = BlockAllocator(4, 2)
    allocator.reserve([allocator.new_sequence()], 3)
    assert (
        repr(allocator) == "BlockAllocator(num_blocks=4, block_size=2, sequences=1, free_blocks=2)"
    )
    prefix = PrefixCachingAllocator(3, 5)
    assert repr(prefix) == (
        "PrefixCachingAllocator(num_blocks=3, block_size=5, sequences=0, free_blocks=3)"
    )


def test_refcount_names_the_block_and_its_range():
    allocator = BlockAllocator(4, 2)
    refuses(TypeError, "block must be an int, got float 1.0", lambda: allocator.refcount(1.0))
    refuses(ValueError, "block must be in 0 .. 3, got 4", lambda: allocator.refcount(4))
    refuses(ValueError, "block must be in 0 .. 3, got -1", lambda: allocator.refcount(-1))
    assert allocator.refcount(3) == 0


def test_the_constructors_name_the_size_that_is_wrong():
    cases = [
        (ValueError, "num_blocks must be positive, got 0", lambda: BlockAllocator(0, 2)),
        (TypeError, "num_blocks must be an int, got float 2.0", lambda: BlockAllocator(2.0, 2)),
        (ValueError, "block_size must be positive, got 0", lambda: PrefixCachingAllocator(2, 0)),
        (ValueError, "num_blocks must be positive, got 0", lambda: make_cache(num_blocks=0)),
        (ValueError, "block_size must be positive, got 0", lambda: make_cache(block_size=0)),
        (ValueError, "num_kv_heads must be positive, got 0", lambda: make_cache(num_kv_heads=0)),
        (ValueError, "head_dim must be positive, got 0", lambda: make_cache(head_dim=0)),
        (
            TypeError,
            "dtype must be a floating-point torch.dtype such as torch.float64, got torch.dtype "
            "torch.int64",
            lambda: make_cache(dtype=torch.int64),
        ),
        (
            TypeError,
            "allocator must be a BlockAllocator, got dict",
            lambda: make_cache(allocator={}),
        ),
        (
            ValueError,
            "allocator has num_blocks=4, block_size=3; this cache was asked for 4, 2",
            lambda: make_cache(allocator=BlockAllocator(4, 3)),
        ),
    ]
    for error, message, call in cases:
        refuses(error, message, call)
    # The cache's own sizes are checked before they are compared with the allocator's.
    refuses(
        ValueError,
        "num_blocks must be positive, got 0",
        lambda: make_cache(num_blocks=0, allocator=BlockAllocator(4, 2)),
    )
    refuses(
        ValueError,
        "block_size must be positive, got 0",
        lambda: make_cache(block_size=0, allocator=BlockAllocator(4, 2)),
    )


def test_a_pool_is_made_in_the_dtype_and_on_the_device_asked_for():
    cache = make_cache(dtype=torch.float16)
    assert (cache.key.dtype, cache.value.dtype) == (torch.float16, torch.float16)
    assert cache.key.device.type == "cpu" and cache.nbytes == 2 * 4 * 2 * 1 * 2 * 2
    shared = BlockAllocator(4, 2)
    on_meta = make_cache(device=torch.device("meta"), allocator=shared)
    assert on_meta.allocator is shared
    assert (on_meta.key.device.type, on_meta.value.device.type) == ("meta", "meta")


def test_a_sequence_that_is_not_alive_is_named_with_the_live_ones():
    allocator = BlockAllocator(4, 2)
    alive = allocator.new_sequence()
    dead = allocator.new_sequence()
    allocator.free(dead)
    calls = [allocator.length, allocator.block_table, allocator.fork, allocator.free]
    for call in calls:
        refuses(
            ValueError,
            f"seq={dead} is not a live sequence of this cache (alive: [{alive}]); "
            "make one with new_sequence()",
            lambda c=call: c(dead),
            allocator,
        )
        refuses(TypeError, "seq must be an int, got str 'a'", lambda c=call: c("a"), allocator)
        refuses(TypeError, "seq must be an int, got bool True", lambda c=call: c(True), allocator)
    assert allocator.new_sequence() == 2  # ids are never reused


# ---------------------------------------------------------------------------
# reserve and blocks_needed: the batch's checks, and the copy-on-write plan
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seqs", "shown"), [({0}, "set"), ("ab", "str 'ab'"), (0, "int 0"), (b"\x00", "bytes")]
)
def test_reserve_wants_a_list_of_sequence_ids(seqs: object, shown: str):
    """A set, a string, an int or bytes is refused as a whole, not element by element."""
    allocator = BlockAllocator(4, 2)
    allocator.new_sequence()
    message = f"seqs must be a list of sequence ids, got {shown}"
    refuses(TypeError, message, lambda: allocator.reserve(seqs, 1), allocator)
    refuses(TypeError, message, lambda: allocator.blocks_needed(seqs, 1), allocator)


def test_paged_attention_wants_a_list_of_sequence_ids():
    cache = make_cache()
    seq = cache.new_sequence()
    cache.append(seq, torch.ones(1, 1, 2), torch.ones(1, 1, 2))
    query = torch.ones(1, 1, 2)
    for seqs, shown in (({seq}, "set"), ("a", "str 'a'"), (seq, "int 0")):
        refuses(
            TypeError,
            f"seqs must be a list of sequence ids, got {shown}",
            lambda seqs=seqs: paged_attention(query, cache, seqs),
            cache.allocator,
            cache,
        )
    refuses(
        ValueError,
        "seqs has 2 sequences but the batch has B=1",
        lambda: paged_attention(query, cache, [seq, seq]),
    )
    refuses(
        ValueError,
        "seqs[1]=7 is not a live sequence of this cache (alive: [0]); "
        "make one with new_sequence()",
        lambda: paged_attention(torch.ones(2, 1, 2), cache, [seq, 7]),
    )
    refuses(
        TypeError,
        "seqs[0] must be an int, got str 'a'",
        lambda: paged_attention(query, cache, ["a"]),
    )


def test_reserve_names_the_entry_that_is_wrong():
    allocator = BlockAllocator(4, 2)
    a, b = allocator.new_sequence(), allocator.new_sequence()
    cases = [
        (
            ValueError,
            "seqs[1]=5 is not a live sequence of this cache (alive: [0, 1]); "
            "make one with new_sequence()",
            [a, 5],
            1,
        ),
        (TypeError, "seqs[1] must be an int, got str 'x'", [a, "x"], 1),
        (ValueError, "seqs must not repeat a sequence, got [1, 1]", [b, b], 1),
        (ValueError, "num_tokens has 1 entries but seqs has 2", [a, b], [1]),
        (ValueError, "num_tokens has 3 entries but seqs has 2", [a, b], (1, 1, 1)),
        (ValueError, "num_tokens[1] must be non-negative, got -1", [a, b], [1, -1]),
        (TypeError, "num_tokens[1] must be an int, got float 2.0", [a, b], (1, 2.0)),
        (ValueError, "num_tokens must be non-negative, got -1", [a, b], -1),
        (TypeError, "num_tokens must be an int, got str '1'", [a], "1"),
        (TypeError, "num_tokens must be an int, got bytes", [a], b"1"),
    ]
    for error, message, seqs, num_tokens in cases:
        refuses(error, message, lambda s=seqs, n=num_tokens: allocator.reserve(s, n), allocator)
        refuses(error, message, lambda s=seqs, n=num_tokens: allocator.blocks_needed(s, n))
    assert allocator.free_blocks == 4 and [allocator.length(s) for s in (a, b)] == [0, 0]


def test_counts_per_sequence_and_zero_counts_reserve_what_they_say():
    allocator = BlockAllocator(4, 2)
    a, b, c = (allocator.new_sequence() for _ in range(3))
    assert allocator.blocks_needed([a, b, c], (3, 0, 1)) == 3
    slots = allocator.reserve([a, b, c], (3, 0, 1))
    assert [s.tolist() for s in slots] == [[0, 1, 2], [], [4]]
    assert [allocator.length(s) for s in (a, b, c)] == [3, 0, 1]
    assert allocator.reserve([b], 0)[0].tolist() == [] and allocator.block_table(b) == []


@pytest.mark.parametrize("sharers", [2, 3])
def test_sharers_of_a_partly_filled_block_copy_it_one_fewer_times(sharers: int):
    """All sharers append in one batch: each but the last copies, the last owns the block."""
    allocator = BlockAllocator(2 + sharers - 1, 4)
    first = allocator.new_sequence()
    allocator.reserve([first], 6)  # blocks 0 and 1, block 1 half full
    seqs = [first] + [allocator.fork(first) for _ in range(sharers - 1)]
    assert allocator.blocks_needed(seqs, 1) == sharers - 1
    assert allocator.blocks_needed(seqs[:1], 1) == 1  # alone, it still has to copy
    slots = allocator.reserve(seqs, 1)  # takes exactly the free blocks
    assert allocator.free_blocks == 0
    last_blocks = [allocator.block_table(s)[-1] for s in seqs]
    assert sorted(last_blocks) == list(range(1, sharers + 1))  # every sequence its own block
    assert last_blocks[-1] == 1  # the last sharer kept the original
    assert all(allocator.refcount(b) == 1 for b in last_blocks)
    assert allocator.refcount(0) == sharers
    assert [s.tolist() for s in slots] == [[b * 4 + 2] for b in last_blocks]


def test_a_batch_that_needs_one_block_more_than_is_free_changes_nothing():
    allocator = BlockAllocator(3, 4)
    first = allocator.new_sequence()
    allocator.reserve([first], 6)
    second = allocator.fork(first)
    assert allocator.blocks_needed([first, second], [1, 3]) == 2  # one copy, one new block
    refuses(
        OutOfBlocksError,
        "reserving 4 positions for sequences [0, 1] needs 2 blocks, 1 is free; nothing was "
        "changed (free a sequence, or wait for one to finish)",
        lambda: allocator.reserve([first, second], [1, 3]),
        allocator,
    )


# ---------------------------------------------------------------------------
# PagedKVCache: the keys and values it takes
# ---------------------------------------------------------------------------


def test_append_names_the_tensor_that_is_wrong():
    cache = make_cache()
    seq = cache.new_sequence()
    ok = torch.ones(1, 1, 2)
    nan = torch.full((1, 1, 2), float("nan"))
    cases = [
        (TypeError, "key must be a torch.Tensor, got list", [1.0, 2.0], ok),
        (TypeError, "value must be a torch.Tensor, got list", ok, [1.0, 2.0]),
        (
            TypeError,
            "value must be a floating-point tensor, got dtype torch.int64 (shape (1, 1, 2))",
            ok,
            torch.ones(1, 1, 2, dtype=torch.int64),
        ),
        (
            ValueError,
            "value must have shape (num_kv_heads, t, head_dim) = (1, t, 2), got (1, 1, 3)",
            ok,
            torch.ones(1, 1, 3),
        ),
        (
            TypeError,
            "key has dtype torch.float64, the cache torch.float32; convert one of them, "
            "e.g. key.to(torch.float32)",
            ok.double(),
            ok,
        ),
        (
            TypeError,
            "value has dtype torch.float64, the cache torch.float32; convert one of them, "
            "e.g. value.to(torch.float32)",
            ok,
            ok.double(),
        ),
        (
            ValueError,
            "key and value must have the same shape: key (1, 1, 2), value (1, 2, 2)",
            ok,
            torch.ones(1, 2, 2),
        ),
        (
            ValueError,
            "key contains NaN (shape (1, 1, 2)); key must be finite, without NaN or inf",
            nan,
            nan,
        ),
        (
            ValueError,
            "value contains NaN (shape (1, 1, 2)); value must be finite, without NaN or inf",
            ok,
            nan,
        ),
    ]
    for error, message, key, value in cases:
        refuses(
            error, message, lambda k=key, v=value: cache.append(seq, k, v), cache.allocator, cache
        )


def test_a_pool_on_another_device_names_the_cache():
    """The meta device stands in for a GPU: the pool lives there, the keys on the CPU."""
    cache = make_cache(device="meta")
    assert cache.key.device.type == "meta" and cache.value.device.type == "meta"
    seq = cache.new_sequence()
    refuses(
        ValueError,
        "key is on device cpu, the cache on meta; move one of them, e.g. key.to('meta')",
        lambda: cache.append(seq, torch.ones(1, 1, 2), torch.ones(1, 1, 2)),
        cache.allocator,
    )
    assert cache.length(seq) == 0


# ---------------------------------------------------------------------------
# paged_attention: its checks, in order, and an empty decoding step
# ---------------------------------------------------------------------------


def grouped_cache() -> tuple[PagedKVCache, int]:
    """A pool of 2 key/value heads of width 3, one sequence holding one position."""
    cache = PagedKVCache(4, 2, num_kv_heads=2, head_dim=3)
    seq = cache.new_sequence()
    cache.append(seq, torch.ones(2, 1, 3), torch.ones(2, 1, 3))
    return cache, seq


def test_paged_attention_names_the_query_and_what_it_got():
    cache, seq = grouped_cache()
    query = torch.ones(1, 2, 3)
    cases = [
        (TypeError, "cache must be a PagedKVCache, got KVCache", query, KVCache()),
        (TypeError, "query must be a torch.Tensor, got list", [1.0], cache),
        (
            TypeError,
            "query must be a floating-point tensor, got dtype torch.int64 (shape (1, 2, 3))",
            query.long(),
            cache,
        ),
        *(
            (
                ValueError,
                f"query must have shape (B, h, head_dim) with head_dim=3, got {shape}",
                torch.ones(shape),
                cache,
            )
            for shape in ((1, 2, 4), (2, 3), (1, 1, 2, 3))
        ),
        (
            ValueError,
            "the cache's num_kv_heads=2 must divide the query's h=5 (query shape (1, 5, 3))",
            torch.ones(1, 5, 3),
            cache,
        ),
        (
            TypeError,
            "query has dtype torch.float64, the cache torch.float32; convert one of them, "
            "e.g. query.to(torch.float32)",
            query.double(),
            cache,
        ),
        (
            ValueError,
            "query contains inf (shape (1, 2, 3)); query must be finite, without NaN or inf",
            torch.full((1, 2, 3), float("inf")),
            cache,
        ),
        (
            ValueError,
            "query contains NaN (shape (1, 2, 3)); query must be finite, without NaN or inf",
            torch.full((1, 2, 3), float("nan")),
            cache,
        ),
    ]
    for error, message, q, c in cases:
        refuses(error, message, lambda q=q, c=c: paged_attention(q, c, [seq]), cache.allocator)


def test_paged_attention_names_the_scale():
    cache, seq = grouped_cache()
    query = torch.ones(1, 2, 3)
    for scale, error, message in (
        ("1", TypeError, "scale must be a real number, got str '1'"),
        (True, TypeError, "scale must be a real number, got bool True"),
        (float("nan"), ValueError, "scale must be finite, got nan"),
        (0.0, ValueError, "scale must be above 0, got 0.0"),
        (-1, ValueError, "scale must be above 0, got -1.0"),
    ):
        refuses(error, message, lambda s=scale: paged_attention(query, cache, [seq], scale=s))


def test_a_query_for_a_pool_on_another_device_names_the_cache():
    cache = PagedKVCache(4, 2, num_kv_heads=2, head_dim=3, device="meta")
    seq = cache.new_sequence()
    refuses(
        ValueError,
        "query is on device cpu, the cache on meta; move one of them, e.g. query.to('meta')",
        lambda: paged_attention(torch.ones(1, 2, 3), cache, [seq]),
    )


def test_an_empty_step_for_sequences_of_different_widths_changes_nothing():
    """T = 0 new tokens: a fresh sequence (no block) beside one that fills the only block.

    The batch's tables are padded to one width with a block that exists, and the
    output is empty, as for ``MultiHeadAttention`` with a ``KVCache``.
    """
    torch.manual_seed(0)
    attention = MultiHeadAttention(d_model=4, num_heads=2).eval()
    cache = PagedKVCache(1, 2, num_kv_heads=2, head_dim=2)
    full, empty = cache.new_sequence(), cache.new_sequence()
    cache.append(full, torch.randn(2, 2, 2), torch.randn(2, 2, 2))
    before = snapshot(cache.allocator, cache)
    x = torch.zeros(2, 0, 4)
    with torch.no_grad():
        out = paged_forward(attention, x, cache, [empty, full])
        alone = paged_forward(attention, x[:1], cache, [empty])
        ref, _ = attention(x, causal=True, cache=KVCache())
    assert out.shape == ref.shape == (2, 0, 4) and alone.shape == (1, 0, 4)
    assert same(before, snapshot(cache.allocator, cache))


# ---------------------------------------------------------------------------
# The prefix cache: block hashes, what it reuses, what it records
# ---------------------------------------------------------------------------


def sha256(*parts: bytes) -> bytes:
    return hashlib.sha256(b"".join(parts)).digest()


def test_block_hashes_are_the_chained_sha256_of_the_token_ids():
    """Block 0: SHA-256 of its ids written ``1,2``; block n: of block n - 1's hash and its ids.

    The same prompt gets the same hashes in every process (they are not Python's ``hash``).
    """
    first = sha256(b"1,2")
    second = sha256(first, b"3,-4")
    assert block_hashes([1, 2, 3, -4, 5], 2) == [first, second]
    assert block_hashes([12, 3], 2) != block_hashes([1, 23], 2)  # the comma separates the ids
    assert block_hashes([7], 1) == [sha256(b"7")]


@pytest.mark.parametrize("block_size", [1, 2, 3])
def test_only_full_blocks_have_a_hash(block_size: int):
    tokens = list(range(8))
    for n in range(len(tokens) + 1):
        hashes = block_hashes(tokens[:n], block_size)
        assert len(hashes) == n // block_size
        assert hashes == block_hashes(tokens, block_size)[: n // block_size]


def test_the_prefix_cache_names_the_token_ids_and_the_block_size():
    allocator = PrefixCachingAllocator(4, 2)
    seq = allocator.new_sequence()
    allocator.reserve([seq], 2)
    calls = {
        "block_hashes": lambda tokens: block_hashes(tokens, 2),
        "cached_blocks": allocator.cached_blocks,
        "new_sequence": allocator.new_sequence,
        "register": lambda tokens: allocator.register(seq, tokens),
    }
    for call in calls.values():
        for tokens, error, message in (
            ({1, 2}, TypeError, "token_ids must be a list of ints, got set"),
            ("ab", TypeError, "token_ids must be a list of ints, got str 'ab'"),
            (b"ab", TypeError, "token_ids must be a list of ints, got bytes"),
            ([1, 2.0], TypeError, "token_ids[1] must be an int, got float 2.0"),
        ):
            refuses(error, message, lambda c=call, t=tokens: c(t), allocator)
    refuses(ValueError, "block_size must be positive, got 0", lambda: block_hashes([1], 0))
    refuses(TypeError, "block_size must be an int, got float 2.0", lambda: block_hashes([1], 2.0))
    refuses(
        ValueError,
        "token_ids has 3 tokens but sequence 0 holds 2 positions",
        lambda: allocator.register(seq, [1, 2, 3]),
        allocator,
    )
    assert allocator.cached_blocks([1, 2, 3]) == []  # the refused register recorded nothing


def test_a_one_token_prompt_reuses_nothing_even_with_blocks_of_one():
    allocator = PrefixCachingAllocator(4, 1)
    seq = allocator.new_sequence()
    allocator.reserve([seq], 2)
    assert allocator.register(seq, [5, 6]) == 2
    assert allocator.cached_blocks([5]) == []  # its one token is the one to compute
    assert allocator.cached_blocks([5, 6]) == [0]
    again = allocator.new_sequence([5])
    assert allocator.length(again) == 0 and allocator.block_table(again) == []
    assert allocator.cached_blocks([]) == []


def test_register_records_each_prefix_once_and_each_block_once():
    """Tokens recorded already in other blocks, or a block recorded under other tokens: kept."""
    allocator = PrefixCachingAllocator(8, 2)
    tokens = [1, 2, 3, 4, 5]
    first, second = allocator.new_sequence(), allocator.new_sequence()
    allocator.reserve([first, second], 5)  # the same prompt, prefilled twice
    assert allocator.register(first, tokens) == 2
    assert allocator.register(second, tokens) == 0  # the first's blocks stay the recorded ones
    assert allocator.cached_blocks(tokens) == allocator.block_table(first)[:2] == [0, 1]
    assert allocator.register(first, [9, 9, 9, 9]) == 0  # its blocks hold 1, 2, 3, 4
    assert allocator.cached_blocks([9, 9, 9, 9, 9]) == []
    assert allocator.cached_blocks(tokens) == [0, 1]
    allocator.free(first)  # blocks 0 and 1 wait on the free list, still recorded
    third = allocator.new_sequence(tokens)
    assert allocator.block_table(third) == [0, 1] and allocator.length(third) == 4


def test_forks_decoding_in_one_batch_equal_each_decoded_alone_with_a_kv_cache():
    """Three forks of a prompt that ends mid-block take one step together in a pool that
    holds exactly the prompt's 2 blocks and the 2 copies; each equals a ``KVCache`` run."""
    torch.manual_seed(0)
    attention = MultiHeadAttention(d_model=8, num_heads=2, num_kv_heads=1).to(F64).eval()
    prompt = torch.randn(1, 6, 8, dtype=F64)
    steps = torch.randn(3, 1, 8, dtype=F64)  # one new token per fork
    cache = PagedKVCache(4, 4, num_kv_heads=1, head_dim=4, dtype=F64)
    first = cache.new_sequence()
    with torch.no_grad():
        paged_forward(attention, prompt, cache, [first])
        forks = [first, cache.fork(first), cache.fork(first)]
        out = paged_forward(attention, steps, cache, forks)  # (3, 1, d_model)
        for i, seq in enumerate(forks):
            kv = KVCache()
            attention(prompt, causal=True, cache=kv)
            alone, _ = attention(steps[i : i + 1], causal=True, cache=kv)
            torch.testing.assert_close(out[i], alone[0], atol=1e-12, rtol=0)
            key, value = cache.keys_values(seq)  # (h_kv, 7, d): the contiguous cache's
            torch.testing.assert_close(key, kv.key[0], atol=1e-12, rtol=0)
            torch.testing.assert_close(value, kv.value[0], atol=1e-12, rtol=0)
    assert cache.free_blocks == 0
