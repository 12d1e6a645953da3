"""Chapter 15's package pieces: the repeated-token task, the metrics, TinyDecoder, generate.

The metrics are checked on hand-built patterns (the prefix-matching offset
is the known pitfall) and against plain loops; the decoder's blocks against
PyTorch's own attention and transformer layers; cached decoding against
decoding without a cache; training for determinism.
"""

from __future__ import annotations

import copy
import inspect
import json
import math
import pathlib
import re

import numpy as np
import pytest
import torch
from torch import nn

from selfattention import (
    KVCache,
    RepeatTask,
    TinyDecoder,
    copy_losses,
    generate,
    prefix_matching_score,
    previous_token_score,
    train_induction,
)
from selfattention.exercises import ch15, check_prefix_matching_score
from selfattention.toys.decoder import DecoderBlock, head_weights
from selfattention.toys.induction import (
    Checkpoint,
    RepeatBatch,
    measure,
    prefix_matching_keys,
)

pytestmark = pytest.mark.usefixtures("float64_and_seed")
ROOT = pathlib.Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "15_induction_heads.ipynb"


# --- the task -------------------------------------------------------------


def test_sample_is_deterministic_and_a_generator_advances():
    task = RepeatTask()
    assert torch.equal(task.sample(8, 3).ids, task.sample(8, 3).ids)
    assert not torch.equal(task.sample(8, 3).ids, task.sample(8, 4).ids)
    rng = np.random.default_rng(0)
    first, second = task.sample(8, rng), task.sample(8, rng)
    assert not torch.equal(first.ids, second.ids)
    assert torch.equal(first.ids, task.sample(8, np.random.default_rng(0)).ids)


@pytest.mark.parametrize("offset", [None, 12, 13])
def test_every_sequence_has_one_repeat_where_the_batch_says(offset):
    task = RepeatTask(offset=offset)
    batch = task.sample(300, seed=1)
    assert batch.ids.dtype == torch.int64 and batch.ids.shape == (300, 26)
    assert (batch.ids[:, 0] == task.bos).all()
    assert ((batch.ids[:, 1:] >= 0) & (batch.ids[:, 1:] < task.vocab_size)).all()
    for b in range(len(batch)):
        s, s2, n = int(batch.first[b]), int(batch.second[b]), int(batch.repeat[b])
        assert task.min_repeat <= n <= task.max_repeat
        assert 1 <= s and s + n <= s2 and s2 + n <= 26  # no overlap, inside
        if offset is not None:
            assert s2 - s == offset
        assert torch.equal(batch.ids[b, s : s + n], batch.ids[b, s2 : s2 + n])
        expected = torch.zeros(26, dtype=torch.bool)
        expected[s2 + 1 : s2 + n] = True
        assert torch.equal(batch.copyable[b], expected)
        assert torch.equal(batch.queries[b, :-1], expected[1:])
        assert not batch.queries[b, -1]


def test_random_task_draws_every_length_and_many_offsets():
    batch = RepeatTask().sample(2000, seed=0)
    assert set(batch.repeat.tolist()) == set(range(4, 13))
    offsets = set((batch.second - batch.first).tolist())
    assert min(offsets) == 4 and max(offsets) == 21 and len(offsets) == 18


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"vocab_size": 0}, ValueError, "vocab_size must be positive"),
        ({"length": 2.5}, TypeError, "length must be an int"),
        ({"min_repeat": 1}, ValueError, "min_repeat"),
        ({"min_repeat": 6, "max_repeat": 5}, ValueError, "min_repeat"),
        ({"max_repeat": 13}, ValueError, "do not fit"),
        ({"offset": 11}, ValueError, "offset must satisfy"),
        ({"offset": 14}, ValueError, "exceeds"),
        ({"offset": True}, TypeError, "offset must be an int"),
    ],
)
def test_bad_tasks_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        RepeatTask(**kwargs)


def test_sample_refuses_bad_arguments():
    with pytest.raises(ValueError, match="batch_size must be positive"):
        RepeatTask().sample(0)
    with pytest.raises(TypeError, match="seed must be an int"):
        RepeatTask().sample(2, seed=1.5)


# --- the metrics ----------------------------------------------------------


def one_hot_heads(length, targets):
    """(1, h, T, T): head r sends query i to key targets[r][i]."""
    weights = torch.zeros(1, len(targets), length, length)
    for r, keys in enumerate(targets):
        for i, j in enumerate(keys):
            weights[0, r, i, j] = 1.0
    return weights


def test_prefix_matching_offset_on_a_hand_built_pattern():
    # BOS a b c d a b c d: query i >= 5 finds its token at i - 4; the key after it is i - 3.
    ids = torch.tensor([[9, 0, 1, 2, 3, 0, 1, 2, 3]])
    after = [0, 1, 2, 3, 4, 2, 3, 4, 5]
    itself = [0, 1, 2, 3, 4, 1, 2, 3, 4]  # one step too early
    too_late = [0, 1, 2, 3, 4, 3, 4, 5, 6]  # one step too late
    previous = [0, 0, 1, 2, 3, 4, 5, 6, 7]
    weights = one_hot_heads(9, [after, itself, too_late, previous])
    assert prefix_matching_score(weights, ids).tolist() == [1.0, 0.0, 0.0, 0.0]
    assert previous_token_score(weights).tolist() == [0.0, 0.0, 0.0, 1.0]
    keys = prefix_matching_keys(ids)[0]  # (T, T)
    assert [row.nonzero().flatten().tolist() for row in keys] == [
        [],
        [],
        [],
        [],
        [],
        [2],
        [3],
        [4],
        [5],
    ]


def test_prefix_matching_counts_every_earlier_occurrence_and_the_query_itself():
    ids = torch.tensor([[9, 0, 1, 0, 2, 0, 0]])
    keys = prefix_matching_keys(ids)[0]
    assert keys[5].nonzero().flatten().tolist() == [2, 4]  # a occurred at 1 and 3
    assert keys[6].nonzero().flatten().tolist() == [2, 4, 6]  # and at 5: key 6 is i
    assert not keys[0].any() and not keys[1].any()


def loop_prefix_matching(weights, ids, queries=None):
    batch, heads, length, _ = weights.shape
    totals, count = torch.zeros(heads), 0
    for b in range(batch):
        for i in range(length):
            keys = [j for j in range(1, i + 1) if ids[b, j - 1] == ids[b, i]]
            if not keys or (queries is not None and not queries[b, i]):
                continue
            totals += weights[b, :, i, keys].sum(dim=-1)
            count += 1
    return totals / count


def random_causal_weights(batch, heads, length, generator):
    scores = torch.randn(batch, heads, length, length, generator=generator)
    keep = torch.ones(length, length, dtype=torch.bool).tril()
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)


def test_prefix_matching_equals_a_plain_loop():
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 5, (4, 15), generator=generator)
    weights = random_causal_weights(4, 3, 15, generator)
    queries = torch.rand(4, 15, generator=generator) > 0.4
    assert torch.allclose(prefix_matching_score(weights, ids), loop_prefix_matching(weights, ids))
    assert torch.allclose(
        prefix_matching_score(weights, ids, queries), loop_prefix_matching(weights, ids, queries)
    )


def test_previous_token_score_equals_a_plain_loop_and_its_uniform_value():
    generator = torch.Generator().manual_seed(1)
    weights = random_causal_weights(3, 2, 10, generator)
    loop = torch.stack(
        [torch.stack([weights[:, r, i, i - 1] for i in range(1, 10)]).mean() for r in range(2)]
    )
    assert torch.allclose(previous_token_score(weights), loop)
    causal = torch.ones(10, 10).tril()
    uniform = (causal / causal.sum(dim=1, keepdim=True))[None, None]
    expected = sum(1 / (i + 1) for i in range(1, 10)) / 9
    assert math.isclose(float(previous_token_score(uniform)[0]), expected)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: previous_token_score(torch.zeros(2, 3, 3)), ValueError, r"\(B, h, T, T\)"),
        (lambda: previous_token_score(torch.zeros(1, 1, 4, 5)), ValueError, r"\(B, h, T, T\)"),
        (lambda: previous_token_score(torch.zeros(1, 1, 1, 1)), ValueError, "T >= 2"),
        (lambda: previous_token_score(np.zeros((1, 1, 3, 3))), TypeError, "weights must be"),
        (
            lambda: prefix_matching_score(torch.zeros(1, 1, 3, 3), torch.zeros(1, 3)),
            TypeError,
            "ids must be an int64",
        ),
        (
            lambda: prefix_matching_score(
                torch.zeros(1, 1, 3, 3), torch.zeros(2, 3, dtype=torch.int64)
            ),
            ValueError,
            r"ids must have shape \(1, 3\)",
        ),
        (
            lambda: prefix_matching_score(
                torch.zeros(1, 1, 3, 3), torch.tensor([[9, 0, 0]]), torch.ones(1, 3)
            ),
            TypeError,
            "queries must be a bool",
        ),
        (
            lambda: prefix_matching_score(torch.zeros(1, 1, 3, 3), torch.tensor([[9, 0, 1]])),
            ValueError,
            "no query of ids has an earlier occurrence",
        ),
        (
            lambda: prefix_matching_score(
                torch.zeros(1, 1, 3, 3),
                torch.tensor([[9, 0, 0]]),
                torch.tensor([[False, True, False]]),
            ),
            ValueError,
            "no query chosen by queries has an earlier occurrence",
        ),
        (
            lambda: previous_token_score(torch.full((1, 1, 3, 3), float("nan"))),
            ValueError,
            r"weights contains NaN \(shape \(1, 1, 3, 3\)\)",
        ),
        (
            lambda: prefix_matching_score(
                torch.zeros(1, 1, 3, 3), torch.tensor([[9, 0, 0]], device="meta")
            ),
            ValueError,
            "ids is on the meta device",
        ),
        (
            lambda: previous_token_score(torch.zeros(1, 1, 3, 3, device="meta")),
            ValueError,
            "weights is on the meta device",
        ),
        (
            lambda: prefix_matching_keys([[9, 0, 0]]),
            TypeError,
            "ids must be an int64 torch.Tensor",
        ),
        (lambda: prefix_matching_keys(torch.zeros(3, dtype=torch.int64)), ValueError, r"\(B, T\)"),
    ],
)
def test_metrics_name_their_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_copy_losses_refuse_non_finite_logits():
    ids = torch.tensor([[3, 0, 1, 0, 1]])  # (B, T) = (1, 5)
    copyable = torch.tensor([[False, False, False, False, True]])
    logits = torch.zeros(1, 5, 4)  # (B, T, num_ids)
    logits[0, 2, 1] = float("inf")
    with pytest.raises(ValueError, match=r"logits contains inf \(shape \(1, 5, 4\)\)"):
        copy_losses(logits, ids, copyable)
    with pytest.raises(ValueError, match="copyable is on the meta device"):
        copy_losses(torch.zeros(1, 5, 4), ids, copyable.to("meta"))


def test_copy_losses_split_the_cross_entropy():
    generator = torch.Generator().manual_seed(2)
    batch = RepeatTask().sample(16, seed=2)
    logits = torch.randn(16, 26, 33, generator=generator)
    per_token = nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, 33), batch.ids[:, 1:].reshape(-1), reduction="none"
    ).view(16, 25)
    mask = batch.copyable[:, 1:]
    copyable, other = copy_losses(logits, batch.ids, batch.copyable)
    assert math.isclose(copyable, float(per_token[mask].mean()))
    assert math.isclose(other, float(per_token[~mask].mean()))
    uniform = copy_losses(torch.zeros(16, 26, 33), batch.ids, batch.copyable)
    assert all(math.isclose(loss, math.log(33)) for loss in uniform)


def test_copy_losses_name_their_bad_arguments():
    batch = RepeatTask().sample(2, seed=0)
    with pytest.raises(ValueError, match=r"logits must have shape \(B, T, num_ids\)"):
        copy_losses(torch.zeros(2, 26), batch.ids, batch.copyable)
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 10\)"):
        copy_losses(torch.zeros(2, 26, 10), batch.ids, batch.copyable)
    with pytest.raises(ValueError, match="copyable must mark some targets"):
        copy_losses(torch.zeros(2, 26, 33), batch.ids, torch.zeros(2, 26, dtype=torch.bool))
    with pytest.raises(TypeError, match="copyable must be a bool"):
        copy_losses(torch.zeros(2, 26, 33), batch.ids, batch.copyable.long())


# --- the model ------------------------------------------------------------


@pytest.mark.parametrize("attention_only", [True, False])
def test_future_tokens_never_change_earlier_logits(attention_only):
    model = TinyDecoder(12, d_model=16, num_layers=2, attention_only=attention_only).eval()
    ids = torch.randint(0, 12, (2, 9))
    changed = ids.clone()
    changed[:, 5:] = (changed[:, 5:] + 1) % 12
    with torch.no_grad():
        before, _ = model(ids)
        after, _ = model(changed)
    assert torch.equal(before[:, :5], after[:, :5])
    assert not torch.allclose(before[:, 5:], after[:, 5:])


def test_attention_only_block_equals_pytorch_multihead_attention():
    block = DecoderBlock(d_model=16, num_heads=4).eval()
    reference = nn.MultiheadAttention(16, 4, batch_first=True)
    with torch.no_grad():
        reference.in_proj_weight.copy_(
            torch.cat([block.attention.q_proj.weight, block.attention.k_proj.weight,
                       block.attention.v_proj.weight])
        )  # fmt: skip
        reference.in_proj_bias.copy_(
            torch.cat([block.attention.q_proj.bias, block.attention.k_proj.bias,
                       block.attention.v_proj.bias])
        )  # fmt: skip
        reference.out_proj.load_state_dict(block.attention.out_proj.state_dict())
        x = torch.randn(3, 7, 16)
        ours, weights = block(x)
        blocked = torch.ones(7, 7, dtype=torch.bool).triu(1)  # True = blocked
        theirs, their_weights = reference(x, x, x, attn_mask=blocked, average_attn_weights=False)
    assert torch.allclose(ours, x + theirs, atol=1e-12)
    assert torch.allclose(weights, their_weights, atol=1e-12)


def test_full_block_equals_pytorch_transformer_encoder_layer():
    block = DecoderBlock(d_model=16, num_heads=2, attention_only=False, d_mlp=24).eval()
    reference = nn.TransformerEncoderLayer(
        16, 2, dim_feedforward=24, dropout=0.0, activation="gelu", batch_first=True,
        norm_first=True,
    ).eval()  # fmt: skip
    attention = block.attention
    with torch.no_grad():
        reference.self_attn.in_proj_weight.copy_(
            torch.cat([attention.q_proj.weight, attention.k_proj.weight, attention.v_proj.weight])
        )
        reference.self_attn.in_proj_bias.copy_(
            torch.cat([attention.q_proj.bias, attention.k_proj.bias, attention.v_proj.bias])
        )
        reference.self_attn.out_proj.load_state_dict(attention.out_proj.state_dict())
        reference.norm1.load_state_dict(block.norm_attention.state_dict())
        reference.norm2.load_state_dict(block.norm_mlp.state_dict())
        reference.linear1.load_state_dict(block.mlp[0].state_dict())
        reference.linear2.load_state_dict(block.mlp[2].state_dict())
        x = torch.randn(2, 6, 16)
        ours, _ = block(x)
        causal = nn.Transformer.generate_square_subsequent_mask(6)
        theirs = reference(x, src_mask=causal, is_causal=True)
    assert torch.allclose(ours, theirs, atol=1e-12)


def test_ablating_a_head_equals_zeroing_its_columns_of_w_o():
    model = TinyDecoder(10, d_model=16, num_layers=2, num_heads=4).eval()
    ids = torch.randint(0, 10, (2, 8))
    manual = copy.deepcopy(model)
    with torch.no_grad():
        for layer, head in [(0, 1), (1, 3), (1, 0)]:
            manual.blocks[layer].attention.out_proj.weight[:, 4 * head : 4 * head + 4] = 0.0
        ablated, ablated_weights = model(ids, ablate=[(0, 1), (1, 3), (1, 0)])
        expected, expected_weights = manual(ids)
        again, _ = model(ids)
        plain, _ = copy.deepcopy(model)(ids)
    assert torch.allclose(ablated, expected, atol=1e-12)
    assert torch.allclose(ablated_weights[0], expected_weights[0], atol=1e-12)
    assert torch.equal(again, plain)  # the ablation does not stick


def test_ablating_every_head_of_an_attention_only_model_leaves_embeddings_and_biases():
    model = TinyDecoder(10, d_model=8, num_layers=2, num_heads=2).eval()
    ids = torch.randint(0, 10, (1, 5))
    every = [(layer, r) for layer in range(2) for r in range(2)]
    with torch.no_grad():
        logits, _ = model(ids, ablate=every)
        x = model.embedding(ids) + model.positions(torch.arange(5))
        for block in model.blocks:
            x = x + block.attention.out_proj.bias
        expected = model.unembedding(x)
    assert torch.allclose(logits, expected, atol=1e-12)


@pytest.mark.parametrize("attention_only", [True, False])
def test_cached_forward_equals_the_full_forward(attention_only):
    model = TinyDecoder(12, d_model=16, num_layers=3, attention_only=attention_only).eval()
    ids = torch.randint(0, 12, (2, 10))
    caches = [KVCache() for _ in range(3)]
    with torch.no_grad():
        full, full_weights = model(ids)
        first, _ = model(ids[:, :4], caches=caches)  # a prefill of 4 tokens
        steps = [model(ids[:, t : t + 1], caches=caches) for t in range(4, 10)]
    stepped = torch.cat([first] + [logits for logits, _ in steps], dim=1)
    assert torch.allclose(stepped, full, atol=1e-12)
    last_weights = steps[-1][1]  # (B, h, 1, 10) per layer
    for layer in range(3):
        assert torch.allclose(last_weights[layer][:, :, 0], full_weights[layer][:, :, -1])
    assert all(len(cache) == 10 for cache in caches)


def test_one_layer_without_positions_sees_its_prefix_as_a_set():
    model = TinyDecoder(12, d_model=16, num_layers=1, positional=False).eval()
    ids = torch.tensor([[11, 3, 5, 7, 2]])
    shuffled = torch.tensor([[11, 7, 3, 5, 2]])
    with torch.no_grad():
        last, _ = model(ids)
        other, _ = model(shuffled)
    assert torch.allclose(last[:, -1], other[:, -1], atol=1e-12)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda m: m(torch.zeros(1, 3)), TypeError, "ids must be an int64"),
        (lambda m: m(torch.zeros(3, dtype=torch.int64)), ValueError, r"\(B, T\)"),
        (lambda m: m(torch.tensor([[0, 10]])), ValueError, r"\[0, 10\)"),
        (lambda m: m(torch.zeros(1, 9, dtype=torch.int64)), ValueError, "max_len=8"),
        (lambda m: m(torch.zeros(1, 2, dtype=torch.int64), caches=[KVCache()]), TypeError, "one"),
        (
            lambda m: m(torch.zeros(1, 2, dtype=torch.int64), ablate=[(2, 0)]),
            ValueError,
            "outside",
        ),
        (lambda m: m(torch.zeros(1, 2, dtype=torch.int64), ablate=[0]), TypeError, "pairs"),
        (lambda m: m(torch.zeros(1, 2, dtype=torch.int64), ablate=[(0, -1)]), ValueError, "head"),
    ],
)
def test_the_model_names_its_bad_inputs(call, error, match):
    model = TinyDecoder(10, d_model=8, num_layers=2, num_heads=2, max_len=8)
    with pytest.raises(error, match=match):
        call(model)


def test_the_model_refuses_bad_settings():
    with pytest.raises(ValueError, match="not divisible"):
        TinyDecoder(10, d_model=10, num_heads=4)
    with pytest.raises(TypeError, match="attention_only must be a bool"):
        TinyDecoder(10, attention_only=1)
    with pytest.raises(ValueError, match="num_layers must be positive"):
        TinyDecoder(10, num_layers=0)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"d_model": 10, "num_heads": 4},
            ValueError,
            "d_model=10 is not divisible by num_heads=4",
        ),
        ({"d_mlp": 0, "attention_only": False}, ValueError, "d_mlp must be positive, got 0"),
        ({"d_mlp": -1}, ValueError, "d_mlp must be positive, got -1"),  # unused, still checked
        ({"d_mlp": "64"}, TypeError, "d_mlp must be an int, got str '64'"),
    ],
)
def test_a_bad_model_is_refused_before_anything_is_built(kwargs, error, match):
    state = torch.get_rng_state()
    with pytest.raises(error, match=match):
        TinyDecoder(10, **kwargs)
    assert torch.equal(torch.get_rng_state(), state), "no layer was initialised"


def test_a_block_checks_its_mlp_width_even_without_an_mlp():
    with pytest.raises(ValueError, match="d_mlp must be positive, got -1"):
        DecoderBlock(8, 2, d_mlp=-1)
    with pytest.raises(TypeError, match="attention_only must be a bool, got int 0"):
        DecoderBlock(8, 2, attention_only=0)


def test_a_cache_that_does_not_fit_layer_1_leaves_layer_0s_cache_alone():
    # Before issue 18's rule reached the decoder, layer 0 appended its keys and
    # then layer 1 raised: the cache of layer 0 grew from 2 to 3 positions.
    model = TinyDecoder(10, d_model=8, num_layers=2, num_heads=2).eval()
    caches = [KVCache(), KVCache()]
    with torch.no_grad():
        model(torch.tensor([[9, 1]]), caches=caches)
    other = torch.float32 if caches[1].key.dtype == torch.float64 else torch.float64
    caches[1].key = caches[1].key.to(other)  # layer 1's cache now holds another dtype
    caches[1].value = caches[1].value.to(other)
    before = [(c.key, c.value, c.position) for c in caches]
    with pytest.raises(TypeError, match=r"caches\[1\] does not fit layer 1: .*dtype"):
        model(torch.tensor([[2]]), caches=caches)
    assert [(c.key, c.value, c.position) for c in caches] == before
    assert [len(c) for c in caches] == [2, 2]


def test_a_layer_that_fails_midway_puts_every_cache_back():
    # Layer 1 has a NaN weight: its output is not finite and it raises after
    # layer 0 has already stored its keys. Layer 0's cache is put back.
    model = TinyDecoder(10, d_model=8, num_layers=2, num_heads=2).eval()
    caches = [KVCache(), KVCache()]
    with torch.no_grad():
        model(torch.tensor([[9, 1]]), caches=caches)
        model.blocks[1].attention.v_proj.weight[0, 0] = float("nan")
    before = [(c.key, c.value, c.position) for c in caches]
    with pytest.raises(ValueError, match=r"v_proj.weight \(shape \(8, 8\)\) holds NaN"):
        model(torch.tensor([[2]]), caches=caches)
    assert all(
        c.key is key and c.value is value and c.position == position
        for c, (key, value, position) in zip(caches, before, strict=True)
    )
    assert [len(c) for c in caches] == [2, 2]


@pytest.mark.parametrize(
    ("caches", "match"),
    [
        (KVCache(), "caches must be a list with one KVCache per layer"),
        ("caches", "caches must be a list with one KVCache per layer"),
        ([KVCache(), "cache"], r"caches must hold one KVCache per layer \(2\)"),
    ],
)
def test_caches_that_are_not_a_list_of_caches_are_named(caches, match):
    model = TinyDecoder(10, d_model=8, num_layers=2, num_heads=2)
    with pytest.raises(TypeError, match=match):
        model(torch.tensor([[9, 1]]), caches=caches)


def test_ids_and_ablate_of_the_wrong_kind_are_named():
    model = TinyDecoder(10, d_model=8, num_layers=2, num_heads=2)
    with pytest.raises(TypeError, match="ablate must be an iterable of .* got int 5"):
        model(torch.tensor([[9, 1]]), ablate=5)
    with pytest.raises(ValueError, match="ids is on the meta device"):
        model(torch.tensor([[9, 1]], device="meta"))
    with pytest.raises(TypeError, match=r"ids must be an int64 torch.Tensor, got ndarray"):
        model(np.array([[9, 1]]))


# --- generation -----------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("attention_only", [True, False])
def test_cached_and_uncached_greedy_decoding_agree(seed, attention_only):
    torch.manual_seed(seed)
    model = TinyDecoder(9, d_model=16, num_layers=2, attention_only=attention_only)
    prompt = torch.randint(0, 9, (3, 4))
    cached = generate(model, prompt, steps=12)
    uncached = generate(model, prompt, steps=12, cache=False)
    assert cached.shape == (3, 16)
    assert torch.equal(cached, uncached)
    assert torch.equal(cached[:, :4], prompt)
    # each generated token is the argmax of the model's logits on what came before
    with torch.no_grad():
        logits, _ = model.eval()(cached[:, :-1])
    assert torch.equal(logits[:, 3:].argmax(dim=-1), cached[:, 4:])


def test_generate_restores_the_mode_and_names_bad_arguments():
    model = TinyDecoder(9, d_model=8, max_len=10).train()
    generate(model, torch.tensor([[1, 2]]), steps=3)
    assert model.training
    with pytest.raises(ValueError, match="exceeds the model's max_len=10"):
        generate(model, torch.tensor([[1, 2]]), steps=9)
    with pytest.raises(ValueError, match="steps must be positive"):
        generate(model, torch.tensor([[1, 2]]), steps=0)
    with pytest.raises(TypeError, match="cache must be a bool"):
        generate(model, torch.tensor([[1, 2]]), steps=1, cache="yes")
    with pytest.raises(TypeError, match="model must be a TinyDecoder"):
        generate(nn.Linear(2, 2), torch.tensor([[1, 2]]), steps=1)


def test_head_weights_are_the_models_weights():
    model = TinyDecoder(9, d_model=8, num_layers=3, num_heads=2)
    ids = torch.tensor([8, 1, 2, 1, 2])
    maps = head_weights(model, ids)
    with torch.no_grad():
        _, weights = model(ids[None])
    assert maps.shape == (3, 2, 5, 5) and maps.dtype == np.float64
    assert np.array_equal(maps, torch.stack([w[0] for w in weights]).numpy())
    assert np.allclose(np.triu(maps, k=1), 0.0)
    with pytest.raises(ValueError, match=r"one sequence of shape \(T,\)"):
        head_weights(model, ids[None])


# --- training -------------------------------------------------------------


def train_lines(perturb=0.0, steps=60):
    task = RepeatTask()
    torch.manual_seed(0)
    model = TinyDecoder(task.num_ids, num_layers=2)
    if perturb:
        generator = torch.Generator().manual_seed(123)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(perturb * torch.randn(parameter.shape, generator=generator))
    lines = []
    history = train_induction(
        model, task, task.sample(32, seed=1), steps=steps, log_every=20, log=lines.append
    )
    return lines, history, model


def test_training_is_deterministic_and_restores_the_global_settings():
    threads = torch.get_num_threads()
    lines, history, model = train_lines()
    assert torch.get_num_threads() == threads
    assert not torch.are_deterministic_algorithms_enabled()
    assert lines == train_lines()[0]
    assert lines == train_lines(perturb=1e-12)[0]
    assert [checkpoint.step for checkpoint in history] == [0, 20, 40, 60]
    assert lines == [checkpoint.line() for checkpoint in history]
    assert all(len(line) <= 79 for line in lines)
    assert not model.training
    # the last checkpoint is what measure() gives on the same batch
    assert measure(model, RepeatTask().sample(32, seed=1), step=60) == history[-1]


def test_training_lowers_the_loss():
    _, history, _ = train_lines(steps=100)
    assert history[-1].other_loss < history[0].other_loss - 0.2


def test_training_names_bad_arguments():
    task = RepeatTask()
    model = TinyDecoder(task.num_ids)
    batch = task.sample(4, seed=0)
    with pytest.raises(TypeError, match="task must be a RepeatTask"):
        train_induction(model, "task", batch)
    with pytest.raises(TypeError, match="eval_batch must be a RepeatBatch"):
        train_induction(model, task, batch.ids)
    with pytest.raises(ValueError, match="lr must be"):
        train_induction(model, task, batch, lr=0.0)
    with pytest.raises(ValueError, match="steps must be positive"):
        train_induction(model, task, batch, steps=0)
    with pytest.raises(TypeError, match="log must be callable"):
        train_induction(model, task, batch, log="print")
    bigger = RepeatTask(vocab_size=40)
    with pytest.raises(ValueError, match=r"task does not fit the model: its ids reach 40"):
        train_induction(model, bigger, batch)
    with pytest.raises(ValueError, match=r"eval_batch does not fit the model: .*max_len=64"):
        train_induction(model, task, RepeatTask(length=70).sample(2))


def test_training_that_raises_midway_leaves_the_model_as_it_was():
    task = RepeatTask()
    torch.manual_seed(0)
    model = TinyDecoder(task.num_ids, num_layers=2).train()
    params = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    rng = torch.get_rng_state()
    seen = []

    def failing_log(line):
        seen.append(line)
        torch.rand(1)  # moves torch's random state, which must be put back
        if len(seen) == 2:  # after log_every = 2 optimizer steps
            raise RuntimeError("the log failed")

    with pytest.raises(RuntimeError, match="the log failed"):
        train_induction(model, task, task.sample(4, seed=1), steps=6, log_every=2, log=failing_log)
    assert len(seen) == 2
    now = model.state_dict()
    assert all(torch.equal(now[name], tensor) for name, tensor in params.items())
    assert all(parameter.grad is None for parameter in model.parameters())
    assert model.training and torch.equal(torch.get_rng_state(), rng)
    assert not torch.are_deterministic_algorithms_enabled()


def test_measure_restores_the_mode_and_checks_its_step():
    task = RepeatTask()
    model = TinyDecoder(task.num_ids, max_len=8).train()
    with pytest.raises(ValueError, match=r"batch does not fit the model: .*max_len=8"):
        measure(model, task.sample(2))
    assert model.training
    with pytest.raises(TypeError, match="step must be an int, got float 1.5"):
        measure(model, task.sample(2), step=1.5)

    class Broken(nn.Module):
        def forward(self, ids):
            raise ValueError("broken model")

    broken = Broken().train()
    with pytest.raises(ValueError, match="broken model"):
        measure(broken, task.sample(2))
    assert broken.training


def test_checkpoint_line_is_rounded():
    line = Checkpoint(750, 1.85412, 3.59703, (0.0712, 0.4249), (0.6461, 0.6149)).line()
    assert line == "step  750  loss: copyable 1.854  other 3.597  prev 0.07 0.42  prefix 0.65 0.61"


def test_repeat_batch_length():
    assert len(RepeatTask().sample(7, seed=0)) == 7
    assert isinstance(RepeatTask().sample(1, seed=0), RepeatBatch)


# --- the chapter's loop and the exercise checker ----------------------------


def test_the_loop_shown_in_the_chapter_is_the_one_that_runs():
    """Chapter 15 shows the heart of train_induction in a code block; it must not drift."""
    cells = json.loads(CHAPTER.read_text())["cells"]
    text = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")
    block = re.search(r"```python\n(rng = .*?)```", text, re.S)
    assert block, "chapter 15 lost its training-loop code block"
    source = inspect.getsource(train_induction)

    def code_only(line):
        return re.sub(r"\s+", " ", line.split("#")[0]).strip()

    body = {code_only(line) for line in source.splitlines()}
    shown = [code_only(line) for line in block.group(1).splitlines() if code_only(line)]
    missing = [line for line in shown if line not in body]
    assert not missing, f"lines of the chapter's loop not in train_induction: {missing}"


def test_checker_doctests():
    import doctest

    result = doctest.testmod(ch15)
    assert result.attempted > 0 and result.failed == 0


def test_checker_accepts_the_package_and_a_loop(capsys):
    assert check_prefix_matching_score(prefix_matching_score) is True
    assert check_prefix_matching_score(loop_prefix_matching) is True
    assert "all 4 cases pass" in capsys.readouterr().out


def off_by_one(weights, ids):
    """Compares the key's own token with the query's: finds the occurrence, not its successor."""
    length = ids.shape[1]
    earlier = torch.ones(length, length, dtype=torch.bool).tril(-1)
    keys = (ids[:, None, :] == ids[:, :, None]) & earlier
    chosen = keys.any(dim=-1)
    return (weights * keys[:, None]).sum(-1).transpose(0, 1)[:, chosen].mean(-1)


def first_occurrence_only(weights, ids):
    """Counts only the key after the first earlier occurrence."""
    keys = prefix_matching_keys(ids)
    first = keys & (keys.cumsum(dim=-1) == 1)
    chosen = keys.any(dim=-1)
    return (weights * first[:, None]).sum(-1).transpose(0, 1)[:, chosen].mean(-1)


def strictly_before(weights, ids):
    """Refuses key j = i, although the token before the query may be the query's own."""
    keys = prefix_matching_keys(ids) & torch.ones(ids.shape[1], ids.shape[1]).tril(-1).bool()
    chosen = keys.any(dim=-1)
    return (weights * keys[:, None]).sum(-1).transpose(0, 1)[:, chosen].mean(-1)


@pytest.mark.parametrize(
    ("wrong", "case"),
    [(off_by_one, "case 1"), (first_occurrence_only, "case 2"), (strictly_before, "case 3")],
)
def test_checker_names_the_first_failing_case(wrong, case, capsys):
    assert check_prefix_matching_score(wrong) is False
    out = capsys.readouterr().out
    assert f"✗ check_prefix_matching_score: {case} (" in out
    assert all(len(line) <= 79 for line in out.splitlines())
