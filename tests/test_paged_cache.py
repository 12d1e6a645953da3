"""Chapter 18's package: the paged key/value cache, paged attention and prefix caching.

Every result is compared with what exists already: per-sequence ``KVCache``
decoding with the same ``MultiHeadAttention``, and PyTorch's
``F.scaled_dot_product_attention`` on the gathered keys. The allocator is
checked against a simple reference model (hypothesis state machine).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

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
from selfattention.exercises.ch18 import (
    check_blocks_for_batch,
    check_blocks_for_samples,
    reference_blocks_for_batch,
)

F64 = torch.float64


def _layer(num_kv_heads: int = 2, rope: bool = True, seed: int = 0) -> MultiHeadAttention:
    torch.manual_seed(seed)
    layer = MultiHeadAttention(d_model=16, num_heads=4, num_kv_heads=num_kv_heads, rope=rope)
    with torch.no_grad():  # non-zero biases, so that a bias mapped wrongly shows
        for proj in (layer.q_proj, layer.k_proj, layer.v_proj, layer.out_proj):
            proj.bias.normal_()
    return layer.to(F64).eval()


def _state(cache: PagedKVCache) -> tuple:
    """Everything an operation could change: tables, lengths, counts, free list, pool."""
    allocator = cache.allocator
    seqs = allocator.sequences
    return (
        [(allocator.block_table(s), allocator.length(s)) for s in seqs],
        [allocator.refcount(b) for b in range(allocator.num_blocks)],
        list(allocator._free),
        cache.key.clone(),
        cache.value.clone(),
    )


def _same_state(a: tuple, b: tuple) -> bool:
    return a[:3] == b[:3] and torch.equal(a[3], b[3]) and torch.equal(a[4], b[4])


# ---------------------------------------------------------------------------
# Paged decoding equals per-sequence KVCache decoding
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("block_size", [1, 4, 16])
@pytest.mark.parametrize(("num_kv_heads", "rope"), [(2, True), (4, False)])
def test_paged_batch_of_lengths_1_to_50_equals_kv_cache_decoding(block_size, num_kv_heads, rope):
    """50 sequences of lengths 1..50 decode as a ragged batch (each leaves when done)."""
    layer = _layer(num_kv_heads, rope)
    lengths = list(range(1, 51))
    torch.manual_seed(1)
    inputs = [torch.randn(1, n, 16, dtype=F64) for n in lengths]  # (1, T_i, d_model) each
    with torch.no_grad():
        expected = []
        for x in inputs:
            kv = KVCache()
            steps = [layer(x[:, t : t + 1], causal=True, cache=kv)[0] for t in range(x.shape[1])]
            expected.append(torch.cat(steps, dim=1)[0])  # (T_i, d_model)
        num_blocks = sum(math.ceil(n / block_size) for n in lengths)
        cache = PagedKVCache(num_blocks, block_size, num_kv_heads, 4, dtype=F64)
        seqs = [cache.new_sequence() for _ in lengths]
        got = [[] for _ in lengths]
        for t in range(max(lengths)):
            batch = [i for i, n in enumerate(lengths) if n > t]  # ragged: the short ones are done
            x = torch.stack([inputs[i][0, t] for i in batch])[:, None]  # (B, 1, d_model)
            out = paged_forward(layer, x, cache, [seqs[i] for i in batch])  # (B, 1, d_model)
            for row, i in enumerate(batch):
                got[i].append(out[row, 0])
    assert cache.free_blocks == 0  # exactly ceil(n / b) blocks per sequence
    for i in range(len(lengths)):
        torch.testing.assert_close(torch.stack(got[i]), expected[i], atol=1e-10, rtol=0)


@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_paged_attention_equals_sdpa_on_gathered_keys(block_size):
    torch.manual_seed(0)
    lengths = list(range(1, 51))
    num_blocks = sum(math.ceil(n / block_size) for n in lengths)
    cache = PagedKVCache(num_blocks, block_size, num_kv_heads=2, head_dim=8, dtype=F64)
    seqs = [cache.new_sequence() for _ in lengths]
    contiguous = []
    for seq, n in zip(seqs, lengths, strict=True):
        key, value = torch.randn(2, n, 8, dtype=F64), torch.randn(2, n, 8, dtype=F64)
        for start in range(0, n, 7):  # appended in chunks of 7
            cache.append(seq, key[:, start : start + 7], value[:, start : start + 7])
        contiguous.append((key, value))
    query = torch.randn(len(seqs), 6, 8, dtype=F64)  # (B, h, d): GQA, 3 query heads per kv head
    out = paged_attention(query, cache, seqs)  # (B, h, d)
    for i, (key, value) in enumerate(contiguous):
        got_k, got_v = cache.keys_values(seqs[i])
        assert torch.equal(got_k, key) and torch.equal(got_v, value)
        ref = F.scaled_dot_product_attention(
            query[i][None, :, None], key[None], value[None], enable_gqa=True
        )  # (1, h, 1, d)
        torch.testing.assert_close(out[i], ref[0, :, 0], atol=1e-10, rtol=0)
    scaled = paged_attention(query, cache, seqs, scale=0.5)
    ref = F.scaled_dot_product_attention(
        query[-1][None, :, None], *(t[None] for t in contiguous[-1]), scale=0.5, enable_gqa=True
    )
    torch.testing.assert_close(scaled[-1], ref[0, :, 0], atol=1e-10, rtol=0)


def test_prefill_then_decode_equals_one_causal_pass():
    layer = _layer()
    torch.manual_seed(2)
    cache = PagedKVCache(32, 4, 2, 4, dtype=F64)
    xs = [
        torch.randn(1, n, 16, dtype=F64) for n in (7, 13, 5)
    ]  # prompts of 3, 9, 1 + 4 decoded tokens
    seqs = [cache.new_sequence() for _ in xs]
    with torch.no_grad():
        outs = [paged_forward(layer, x[:, :-4], cache, [s]) for x, s in zip(xs, seqs, strict=True)]
        steps = []
        for t in range(4):  # then 4 decoding steps, the three sequences as one ragged batch
            x = torch.cat([x[:, x.shape[1] - 4 + t][:, None] for x in xs])  # (B, 1, d_model)
            steps.append(paged_forward(layer, x, cache, seqs)[:, 0])  # (B, d_model)
        for i, x in enumerate(xs):
            full, _ = layer(x, causal=True)  # (1, T, d_model)
            got = torch.cat([outs[i][0], torch.stack([step[i] for step in steps])])
            torch.testing.assert_close(got, full[0], atol=1e-10, rtol=0)


def test_layers_sharing_one_allocator_equal_their_kv_caches():
    """Two layers, one allocator: the first reserves, the second writes the same slots."""
    layers = [_layer(seed=0), _layer(seed=1)]
    allocator = BlockAllocator(16, 4)
    caches = [PagedKVCache(16, 4, 2, 4, dtype=F64, allocator=allocator) for _ in layers]
    torch.manual_seed(3)
    x = torch.randn(2, 6, 16, dtype=F64)
    seqs = [allocator.new_sequence() for _ in range(2)]
    with torch.no_grad():
        for t in range(6):
            h = x[:, t : t + 1]
            for n, (layer, cache) in enumerate(zip(layers, caches, strict=True)):
                h = paged_forward(layer, h, cache, seqs, reserve=n == 0)
        kvs = [KVCache(), KVCache()]
        for t in range(6):
            ref = x[:, t : t + 1]
            for layer, kv in zip(layers, kvs, strict=True):
                ref, _ = layer(ref, causal=True, cache=kv)
    torch.testing.assert_close(h, ref, atol=1e-10, rtol=0)
    assert allocator.length(seqs[0]) == 6


# ---------------------------------------------------------------------------
# Fork, copy-on-write, out of blocks, free
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("prompt", [5, 8])
def test_fork_and_copy_on_write_leave_the_parent_unchanged(prompt):
    torch.manual_seed(0)
    cache = PagedKVCache(16, 4, 1, 3, dtype=F64)
    parent = cache.new_sequence()
    key, value = torch.randn(1, prompt, 3, dtype=F64), torch.randn(1, prompt, 3, dtype=F64)
    cache.append(parent, key, value)
    table = cache.block_table(parent)
    child = cache.fork(parent)
    assert cache.block_table(child) == table and cache.length(child) == prompt
    assert all(cache.allocator.refcount(b) == 2 for b in table)
    free_before = cache.free_blocks
    cache.append(child, torch.ones(1, 2, 3, dtype=F64), torch.ones(1, 2, 3, dtype=F64))
    parent_k, parent_v = cache.keys_values(parent)
    assert torch.equal(parent_k, key) and torch.equal(parent_v, value)  # the parent is unchanged
    assert cache.block_table(parent) == table
    child_k, child_v = cache.keys_values(child)
    for got, want in ((child_k, key), (child_v, value)):  # the copied block's keys and values
        assert torch.equal(got[:, :prompt], want)
        assert torch.equal(got[:, prompt:], torch.ones(1, 2, 3, dtype=F64))
    full = prompt // 4
    assert cache.block_table(child)[:full] == table[:full]  # full blocks stay shared
    if prompt % 4:  # the partly filled block was copied, exactly once
        assert cache.block_table(child)[full] != table[full]
        assert cache.free_blocks == free_before - 1
    else:  # nothing to copy: a new block for the new tokens
        assert cache.free_blocks == free_before - 1 and len(cache.block_table(child)) == full + 1
    # The parent now owns its last block alone: its append copies nothing.
    cache.append(parent, torch.zeros(1, 1, 3, dtype=F64), torch.zeros(1, 1, 3, dtype=F64))
    assert cache.block_table(parent)[: len(table)] == table


def test_running_out_of_blocks_changes_nothing():
    torch.manual_seed(0)
    cache = PagedKVCache(3, 4, 1, 2)
    a = cache.new_sequence()
    cache.append(a, torch.randn(1, 6, 2), torch.randn(1, 6, 2))
    b = cache.fork(a)
    before = _state(cache)
    with pytest.raises(OutOfBlocksError, match="needs 2 blocks, 1 is free; nothing was changed"):
        cache.append(b, torch.randn(1, 3, 2), torch.randn(1, 3, 2))  # copy + 1 new block
    assert _same_state(before, _state(cache))
    layer = MultiHeadAttention(d_model=4, num_heads=2, num_kv_heads=1).eval()
    with pytest.raises(OutOfBlocksError), torch.no_grad():  # the batch as a whole does not fit
        paged_forward(layer, torch.randn(2, 3, 4), cache, [a, b])
    assert _same_state(before, _state(cache))
    with pytest.raises(ValueError, match="NaN"):  # checked before anything changes
        cache.append(a, torch.full((1, 1, 2), float("nan")), torch.zeros(1, 1, 2))
    with pytest.raises(TypeError, match="dtype"):
        cache.append(a, torch.zeros(1, 1, 2, dtype=F64), torch.zeros(1, 1, 2, dtype=F64))
    with pytest.raises(ValueError, match="not a live sequence"):
        cache.append(99, torch.zeros(1, 1, 2), torch.zeros(1, 1, 2))
    assert _same_state(before, _state(cache))
    cache.append(a, torch.randn(1, 2, 2), torch.randn(1, 2, 2))  # this one fits: copy-on-write


def test_free_returns_exactly_the_blocks_in_use():
    cache = PagedKVCache(10, 2, 1, 1)
    a = cache.new_sequence()
    cache.append(a, torch.zeros(1, 5, 1), torch.zeros(1, 5, 1))  # blocks 0, 1, 2
    b = cache.fork(a)
    cache.append(b, torch.zeros(1, 2, 1), torch.zeros(1, 2, 1))  # copies 2 -> 3, adds 4
    assert cache.block_table(b) == [0, 1, 3, 4]
    assert cache.free(a) == [2]  # 0 and 1 are still b's
    assert cache.free_blocks == 6
    assert sorted(cache.free(b)) == [0, 1, 3, 4]
    assert cache.free_blocks == 10 and cache.allocator.sequences == []
    with pytest.raises(ValueError, match="not a live sequence"):
        cache.free(a)


def test_bad_arguments_name_what_they_got():
    cache = PagedKVCache(4, 2, 2, 3)
    seq = cache.new_sequence()
    with pytest.raises(ValueError, match=r"key must have shape \(num_kv_heads, t, head_dim\)"):
        cache.append(seq, torch.zeros(1, 2, 3), torch.zeros(1, 2, 3))
    with pytest.raises(ValueError, match="holds no positions"):
        paged_attention(torch.zeros(1, 2, 3), cache, [seq])
    cache.append(seq, torch.zeros(2, 1, 3), torch.zeros(2, 1, 3))
    with pytest.raises(ValueError, match="must divide"):
        paged_attention(torch.zeros(1, 3, 3), cache, [seq])
    with pytest.raises(ValueError, match="must not repeat"):
        paged_attention(torch.zeros(2, 2, 3), cache, [seq, seq])
    with pytest.raises(ValueError, match="scale must be above 0"):
        paged_attention(torch.zeros(1, 2, 3), cache, [seq], scale=0.0)
    with pytest.raises(TypeError, match="cache must be a PagedKVCache"):
        paged_attention(torch.zeros(1, 2, 3), KVCache(), [seq])
    with pytest.raises(ValueError, match="allocator has num_blocks=4"):
        PagedKVCache(5, 2, 2, 3, allocator=cache.allocator)
    windowed = MultiHeadAttention(d_model=12, num_heads=2, window=3).eval()
    with pytest.raises(ValueError, match="sliding windows"):
        paged_forward(windowed, torch.zeros(1, 1, 12), cache, [seq])


# ---------------------------------------------------------------------------
# The allocator against a reference model (hypothesis)
# ---------------------------------------------------------------------------


class AllocatorMachine(RuleBasedStateMachine):
    """Random append / fork / free against a model that knows only contents and sharing.

    The model keeps, per sequence, its token values and a list of block
    *names* (its own, not the allocator's numbers): fork copies the list, an
    append into a partly filled block that another sequence names too gets a
    fresh name (copy-on-write), new blocks get fresh names. From it follow
    the blocks in use, what an append needs, and what every read returns.
    """

    NUM_BLOCKS, BLOCK = 8, 3

    @initialize()
    def start(self):
        self.cache = PagedKVCache(
            self.NUM_BLOCKS, self.BLOCK, num_kv_heads=1, head_dim=1, dtype=F64
        )
        self.tokens: dict[int, list[float]] = {}
        self.names: dict[int, list[int]] = {}
        self.fresh = 0
        self.counter = 0.0

    def _new_name(self) -> int:
        self.fresh += 1
        return self.fresh

    def _in_use(self) -> int:
        return len({name for names in self.names.values() for name in names})

    def _sharers(self, name: int) -> int:
        return sum(names.count(name) for names in self.names.values())

    @rule()
    def new_sequence(self):
        seq = self.cache.new_sequence()
        self.tokens[seq], self.names[seq] = [], []

    @precondition(lambda self: self.tokens)
    @rule(data=st.data(), count=st.integers(0, 7))
    def append(self, data, count):
        seq = data.draw(st.sampled_from(sorted(self.tokens)))
        length, names = len(self.tokens[seq]), self.names[seq]
        copy = count > 0 and length % self.BLOCK != 0 and self._sharers(names[-1]) > 1
        needed = int(copy) + math.ceil((length + count) / self.BLOCK) - len(names)
        assert self.cache.allocator.blocks_needed([seq], count) == needed
        values = [self.counter + i for i in range(count)]
        key = torch.tensor(values, dtype=F64).view(1, count, 1)
        if needed > self.NUM_BLOCKS - self._in_use():
            before = _state(self.cache)
            with pytest.raises(OutOfBlocksError):
                self.cache.append(seq, key, -key)
            assert _same_state(before, _state(self.cache))
            return
        self.cache.append(seq, key, -key)
        self.counter += count
        if copy:
            names[-1] = self._new_name()
        while len(names) < math.ceil((length + count) / self.BLOCK):
            names.append(self._new_name())
        self.tokens[seq].extend(values)

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def fork(self, data):
        seq = data.draw(st.sampled_from(sorted(self.tokens)))
        child = self.cache.fork(seq)
        self.tokens[child], self.names[child] = list(self.tokens[seq]), list(self.names[seq])

    @precondition(lambda self: self.tokens)
    @rule(data=st.data())
    def free(self, data):
        seq = data.draw(st.sampled_from(sorted(self.tokens)))
        table = self.cache.block_table(seq)
        names = self.names.pop(seq)
        del self.tokens[seq]
        still_named = {name for other in self.names.values() for name in other}
        freed = self.cache.free(seq)
        expected = [b for b, name in zip(table, names, strict=True) if name not in still_named]
        assert freed == expected

    @invariant()
    def matches_the_model(self):
        if not hasattr(self, "cache"):
            return
        allocator = self.cache.allocator
        assert allocator.sequences == sorted(self.tokens)
        assert allocator.free_blocks == self.NUM_BLOCKS - self._in_use()
        counts = [0] * self.NUM_BLOCKS
        for seq, values in self.tokens.items():
            table = allocator.block_table(seq)
            assert len(table) == math.ceil(len(values) / self.BLOCK) == len(self.names[seq])
            for block in table:
                counts[block] += 1
            # Same names <-> same physical blocks.
            for i, j in ((i, j) for i in range(len(table)) for j in range(len(table))):
                assert (table[i] == table[j]) == (self.names[seq][i] == self.names[seq][j])
            key, value = self.cache.keys_values(seq)
            assert key.flatten().tolist() == values
            assert value.flatten().tolist() == [-v for v in values]
        assert counts == [allocator.refcount(b) for b in range(self.NUM_BLOCKS)]
        assert not set(allocator._free) & {b for b, c in enumerate(counts) if c}


TestAllocatorMachine = AllocatorMachine.TestCase
TestAllocatorMachine.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# ---------------------------------------------------------------------------
# Prefix caching
# ---------------------------------------------------------------------------


def _prefill_with_prefix_cache(layers, caches, allocator, tokens, embed):
    """Start a request with prompt ``tokens``, reusing the cached prefix; prefill the rest."""
    seq = allocator.new_sequence(tokens)
    skipped = allocator.length(seq)
    h = embed[tokens[skipped:]][None]  # (1, T_rest, d_model)
    with torch.no_grad():
        for n, (layer, cache) in enumerate(zip(layers, caches, strict=True)):
            h = paged_forward(layer, h, cache, [seq], reserve=n == 0)
    allocator.register(seq, tokens)
    return seq, skipped, h[0]


def test_a_reused_prefix_gives_the_outputs_of_a_recomputed_one():
    layers = [_layer(seed=0), _layer(seed=1)]
    torch.manual_seed(4)
    embed = torch.randn(50, 16, dtype=F64)  # (vocabulary, d_model)
    allocator = PrefixCachingAllocator(40, 4)
    caches = [PagedKVCache(40, 4, 2, 4, dtype=F64, allocator=allocator) for _ in layers]
    system = list(range(10))  # 2 full blocks and 2 tokens
    first, skipped, _ = _prefill_with_prefix_cache(
        layers, caches, allocator, system + [11, 12], embed
    )
    assert skipped == 0
    question = system + [13, 14, 15]
    second, skipped, out = _prefill_with_prefix_cache(layers, caches, allocator, question, embed)
    assert skipped == 8  # the two full blocks of the system prompt
    assert allocator.block_table(second)[:2] == allocator.block_table(first)[:2]
    assert allocator.refcount(allocator.block_table(first)[0]) == 2
    # Recomputed from scratch, without any cache: the same outputs for the new tokens.
    h = embed[question][None]
    with torch.no_grad():
        for layer in layers:
            h, _ = layer(h, causal=True)
    torch.testing.assert_close(out, h[0, skipped:], atol=1e-10, rtol=0)
    # The reused blocks stay alive after the first request ends, and after both.
    allocator.free(first)
    third, skipped, out3 = _prefill_with_prefix_cache(layers, caches, allocator, question, embed)
    assert skipped == 12  # the question's own 3 full blocks: the second request recorded them
    torch.testing.assert_close(out3, h[0, skipped:], atol=1e-10, rtol=0)


def test_one_token_changed_inside_a_block_reuses_nothing_from_that_block_on():
    allocator = PrefixCachingAllocator(20, 4)
    tokens = list(range(16))
    seq = allocator.new_sequence(tokens)
    allocator.reserve([seq], len(tokens))
    assert allocator.register(seq, tokens) == 4
    for changed in range(15):
        other = list(tokens)
        other[changed] = 99
        blocks = allocator.cached_blocks(other + [0])
        assert blocks == allocator.block_table(seq)[: changed // 4]
    assert len(allocator.cached_blocks(tokens + [0])) == 4
    assert len(allocator.cached_blocks(tokens)) == 3  # one token is always left to compute
    hashes = block_hashes(tokens, 4)
    assert block_hashes([9, 9, 9, 9] + tokens[4:], 4)[1] != hashes[1]  # chained


def test_a_block_is_reused_only_after_the_same_blocks_before_it():
    """Prompt [A, B]: block B cached after [C, B] must not be reused (other keys before)."""
    a, b_, c = [1, 1], [2, 2], [3, 3]
    allocator = PrefixCachingAllocator(8, 2)
    for tokens in (c + b_, a + [4, 4]):
        seq = allocator.new_sequence()
        allocator.reserve([seq], 4)
        allocator.register(seq, tokens)
    assert len(allocator.cached_blocks(a + b_ + [0])) == 1  # A only, not C's B
    assert len(allocator.cached_blocks(c + b_ + [0])) == 2


def test_a_freed_cached_block_is_reused_until_the_free_list_hands_it_out():
    allocator = PrefixCachingAllocator(2, 2)
    seq = allocator.new_sequence([1, 2, 3])
    allocator.reserve([seq], 3)
    allocator.register(seq, [1, 2, 3])
    assert allocator.free(seq) == [0, 1] and allocator.free_blocks == 2
    again = allocator.new_sequence([1, 2, 3])
    assert allocator.block_table(again) == [0] and allocator.free_blocks == 1
    allocator.free(again)
    filler = allocator.new_sequence()
    allocator.reserve([filler], 4)  # takes both blocks: block 0's hash is forgotten
    assert allocator.cached_blocks([1, 2, 3]) == []


# ---------------------------------------------------------------------------
# The exercise checkers
# ---------------------------------------------------------------------------


def test_blocks_for_batch_checker(capsys):
    assert check_blocks_for_batch(lambda lengths, b: sum(-(-n // b) for n in lengths))
    assert "all 6 cases pass" in capsys.readouterr().out
    assert not check_blocks_for_batch(lambda lengths, b: -(-sum(lengths) // b))  # shared blocks
    assert "3 blocks, not 1" in capsys.readouterr().out
    assert not check_blocks_for_batch(lambda lengths, b: sum(n // b + 1 for n in lengths))
    assert "exactly" in capsys.readouterr().out
    assert reference_blocks_for_batch([7, 9, 16, 17], 8) == 1 + 2 + 2 + 3


def test_blocks_for_samples_checker(capsys):
    def right(p, n, g, b):
        return p // b + n * -(-(p % b + g) // b)

    assert check_blocks_for_samples(right)
    assert "all 6 cases pass" in capsys.readouterr().out

    def no_sharing(p, n, g, b):  # n full copies of the prompt
        return n * -(-(p + g) // b)

    assert not check_blocks_for_samples(no_sharing)
    assert "✗ check_blocks_for_samples: case 1" in capsys.readouterr().out

    def forgets_the_copy(p, n, g, b):  # the partly filled block shared for ever
        return -(-p // b) + n * -(-g // b)

    assert not check_blocks_for_samples(forgets_the_copy)
    assert "last block half full" in capsys.readouterr().out
