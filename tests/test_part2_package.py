"""Part II's package additions against PyTorch: grouped-query attention, the
key/value cache, causal alignment and padding masks."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch import nn
from torch.nn.attention.bias import causal_lower_right, causal_upper_left

from selfattention import (
    KVCache,
    MultiHeadAttention,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
)

ATOL = 1e-10


# float64 at tight tolerance, seeded (the fixture lives in conftest.py).
pytestmark = pytest.mark.usefixtures("float64_and_seed")


def reference_gqa(module, query, key, value, **sdpa_options):
    """The module's projections around PyTorch's fused attention with enable_gqa."""
    q = module.split_heads(module.q_proj(query))
    k = module.split_heads(module.k_proj(key), module.num_kv_heads)
    v = module.split_heads(module.v_proj(value), module.num_kv_heads)
    context = F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **sdpa_options)
    return module.out_proj(module.merge_heads(context))


# Grouped-query and multi-query attention


@pytest.mark.parametrize("num_heads,num_kv_heads", [(4, 4), (4, 2), (4, 1), (6, 3), (6, 2)])
def test_gqa_matches_sdpa_enable_gqa(num_heads, num_kv_heads):
    module = MultiHeadAttention(12, num_heads, num_kv_heads=num_kv_heads)
    query, memory = torch.randn(2, 5, 12), torch.randn(2, 7, 12)
    output, weights = module(query, memory)
    assert output.shape == (2, 5, 12) and weights.shape == (2, num_heads, 5, 7)
    expected = reference_gqa(module, query, memory, memory)
    torch.testing.assert_close(output, expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, num_heads, 5))


def test_gqa_with_causal_and_mask_matches_sdpa():
    module = MultiHeadAttention(8, 4, num_kv_heads=2)
    x = torch.randn(3, 6, 8)
    output, _ = module(x, causal=True)
    torch.testing.assert_close(
        output, reference_gqa(module, x, x, x, is_causal=True), atol=ATOL, rtol=0
    )
    keep = torch.rand(3, 1, 6, 6) > 0.3
    keep[..., 0] = True
    output, _ = module(x, mask=keep)
    torch.testing.assert_close(
        output, reference_gqa(module, x, x, x, attn_mask=keep), atol=ATOL, rtol=0
    )


def test_query_heads_in_one_group_share_keys_and_values():
    module = MultiHeadAttention(8, 4, num_kv_heads=2)
    with torch.no_grad():  # make query heads 0 and 1 identical: they share kv head 0
        module.q_proj.weight[2:4] = module.q_proj.weight[0:2]
        module.q_proj.bias[2:4] = module.q_proj.bias[0:2]
    _, weights = module(torch.randn(1, 5, 8))
    torch.testing.assert_close(weights[:, 0], weights[:, 1])
    assert not torch.allclose(weights[:, 0], weights[:, 2])


def test_gqa_parameter_count():
    def count(module):
        return sum(p.numel() for p in module.parameters())

    d_model, head_dim = 64, 8
    full, grouped, single = (MultiHeadAttention(64, 8, num_kv_heads=kv) for kv in (8, 2, 1))
    assert count(full) == 4 * (d_model * d_model + d_model)
    for module, kv in ((grouped, 2), (single, 1)):
        kv_width = kv * head_dim
        assert count(module) == 2 * (d_model * d_model + d_model) + 2 * (
            d_model * kv_width + kv_width
        )


def test_gqa_bad_arguments():
    with pytest.raises(ValueError, match="num_kv_heads=3 must divide num_heads=4"):
        MultiHeadAttention(8, 4, num_kv_heads=3)
    with pytest.raises(ValueError, match="num_kv_heads must be positive, got 0"):
        MultiHeadAttention(8, 4, num_kv_heads=0)
    with pytest.raises(TypeError, match="num_kv_heads must be an int, got float"):
        MultiHeadAttention(8, 4, num_kv_heads=2.0)


# from_torch


def test_from_torch_rejects_what_it_cannot_mirror():
    with pytest.raises(ValueError, match="batch_first=False"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2))
    with pytest.raises(ValueError, match="kdim=4, vdim=4"):
        MultiHeadAttention.from_torch(
            nn.MultiheadAttention(8, 2, kdim=4, vdim=4, batch_first=True)
        )
    with pytest.raises(ValueError, match="add_bias_kv or add_zero_attn"):
        MultiHeadAttention.from_torch(
            nn.MultiheadAttention(8, 2, add_zero_attn=True, batch_first=True)
        )


def test_from_torch_key_padding_mask_is_inverted_padding_mask():
    reference = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    module = MultiHeadAttention.from_torch(reference)
    x = torch.randn(2, 5, 8)
    real = padding_mask(torch.tensor([5, 3]))  # (B, T), True = real token
    output, weights = module(x, mask=real[:, None, None, :])
    expected, expected_weights = reference(
        x, x, x, key_padding_mask=~real, need_weights=True, average_attn_weights=False
    )
    torch.testing.assert_close(output, expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(weights, expected_weights, atol=ATOL, rtol=0)
    assert torch.all(weights[1, :, :, 3:] == 0)


# Causal alignment


@pytest.mark.filterwarnings("ignore:Lower right causal bias:UserWarning")
@given(t_q=st.integers(0, 6), t_k=st.integers(0, 6))
def test_causal_mask_alignments_match_torch(t_q, t_k):
    top_left = causal_mask(t_q, t_k)
    bottom_right = causal_mask(t_q, t_k, align="bottom-right")
    assert top_left.shape == bottom_right.shape == (t_q, t_k)
    if t_q and t_k:
        np.testing.assert_array_equal(top_left, causal_upper_left(t_q, t_k)._materialize().numpy())
        np.testing.assert_array_equal(
            bottom_right, causal_lower_right(t_q, t_k)._materialize().numpy()
        )
    if t_q == t_k:
        np.testing.assert_array_equal(top_left, bottom_right)
        np.testing.assert_array_equal(top_left, causal_mask(t_q))


def test_causal_mask_bad_arguments():
    with pytest.raises(ValueError, match="align must be one of"):
        causal_mask(2, 3, align="lower-right")
    with pytest.raises(ValueError, match="t_k must be non-negative, got -1"):
        causal_mask(2, -1)
    with pytest.raises(TypeError, match="t_q must be an int, got float"):
        causal_mask(2.0, 3)


# Padding masks


def test_padding_mask_numpy_and_torch():
    np.testing.assert_array_equal(
        padding_mask([3, 1, 0], max_len=4),
        [[True, True, True, False], [True, False, False, False], [False] * 4],
    )
    mask = padding_mask(torch.tensor([2, 4]))
    assert mask.dtype == torch.bool and mask.shape == (2, 4)
    assert mask.sum().item() == 6


def test_padding_mask_bad_arguments():
    with pytest.raises(
        ValueError, match=r"max_len=2 is shorter than the longest sequence \(lengths \[3, 1\]\)"
    ):
        padding_mask([3, 1], max_len=2)
    with pytest.raises(ValueError, match="lengths must be non-negative"):
        padding_mask([2, -1])
    with pytest.raises(ValueError, match=r"lengths must be 1-D \(B,\), got shape \(2, 1\)"):
        padding_mask([[2], [1]])
    with pytest.raises(TypeError, match="lengths must hold integers, got dtype float64"):
        padding_mask([2.0, 1.5])


def test_padded_keys_get_zero_weight_and_padded_queries_are_harmless():
    module = MultiHeadAttention(8, 2)
    lengths = torch.tensor([6, 4])
    x = torch.randn(2, 6, 8)
    real = padding_mask(lengths)
    output, weights = module(x, mask=real[:, None, None, :])
    assert torch.all(weights[1, :, :, 4:] == 0)
    # The short sentence alone gives the same outputs on its real tokens.
    alone, _ = module(x[1:, :4])
    torch.testing.assert_close(output[1, :4], alone[0], atol=ATOL, rtol=0)


# The key/value cache


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
@pytest.mark.parametrize("prefill", [1, 5])
def test_cached_decoding_equals_one_causal_forward(num_kv_heads, prefill):
    module = MultiHeadAttention(16, 4, num_kv_heads=num_kv_heads).eval()
    x = torch.randn(2, 9, 16)
    full, full_weights = module(x, causal=True)
    cache = KVCache()
    steps = [module(x[:, :prefill], causal=True, cache=cache)[0]]
    for t in range(prefill, x.shape[1]):
        step, step_weights = module(x[:, t : t + 1], causal=True, cache=cache)
        steps.append(step)
        assert step_weights.shape == (2, 4, 1, t + 1)
        torch.testing.assert_close(
            step_weights[:, :, 0], full_weights[:, :, t, : t + 1], atol=ATOL, rtol=0
        )
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=ATOL, rtol=0)
    assert len(cache) == 9
    assert cache.key.shape == (2, num_kv_heads, 9, 4)
    assert cache.nbytes == 2 * 2 * num_kv_heads * 9 * 4 * 8


def test_cached_prefill_uses_bottom_right_alignment():
    module = MultiHeadAttention(8, 2).eval()
    x = torch.randn(1, 6, 8)
    cache = KVCache()
    module(x[:, :2], cache=cache)
    _, weights = module(x[:, 2:], causal=True, cache=cache)  # 4 queries, 6 keys
    expected = torch.from_numpy(causal_mask(4, 6, align="bottom-right"))
    assert torch.equal(weights[0, 0] > 0, expected)


def test_kv_cache_bad_inputs():
    cache = KVCache()
    with pytest.raises(
        ValueError, match=r"key must have shape \(B, num_kv_heads, T, head_dim\), got \(2, 3, 4\)"
    ):
        cache.append(torch.zeros(2, 3, 4), torch.zeros(2, 3, 4))
    with pytest.raises(TypeError, match="value must be a floating-point tensor"):
        cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4, dtype=torch.long))
    cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    with pytest.raises(ValueError, match=r"key of shape \(1, 1, 1, 4\) does not fit the cache"):
        cache.append(torch.zeros(1, 1, 1, 4), torch.zeros(1, 1, 1, 4))
    module = MultiHeadAttention(8, 2)
    with pytest.raises(TypeError, match="cache must be a KVCache, got dict"):
        module(torch.zeros(1, 2, 8), cache={})
    cache.reset()
    assert len(cache) == 0 and cache.nbytes == 0 and cache.key is None


# Docstring fixes with behaviour behind them


def test_value_defaults_to_key():
    module = MultiHeadAttention(8, 2)
    query, memory = torch.randn(1, 3, 8), torch.randn(1, 5, 8)
    torch.testing.assert_close(module(query, memory)[0], module(query, memory, memory)[0])


def test_numpy_attention_names_overflowing_scores():
    big = np.full((2, 4), 1e200)
    with pytest.raises(ValueError, match=r"the scores Q K\^T \* scale overflow float64"):
        scaled_dot_product_attention(big, big, big)


# A call that raises changes nothing (validate, then change state)


def snapshot(module, cache):
    """Everything a failed call must leave alone: parameters, mode, and the cache."""
    state = {name: tensor.clone() for name, tensor in module.state_dict().items()}
    held = None if cache.key is None else (cache.key.clone(), cache.value.clone())
    return state, module.training, len(cache), held


def assert_unchanged(module, cache, before):
    state, training, length, held = before
    after = module.state_dict()
    assert after.keys() == state.keys()
    for name, tensor in state.items():
        torch.testing.assert_close(after[name], tensor, rtol=0, atol=0, equal_nan=True)
    assert module.training == training
    assert len(cache) == length
    if held is None:
        assert cache.key is None and cache.value is None
    else:
        assert cache.key.dtype == held[0].dtype and cache.value.dtype == held[1].dtype
        assert torch.equal(cache.key, held[0]) and torch.equal(cache.value, held[1])


def test_a_bad_mask_does_not_corrupt_the_cache():
    """The expert read's reproduction: a raising call used to store its token first."""
    module = MultiHeadAttention(8, 2).eval()
    x = torch.randn(1, 6, 8)  # (B, T, d_model)
    full, _ = module(x, causal=True)
    cache = KVCache()
    with torch.no_grad():
        module(x[:, :5], causal=True, cache=cache)
        assert len(cache) == 5
        before = snapshot(module, cache)
        with pytest.raises(TypeError, match="mask must be boolean"):
            module(x[:, 5:], mask=torch.ones(1, 6), cache=cache)
        assert_unchanged(module, cache, before)
        retry, _ = module(x[:, 5:], causal=True, cache=cache)  # (B, 1, d_model)
    assert len(cache) == 6
    torch.testing.assert_close(retry, full[:, 5:], atol=ATOL, rtol=0)


def bad_calls(x_step):
    """(label, keyword arguments, error, pattern) of calls that must raise with a cache."""
    meta = torch.empty(1, 1, 8, device="meta")
    nan = x_step.clone()
    nan[0, 0, 3] = float("nan")
    return [
        ("float mask", dict(mask=torch.ones(1, 6)), TypeError, "mask must be boolean"),
        ("mask shape", dict(mask=torch.ones(1, 5, dtype=torch.bool)), ValueError, "mask of shape"),
        ("causal 1", dict(causal=1), TypeError, "causal must be a bool, got int 1"),
        ("causal 'yes'", dict(causal="yes"), TypeError, "causal must be a bool, got str 'yes'"),
        ("float32 query", dict(query=x_step.float()), TypeError, "query has dtype torch.float32"),
        ("meta query", dict(query=meta), ValueError, "query is on the meta device"),
        ("NaN query", dict(query=nan), ValueError, "query contains NaN"),
        ("inf key", dict(key=x_step * float("inf")), ValueError, "key contains inf"),
        ("value length", dict(value=torch.zeros(1, 2, 8)), ValueError, "key and value must"),
        (
            "batch",
            dict(query=x_step.expand(2, 1, 8)),
            ValueError,
            r"cache holds keys .* \(2, 2, T",
        ),
        ("int query", dict(query=x_step.long()), TypeError, "query must be a floating-point"),
    ]


@pytest.mark.parametrize("case", range(11))
def test_a_raising_cached_call_leaves_cache_and_module_unchanged(case):
    module = MultiHeadAttention(8, 2)  # training mode: dropout 0, but the mode must survive
    cache = KVCache()
    x = torch.randn(1, 6, 8)  # (B, T, d_model)
    module(x[:, :5], causal=True, cache=cache)
    x_step = x[:, 5:]  # (B, 1, d_model)
    label, kwargs, error, pattern = bad_calls(x_step)[case]
    arguments = dict(query=x_step, cache=cache) | kwargs
    before = snapshot(module, cache)
    with pytest.raises(error, match=pattern):
        module(**arguments)
    assert_unchanged(module, cache, before)


def test_a_cache_of_another_dtype_is_refused_by_name():
    module = MultiHeadAttention(8, 2)
    cache = KVCache()
    module.float()(torch.randn(1, 3, 8, dtype=torch.float32), cache=cache)
    module.double()
    before = snapshot(module, cache)
    with pytest.raises(TypeError, match=r"cache holds keys of dtype torch.float32"):
        module(torch.randn(1, 1, 8), cache=cache)
    assert_unchanged(module, cache, before)


def test_a_parameter_with_nan_raises_instead_of_returning_nan():
    module = MultiHeadAttention(8, 2)
    cache = KVCache()
    module(torch.randn(1, 3, 8), cache=cache)
    with torch.no_grad():
        module.v_proj.weight[0, 0] = float("nan")
    before = snapshot(module, cache)
    with pytest.raises(ValueError, match=r"parameter v_proj.weight .* holds NaN"):
        module(torch.randn(1, 1, 8), cache=cache)
    assert_unchanged(module, cache, before)


def test_overflowing_scores_raise_instead_of_returning_nan():
    module = MultiHeadAttention(8, 2).to(torch.float16)
    cache = KVCache()
    with pytest.raises(ValueError, match=r"output overflows torch.float16"):
        module(torch.full((1, 3, 8), 3000.0, dtype=torch.float16), cache=cache)
    assert len(cache) == 0 and cache.key is None


def test_a_fully_masked_row_still_gives_zero_weights_not_an_error():
    module = MultiHeadAttention(8, 2)
    keep = torch.ones(1, 1, 3, 3, dtype=torch.bool)
    keep[..., 1, :] = False  # query 1 may attend to nothing
    output, weights = module(torch.randn(1, 3, 8), mask=keep)
    assert torch.all(weights[:, :, 1] == 0) and torch.isfinite(output).all()


@pytest.mark.parametrize(
    "key,value,error,pattern",
    [
        (
            torch.zeros(1, 2, 3, 4, dtype=torch.float32),
            torch.zeros(1, 2, 3, 4, dtype=torch.float64),
            TypeError,
            r"value has dtype torch.float64, key torch.float32",
        ),
        (
            torch.zeros(1, 2, 3, 4),
            torch.zeros(1, 2, 3, 4, device="meta"),
            ValueError,
            "value is on the meta device",
        ),
        (
            torch.zeros(1, 2, 3, 4),
            torch.full((1, 2, 3, 4), float("nan")),
            ValueError,
            "value contains NaN",
        ),
        (torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 2, 4), ValueError, r"agree on \(B, num_kv"),
    ],
)
def test_kv_cache_first_append_checks_key_against_value(key, value, error, pattern):
    cache = KVCache()
    with pytest.raises(error, match=pattern):
        cache.append(key, value)
    assert len(cache) == 0 and cache.key is None and cache.value is None


def test_kv_cache_append_that_raises_keeps_the_cache():
    cache = KVCache()
    cache.append(torch.zeros(1, 2, 3, 4), torch.ones(1, 2, 3, 4))
    held = cache.key, cache.value
    bad = [
        (
            torch.zeros(1, 2, 1, 4, dtype=torch.float32),
            torch.zeros(1, 2, 1, 4, dtype=torch.float32),
        ),
        (torch.zeros(1, 2, 1, 4, device="meta"), torch.zeros(1, 2, 1, 4, device="meta")),
        (torch.zeros(1, 2, 1, 4), torch.full((1, 2, 1, 4), float("inf"))),
        (torch.zeros(2, 2, 1, 4), torch.zeros(2, 2, 1, 4)),
    ]
    for key, value in bad:
        with pytest.raises((TypeError, ValueError), match="key|value"):
            cache.append(key, value)
        assert cache.key is held[0] and cache.value is held[1] and len(cache) == 3


def test_numpy_masks_work_in_the_torch_modules():
    """padding_mask of a list returns numpy; the modules convert it (torch.from_numpy)."""
    module = MultiHeadAttention(8, 2)
    x = torch.randn(2, 4, 8)  # (B, T, d_model)
    real = padding_mask([4, 2])  # numpy (B, T)
    from_numpy, _ = module(x, mask=real[:, None, None, :])
    from_torch, _ = module(x, mask=torch.from_numpy(real)[:, None, None, :])
    torch.testing.assert_close(from_numpy, from_torch, atol=0, rtol=0)


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
def test_fused_attention_is_the_module_around_sdpa(num_kv_heads):
    # fused_attention (the chapters' "projections around SDPA") equals the
    # module, for self- and cross-attention, with a mask and with is_causal.
    from selfattention.layers.attention_torch import fused_attention

    module = MultiHeadAttention(8, 4, num_kv_heads=num_kv_heads).double().eval()
    nn.init.normal_(module.k_proj.bias)
    x, memory = (
        torch.randn(2, 5, 8, dtype=torch.float64),
        torch.randn(2, 7, 8, dtype=torch.float64),
    )
    keep = torch.rand(2, 1, 5, 7) > 0.3
    keep[..., 0] = True
    with torch.no_grad():
        torch.testing.assert_close(
            fused_attention(module, x, is_causal=True), module(x, causal=True)[0]
        )
        torch.testing.assert_close(
            fused_attention(module, x, memory, attn_mask=keep), module(x, memory, mask=keep)[0]
        )
    with pytest.raises(ValueError, match="rope or window"):
        fused_attention(MultiHeadAttention(8, 2, rope=True), x.float())


def test_head_helpers_are_the_ones_the_modules_and_checkers_use():
    from selfattention.exercises.ch09 import reference_expand_kv_heads, reference_split_heads
    from selfattention.layers.attention_torch import _expand_kv_heads, _merge_heads, _split_heads

    x = torch.randn(2, 3, 12)
    module = MultiHeadAttention(12, 3)
    assert torch.equal(_split_heads(x, 3), module.split_heads(x))
    assert torch.equal(reference_split_heads(x, 3), _split_heads(x, 3))
    assert torch.equal(_merge_heads(_split_heads(x, 3)), x)
    kv = torch.randn(2, 2, 3, 4)
    assert torch.equal(_expand_kv_heads(kv, 4), kv.repeat_interleave(2, dim=1))
    assert torch.equal(reference_expand_kv_heads(kv, 4), _expand_kv_heads(kv, 4))
    assert _expand_kv_heads(kv, 2) is kv
