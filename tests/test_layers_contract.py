"""selfattention.layers: behaviour that mutmut showed no other unit test pins down.

Each test fails on mutants that survived the layers' own tests
(docs/mutation-score.md): MultiHeadAttention.from_torch keeps the module's
dropout and dtype and says why it refuses a module; KVCache's repr and reset;
permute_rotary_rows refuses zero rows; MultiHeadLatentAttention's cache
checks name what is wrong; CacheConfig's normalised sizes and messages;
rotary's base, dtype, per-row positions and messages; KVCache's and
fused_attention's refusals; the latent attention's biases; chunked_attention's
refusals, empty queries and causal mask at every small block size. Public
behaviour only, so refactors keep them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

from selfattention import KVCache, MultiHeadAttention, MultiHeadLatentAttention, SelfAttention
from selfattention.layers.attention_torch import check_model_input, fused_attention
from selfattention.layers.cache_sizes import CacheConfig
from selfattention.layers.chunked import chunked_attention, peak_tensor_bytes
from selfattention.layers.rotary import permute_rotary_rows, rotary_embedding, rotary_frequencies


def test_from_torch_keeps_the_modules_dropout():
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True)
    copy = MultiHeadAttention.from_torch(reference).train()
    x = torch.randn(1, 5, 8)  # (B, T, d_model)
    first, second = copy(x)[0], copy(x)[0]
    assert not torch.equal(first, second)  # two dropout draws differ
    copy.eval()
    assert torch.equal(copy(x)[0], copy(x)[0])


def test_from_torch_keeps_the_modules_dtype():
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64).eval()
    copy = MultiHeadAttention.from_torch(reference)
    assert {p.dtype for p in copy.parameters()} == {torch.float64}
    x = torch.randn(2, 4, 8, dtype=torch.float64)  # (B, T, d_model)
    ours = copy(x)[0]
    theirs = reference(x, x, x, need_weights=False)[0]
    assert ours.dtype == torch.float64
    assert torch.allclose(ours, theirs, atol=1e-12)


def test_from_torch_says_why_it_refuses_a_module():
    with pytest.raises(
        TypeError, match=r"module must be a torch\.nn\.MultiheadAttention, got Linear$"
    ):
        MultiHeadAttention.from_torch(nn.Linear(2, 2))
    with pytest.raises(
        ValueError, match=r"^module uses add_bias_kv or add_zero_attn; not supported$"
    ):
        MultiHeadAttention.from_torch(
            nn.MultiheadAttention(8, 2, add_bias_kv=True, batch_first=True)
        )
    with pytest.raises(
        ValueError,
        match=r"^module has batch_first=False: it reads \(T, B, d_model\) while this "
        r"module reads \(B, T, d_model\); build it with batch_first=True$",
    ):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2))


def test_kv_cache_repr_and_reset():
    cache = KVCache()
    assert repr(cache) == "KVCache(length=0, key shape=None)"
    cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    assert repr(cache) == "KVCache(length=3, key shape=(1, 2, 3, 4))"
    cache.reset()
    assert cache.key is None and cache.value is None and len(cache) == 0
    assert repr(cache) == "KVCache(length=0, key shape=None)"


def test_permute_rotary_rows_refuses_zero_rows():
    with pytest.raises(ValueError):
        permute_rotary_rows(torch.zeros(0, 4), 1, "half", "interleaved")


def test_latent_cache_checks_name_what_is_wrong():
    torch.manual_seed(0)
    mla = MultiHeadLatentAttention(12, 4, latent_dim=3, rope_dim=2).eval()
    cache = KVCache()
    with torch.no_grad():
        mla(torch.randn(2, 3, 12), causal=True, cache=cache)  # a batch of 2 cached
        with pytest.raises(
            ValueError,
            match=r"^cache holds latents of shape \(2, 1, 3, 3\), but this call needs "
            r"\(B, 1, T, latent_dim\) = \(1, 1, T, 3\); use one KVCache per layer and per batch$",
        ):
            mla(torch.randn(1, 1, 12), causal=True, cache=cache)
    other = KVCache()
    other.append(torch.zeros(1, 1, 2, 3), torch.zeros(1, 1, 2, 5))  # rotary keys 5 wide, not 2
    with pytest.raises(
        ValueError, match=r"^cache holds rotary keys of shape .*\(B, 1, T, rope_dim\)"
    ):
        mla(torch.randn(1, 1, 12), causal=True, cache=other)
    with pytest.raises(TypeError, match=r"^cache must be a KVCache, got dict$"):
        mla(torch.randn(1, 1, 12), cache={})


def test_self_attention_widths_and_biases():
    layer = SelfAttention(8, d_k=4, d_v=6)
    assert (layer.q_proj.out_features, layer.k_proj.out_features) == (4, 4)
    assert (layer.v_proj.out_features, layer.out_proj.in_features) == (6, 6)
    assert SelfAttention(8, d_k=4).v_proj.out_features == 4  # d_v defaults to d_k
    assert SelfAttention(8).q_proj.out_features == 8  # d_k defaults to d_model
    with_bias, without = SelfAttention(8), SelfAttention(8, bias=False)
    projections = ("q_proj", "k_proj", "v_proj", "out_proj")
    assert all(getattr(with_bias, name).bias is not None for name in projections)
    assert all(getattr(without, name).bias is None for name in projections)


@pytest.mark.parametrize("name", ["d_k", "d_v"])
def test_self_attention_width_errors_name_the_argument(name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        SelfAttention(8, **{name: 0})


def test_self_attention_says_why_its_output_is_not_finite():
    torch.manual_seed(0)
    layer = SelfAttention(4).eval()
    with pytest.raises(
        ValueError,
        match=r"^the attention's output overflows torch\.float32 although x are finite: "
        r"their projections or scores are too large for the dtype; rescale the inputs "
        r"or compute in float64$",
    ):
        layer(torch.full((1, 3, 4), 1e30))
    with torch.no_grad():
        layer.q_proj.weight[0, 0] = float("nan")
    with pytest.raises(
        ValueError,
        match=r"^the module's parameter q_proj\.weight \(shape \(4, 4\)\) holds NaN or inf, "
        r"so the attention's output would too$",
    ):
        layer(torch.ones(1, 3, 4))


def test_latent_attention_says_which_result_overflows():
    """Before caching latents or rotary keys, and at the output."""
    torch.manual_seed(0)
    x = torch.ones(1, 3, 12)  # (B, T, d_model)
    for part, what in (("kv_down", "latents"), ("k_rope", "rotary keys"), ("out_proj", "output")):
        mla = MultiHeadLatentAttention(12, 4, latent_dim=3, rope_dim=2).eval()
        with torch.no_grad():
            getattr(mla, part).weight.fill_(3e38)  # finite, but its sums overflow float32
        with pytest.raises(
            ValueError, match=rf"^the attention's {what} overflows torch\.float32 although x are"
        ):
            mla(x, causal=True, cache=KVCache())  # with a cache, what it would store is checked


def test_latent_attention_arguments_and_defaults():
    mla = MultiHeadLatentAttention(12, 4, latent_dim=3, rope_dim=2)
    assert mla.rope_base == 10000.0  # the documented default, as in RoPE's paper
    for kwargs, name in (
        ({"rope_dim": -1}, "rope_dim"),
        ({"head_dim": 0}, "head_dim"),
        ({"rope_dim": 2, "rope_base": -1.0}, "rope_base"),
    ):
        with pytest.raises((ValueError, TypeError), match=rf"\b{name}\b"):
            MultiHeadLatentAttention(12, 4, latent_dim=3, **kwargs)
    with pytest.raises(ValueError, match=r"\bpass head_dim to choose the per-head width\b"):
        MultiHeadLatentAttention(10, 4, latent_dim=3)


def test_multi_head_dropout_drops_the_given_fraction():
    torch.manual_seed(0)
    layer = MultiHeadAttention(8, 2, dropout=0.1).train()
    _, weights = layer(torch.randn(4, 16, 8))  # weights (B, h, T, T): 2048 entries
    dropped = (weights == 0).float().mean().item()
    assert 0.05 < dropped < 0.2, dropped  # p = 0.1, not F.dropout's default 0.5


def test_check_model_input_names_other_ranks():
    with pytest.raises(ValueError, match=r"^x must have shape 4-D, got \(2, 3\)$"):
        check_model_input(torch.zeros(2, 3), "x", 3, ranks=(4,))


# --- CacheConfig (chapter 14's cache sizes) -------------------------------------


@pytest.mark.parametrize(
    "sizes",
    [
        {"num_layers": 4, "num_kv_heads": 2, "head_dim": 8, "window": 16, "num_local_layers": 3},
        {"num_layers": 4, "num_kv_heads": 2, "head_dim": 8, "latent_dim": 32, "rope_dim": 4},
    ],
)
def test_cache_config_stores_numpy_sizes_as_python_ints(sizes):
    config = CacheConfig(**{name: np.int64(value) for name, value in sizes.items()})
    for name, size in sizes.items():
        stored = getattr(config, name)
        assert type(stored) is int and stored == size, (name, type(stored))
    fields = {field.name for field in dataclasses.fields(config)}
    assert set(vars(config)) == fields  # no stray attributes


@pytest.mark.parametrize(
    "name", ["num_layers", "num_kv_heads", "head_dim", "window", "latent_dim"]
)
def test_cache_config_names_the_size_that_is_not_positive(name):
    sizes = {"num_layers": 2, "num_kv_heads": 2, "head_dim": 8, name: 0}
    with pytest.raises(ValueError, match=rf"^{name} must be positive, got 0$"):
        CacheConfig(**sizes)


def test_cache_config_messages_for_element_size_and_a_lone_rope_dim():
    with pytest.raises(ValueError, match=r"^element_size must be positive, got 0$"):
        CacheConfig(1, 1, 2).cache_bytes(3, 0)
    with pytest.raises(
        ValueError,
        match=r"^rope_dim=4 is the decoupled rotary key of latent attention and needs latent_dim$",
    ):
        CacheConfig(1, 1, 2, rope_dim=4)


# --- rotary position embeddings (chapter 13) ------------------------------------


def test_rotary_frequencies_take_any_positive_base_and_the_dtype_asked_for():
    theta = rotary_frequencies(4, base=0.5)  # a base below 1 is unusual, not wrong
    torch.testing.assert_close(
        theta, torch.tensor([1.0, 2**0.5], dtype=torch.float64), rtol=1e-15, atol=0
    )
    assert rotary_frequencies(8, dtype=torch.float32).dtype == torch.float32


def test_rotary_positions_per_batch_row_for_a_rank_3_input():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 4, dtype=torch.float64)  # (B, T, d_k)
    positions = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 10, 11]])  # (B, T)
    rotated = rotary_embedding(x, positions)
    for row in range(2):
        assert torch.equal(rotated[row], rotary_embedding(x[row], positions[row]))


def test_rotary_messages_say_what_came_and_what_to_do():
    x = torch.zeros(2, 5, 4)
    with pytest.raises(
        ValueError,
        match=r"^positions must have shape \(T,\) = \(5,\) or \(B, T\) = \(2, 5\) "
        r"for x of shape \(2, 5, 4\), got \(3, 5\)$",
    ):
        rotary_embedding(x, torch.zeros(3, 5, dtype=torch.long))
    with pytest.raises(
        TypeError,
        match=r"^positions must be a torch.Tensor of integers, got list; "
        r"use torch.as_tensor\(positions\)$",
    ):
        rotary_embedding(x, [0, 1, 2, 3, 4])
    with pytest.raises(
        TypeError, match=r"got Tensor of shape \(5,\) and dtype torch.bool on cpu$"
    ):
        rotary_embedding(x, torch.zeros(5, dtype=torch.bool))
    with pytest.raises(
        ValueError, match=r"last axis d_k \(pairs of features\), got shape \(2, 5, 3\)$"
    ):
        rotary_embedding(torch.zeros(2, 5, 3))


# --- KVCache's refusals (chapter 14) ---------------------------------------------


def test_kv_cache_refusals_name_the_tensor_and_the_cache():
    f64 = torch.float64
    cache = KVCache()
    with pytest.raises(
        TypeError, match=r"^key must be a floating-point tensor, got dtype torch.int64 "
    ):
        cache.append(torch.zeros(1, 1, 2, 3, dtype=torch.long), torch.zeros(1, 1, 2, 3))
    with pytest.raises(
        ValueError,
        match=r"^value must have shape \(B, num_kv_heads, T, head_dim\), got \(1, 2, 3\)$",
    ):
        cache.append(torch.zeros(1, 1, 2, 3), torch.zeros(1, 2, 3))
    cache.append(torch.zeros(1, 1, 2, 3, dtype=f64), torch.zeros(1, 1, 2, 3, dtype=f64))
    with pytest.raises(ValueError, match=r"^value of shape \(1, 1, 2, 4\) does not fit the cache"):
        cache.append(torch.zeros(1, 1, 2, 3, dtype=f64), torch.zeros(1, 1, 2, 4, dtype=f64))
    with pytest.raises(
        TypeError, match=r"^key has dtype torch.float32, the cache torch.float64; "
    ):
        cache.append(torch.zeros(1, 1, 2, 3), torch.zeros(1, 1, 2, 3))
    assert len(cache) == 2  # every refusal left the cache as it was


# --- fused_attention (chapters 9 and 10) ------------------------------------------

_FUSED_REFUSAL = (
    r"^fused_attention takes a module without rope or window: "
    r"F\.scaled_dot_product_attention would leave them out$"
)


@pytest.mark.parametrize("option", [{"rope": True}, {"window": 2}])
def test_fused_attention_refuses_rope_and_windows_by_name(option):
    layer = MultiHeadAttention(8, 2, **option)
    with pytest.raises(ValueError, match=_FUSED_REFUSAL):
        fused_attention(layer, torch.zeros(1, 3, 8))


def test_fused_attention_takes_any_module_with_the_four_projections():
    """A module without `rope` or `window` attributes at all is one with neither."""
    torch.manual_seed(0)
    layer = MultiHeadAttention(8, 2).eval()
    bare = nn.Module()
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        setattr(bare, name, getattr(layer, name))
    bare.num_heads, bare.num_kv_heads = 2, 2
    x = torch.randn(1, 3, 8)  # (B, T, d_model)
    with torch.no_grad():
        assert torch.equal(fused_attention(bare, x), fused_attention(layer, x))


def test_fused_attention_uses_the_value_it_is_given():
    torch.manual_seed(0)
    layer = MultiHeadAttention(8, 2).eval()
    query, key, value = torch.randn(3, 1, 4, 8).unbind(0)  # each (B, T, d_model)
    with torch.no_grad():
        given = fused_attention(layer, query, key, value)
        ours, _ = layer(query, key, value)
        assert not torch.allclose(given, fused_attention(layer, query, key, key))
    torch.testing.assert_close(given, ours, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("bias", [False, True])
def test_latent_attention_gives_every_projection_the_bias_asked_for(bias):
    layer = MultiHeadLatentAttention(16, 2, latent_dim=8, rope_dim=4, bias=bias)
    linears = dict(layer.named_modules())
    names = ["kv_down", "k_up", "v_up", "q_proj", "q_rope", "k_rope", "out_proj"]
    assert all(isinstance(linears[name], nn.Linear) for name in names)
    assert {name: linears[name].bias is not None for name in names} == dict.fromkeys(names, bias)


def test_latent_attention_without_rope_has_no_rotary_projections():
    layer = MultiHeadLatentAttention(16, 2, latent_dim=8)
    assert layer.q_rope is None and layer.k_rope is None


# --- chunked_attention and peak_tensor_bytes (chapter 12) ---------------------------


def test_chunked_attention_names_the_tensor_it_refuses():
    good = torch.zeros(1, 2, 4, dtype=torch.float64)  # (B, T, d)
    whole = torch.zeros(1, 2, 4, dtype=torch.long)
    for position, name in ((1, "key"), (2, "value")):
        args = [good, good, good]
        args[position] = whole
        with pytest.raises(TypeError, match=rf"^{name} must be a floating-point tensor"):
            chunked_attention(*args)
        args[position] = torch.full((1, 2, 4), float("nan"), dtype=torch.float64)
        with pytest.raises(ValueError, match=rf"^{name} contains NaN"):
            chunked_attention(*args)


def test_chunked_attention_overflow_message_states_the_scale():
    big = torch.full((1, 2, 4), 1e200, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"key \(1, 2, 4\), scale 1e\+200\); rescale the inputs"):
        chunked_attention(big, big, torch.zeros(1, 2, 4, dtype=torch.float64), scale=1e200)


def test_peak_tensor_bytes_passes_keyword_arguments_on():
    def make(x, scale=1.0):
        return x * scale if scale == 1.0 else torch.ones(100, dtype=torch.float64)

    x = torch.zeros(1, 2, 4, dtype=torch.float64)
    assert peak_tensor_bytes(make, x) == 64  # x * 1.0: 8 float64 numbers
    assert peak_tensor_bytes(make, x, scale=2.0) == 800  # the keyword reached `make`


def test_chunked_attention_with_no_queries_while_recording_gradients():
    query = torch.zeros(1, 0, 4, dtype=torch.float64, requires_grad=True)  # (B, T_q = 0, d)
    key = torch.zeros(1, 3, 4, dtype=torch.float64)
    assert chunked_attention(query, key, key).shape == (1, 0, 4)


@pytest.mark.parametrize("block_size", [1, 2, 3, 4])
def test_chunked_attention_causal_for_every_small_block(block_size):
    """A tile whose last key is one past its first query needs the mask (block_size=2)."""
    torch.manual_seed(0)
    query, key, value = torch.randn(3, 2, 7, 4, dtype=torch.float64).unbind(0)  # (B, T, d)
    want = torch.nn.functional.scaled_dot_product_attention(query, key, value, is_causal=True)
    got = chunked_attention(query, key, value, causal=True, block_size=block_size)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
