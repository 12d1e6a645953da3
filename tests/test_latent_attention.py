"""Multi-head latent attention (chapter 14) against its definition and PyTorch.

The reference below writes the equations of DeepSeek-V2 (section 2.1) with
``torch.einsum``, the rotation as a complex product (as Meta's Llama code
does, here in the half layout) and the attention as
``F.scaled_dot_product_attention``; it calls nothing of the package.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from selfattention import KVCache, MultiHeadAttention, MultiHeadLatentAttention
from selfattention.book.measure import count_multiply_adds
from selfattention.layers.cache_sizes import CacheConfig

F64 = torch.float64


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def make(seed: int = 0, **kwargs) -> MultiHeadLatentAttention:
    torch.manual_seed(seed)
    config = dict(d_model=12, num_heads=3, latent_dim=5, rope_dim=4, head_dim=6)
    config.update(kwargs)
    return MultiHeadLatentAttention(**config).to(F64).eval()


# --- an independent reference: the paper's equations ---------------------------------


def rotate_half_complex(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """RoPE in the half layout as a complex product: pair l = features (l, l + d/2)."""
    half = x.shape[-1] // 2
    theta = base ** (-torch.arange(0, 2 * half, 2, dtype=F64) / (2 * half))  # (d/2,)
    turn = torch.polar(torch.ones(len(positions), half, dtype=F64), positions[:, None] * theta)
    z = torch.complex(x[..., :half], x[..., half:]) * turn  # (..., T, d/2)
    return torch.cat((z.real, z.imag), dim=-1)


def reference_mla(
    mla: MultiHeadLatentAttention, x: torch.Tensor, causal: bool, start: int = 0
) -> torch.Tensor:
    """DeepSeek-V2's MLA for ``x (B, T, d_model)``, queries and keys at positions start...."""
    h, d_k, d_r = mla.num_heads, mla.head_dim, mla.rope_dim

    def linear(layer, inp):
        out = inp @ layer.weight.T
        return out if layer.bias is None else out + layer.bias

    batch, length, _ = x.shape
    c = linear(mla.kv_down, x)  # (B, T, d_c): c^KV
    k_c = linear(mla.k_up, c).view(batch, length, h, d_k)  # (B, T, h, d_k)
    v_c = linear(mla.v_up, c).view(batch, length, h, d_k)  # (B, T, h, d_v)
    q_c = linear(mla.q_proj, x).view(batch, length, h, d_k)  # (B, T, h, d_k)
    positions = torch.arange(start, start + length, dtype=F64)
    if d_r:
        q_r = linear(mla.q_rope, x).view(batch, length, h, d_r).transpose(1, 2)
        q_r = rotate_half_complex(q_r, positions, mla.rope_base)  # (B, h, T, d_R)
        k_r = rotate_half_complex(linear(mla.k_rope, x), positions, mla.rope_base)  # (B, T, d_R)
        k_r = k_r[:, None].expand(batch, h, length, d_r)  # shared by every head
    else:
        q_r = x.new_zeros(batch, h, length, 0)
        k_r = x.new_zeros(batch, h, length, 0)
    q = torch.cat([q_c.transpose(1, 2), q_r], dim=-1)  # (B, h, T, d_k + d_R)
    k = torch.cat([k_c.transpose(1, 2), k_r], dim=-1)  # (B, h, T, d_k + d_R)
    o = F.scaled_dot_product_attention(q, k, v_c.transpose(1, 2), is_causal=causal)
    return linear(mla.out_proj, o.transpose(1, 2).reshape(batch, length, h * d_k))


# --- the definition ----------------------------------------------------------------


@pytest.mark.parametrize("rope_dim", [0, 4])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("absorbed", [False, True])
def test_matches_the_papers_equations_and_sdpa(rope_dim, bias, causal, absorbed):
    mla = make(rope_dim=rope_dim, bias=bias)
    x = randn(2, 7, 12)  # (B, T, d_model)
    with torch.no_grad():
        output, weights = mla(x, causal=causal, absorbed=absorbed)
        expected = reference_mla(mla, x, causal)
    assert (output - expected).abs().max() < 1e-12
    assert weights.shape == (2, 3, 7, 7)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 3, 7, dtype=F64), atol=1e-14)


def test_head_dim_defaults_to_d_model_over_heads_and_scale_uses_d_k_plus_d_r():
    mla = MultiHeadLatentAttention(12, 4, latent_dim=3, rope_dim=2)
    assert mla.head_dim == 3
    assert mla.q_proj.out_features == 12 and mla.k_rope.out_features == 2
    assert mla.q_rope.out_features == 4 * 2
    assert MultiHeadLatentAttention(12, 4, latent_dim=3).q_rope is None
    # Scores are divided by sqrt(d_k + d_R): with the rotary part zeroed, a wrong
    # scale (sqrt(d_k)) would change the weights.
    mla = make()
    with torch.no_grad():
        mla.q_rope.weight.zero_()
        _, weights = mla(randn(1, 4, 12))
        q = mla.q_proj(randn(1, 4, 12)).view(1, 4, 3, 6).transpose(1, 2)
        k = mla.k_up(mla.kv_down(randn(1, 4, 12))).view(1, 4, 3, 6).transpose(1, 2)
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(6 + 4), dim=-1)
    assert (weights - expected).abs().max() < 1e-14


@pytest.mark.parametrize("rope_dim", [0, 2, 4])
@pytest.mark.parametrize("bias", [False, True])
def test_absorbed_equals_expanded(rope_dim, bias):
    mla = make(rope_dim=rope_dim, bias=bias, seed=3)
    x = randn(3, 9, 12, seed=1)  # (B, T, d_model)
    mask = torch.rand(3, 1, 9, 9, generator=torch.Generator().manual_seed(2)) > 0.3
    mask[0, 0, 4] = False  # a query that may attend to nothing: zero weights, v bias too
    for kwargs in ({"causal": True}, {"mask": mask}, {"mask": mask, "causal": True}, {}):
        with torch.no_grad():
            expanded, w_expanded = mla(x, **kwargs)
            absorbed, w_absorbed = mla(x, absorbed=True, **kwargs)
        assert (expanded - absorbed).abs().max() < 1e-10
        assert (w_expanded - w_absorbed).abs().max() < 1e-12
        if "mask" in kwargs:
            assert torch.equal(w_absorbed[0, :, 4], torch.zeros(3, 9, dtype=F64))


# --- the cache -----------------------------------------------------------------------


@pytest.mark.parametrize("absorbed", [False, True])
@pytest.mark.parametrize("rope_dim", [0, 4])
@pytest.mark.parametrize("prefill", [1, 5])
def test_cached_decoding_equals_one_causal_pass(absorbed, rope_dim, prefill):
    mla = make(rope_dim=rope_dim, seed=1)
    x = randn(2, 16, 12, seed=4)  # (B, T, d_model)
    cache = KVCache()
    with torch.no_grad():
        full, _ = mla(x, causal=True)
        outputs = [mla(x[:, :prefill], causal=True, cache=cache, absorbed=absorbed)[0]]
        for t in range(prefill, 16):
            outputs.append(mla(x[:, t : t + 1], causal=True, cache=cache, absorbed=absorbed)[0])
    assert (torch.cat(outputs, dim=1) - full).abs().max() < 1e-10
    assert len(cache) == cache.position == 16
    assert tuple(cache.key.shape) == (2, 1, 16, 5) and tuple(cache.value.shape) == (
        2,
        1,
        16,
        rope_dim,
    )


def test_positions_continue_from_the_cache_not_from_zero():
    mla = make(seed=2)
    x = randn(1, 6, 12, seed=5)
    cache = KVCache()
    with torch.no_grad():
        mla(x[:, :4], causal=True, cache=cache)
        last, _ = mla(x[:, 4:], causal=True, cache=cache)
        restarted, _ = mla(x[:, 4:], causal=True)  # as if at positions 0, 1
        expected = reference_mla(mla, x, causal=True)[:, 4:]
    assert (last - expected).abs().max() < 1e-12
    assert (restarted - last).abs().max() > 1e-3


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("rope_dim", [0, 4])
def test_cache_holds_latent_plus_rotary_key_per_token(dtype, rope_dim):
    torch.manual_seed(0)
    layers = [
        MultiHeadLatentAttention(16, 4, latent_dim=6, rope_dim=rope_dim, head_dim=8).to(dtype)
        for _ in range(3)
    ]
    caches = [KVCache() for _ in layers]
    config = CacheConfig(3, num_kv_heads=4, head_dim=8, latent_dim=6, rope_dim=rope_dim)
    element_size = torch.empty((), dtype=dtype).element_size()
    tokens = 0
    with torch.no_grad():
        for step in (4, 1, 1, 3):
            x = torch.randn(2, step, 16, dtype=dtype)  # (B, T_new, d_model)
            for layer, cache in zip(layers, caches, strict=True):
                x = x + layer(x, causal=True, cache=cache)[0]
            tokens += step
            measured = sum(cache.nbytes for cache in caches)
            assert measured == config.cache_bytes(tokens, element_size, batch=2)
            assert measured == 3 * 2 * tokens * (6 + rope_dim) * element_size


def test_absorbed_decoding_does_not_rebuild_keys_and_values():
    # One decoding step against n cached tokens: the expanded form rebuilds 2 n h d_k
    # numbers from the latents (n d_c h d_k multiply-adds each); the absorbed form
    # scores n latents per head instead.
    d_model, h, d_c, d_r, d_k = 16, 4, 6, 2, 8
    mla = make(d_model=d_model, num_heads=h, latent_dim=d_c, rope_dim=d_r, head_dim=d_k)
    projections = d_model * (d_c + h * d_k + h * d_r + d_r) + h * d_k * d_model
    for n in (10, 40):
        counts = {}
        for absorbed in (False, True):
            cache = KVCache()
            with torch.no_grad():
                mla(randn(1, n - 1, d_model), causal=True, cache=cache)
            x = randn(1, 1, d_model, seed=7)
            counts[absorbed] = count_multiply_adds(
                mla, x, causal=True, cache=cache, absorbed=absorbed
            )
        assert counts[False] == projections + 2 * n * d_c * h * d_k + h * n * (d_k + d_r + d_k)
        assert counts[True] == projections + 2 * h * d_k * d_c + h * n * (d_c + d_r + d_c)


# --- MLA can represent MHA ------------------------------------------------------------


@pytest.mark.parametrize("bias", [False, True])
def test_a_latent_as_wide_as_the_input_represents_any_mha(bias):
    # c = x W_D (W_D random, invertible), W_UK = W_D^-1 W_K, W_UV = W_D^-1 W_V: the keys
    # and values are MHA's exactly. Biases: b_D = 0, b_UK = b_K, b_UV = b_V.
    torch.manual_seed(0)
    d_model, h = 12, 3
    mha = MultiHeadAttention(d_model, h, bias=bias).to(F64).eval()
    mla = MultiHeadLatentAttention(d_model, h, latent_dim=d_model, bias=bias).to(F64).eval()
    with torch.no_grad():
        w_down = randn(d_model, d_model, seed=3)  # (d_model, d_c), row-vector form
        mla.kv_down.weight.copy_(w_down.T)
        inverse = torch.linalg.inv(w_down)  # (d_c, d_model)
        mla.k_up.weight.copy_((inverse @ mha.k_proj.weight.T).T)
        mla.v_up.weight.copy_((inverse @ mha.v_proj.weight.T).T)
        mla.q_proj.weight.copy_(mha.q_proj.weight)
        mla.out_proj.weight.copy_(mha.out_proj.weight)
        if bias:
            mla.kv_down.bias.zero_()
            for mine, theirs in (
                (mla.k_up, mha.k_proj),
                (mla.v_up, mha.v_proj),
                (mla.q_proj, mha.q_proj),
                (mla.out_proj, mha.out_proj),
            ):
                mine.bias.copy_(theirs.bias)
        x = randn(2, 8, d_model, seed=4)
        for causal in (False, True):
            expected, w_mha = mha(x, causal=causal)
            for absorbed in (False, True):
                got, w_mla = mla(x, causal=causal, absorbed=absorbed)
                assert (got - expected).abs().max() < 1e-10
                assert (w_mla - w_mha).abs().max() < 1e-10


def test_a_narrower_latent_cannot_represent_a_generic_mha():
    # MLA's map from x to the keys of all heads factors through d_c numbers, so its
    # rank is at most d_c; a random MHA's key map has rank d_model.
    torch.manual_seed(0)
    d_model, h, d_c = 12, 3, 8
    mha = MultiHeadAttention(d_model, h, bias=False).to(F64)
    mla = MultiHeadLatentAttention(d_model, h, latent_dim=d_c).to(F64)
    assert torch.linalg.matrix_rank(mha.k_proj.weight) == d_model
    composed = mla.k_up.weight @ mla.kv_down.weight  # (h d_k, d_model): x -> keys
    assert torch.linalg.matrix_rank(composed) == d_c < d_model


# --- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,error,pattern",
    [
        (dict(d_model=0, num_heads=1, latent_dim=2), ValueError, "d_model must be positive"),
        (dict(d_model=8, num_heads=2.0, latent_dim=2), TypeError, "num_heads must be an int"),
        (dict(d_model=8, num_heads=2, latent_dim=0), ValueError, "latent_dim must be positive"),
        (dict(d_model=8, num_heads=2, latent_dim=None), TypeError, "latent_dim must be an int"),
        (
            dict(d_model=8, num_heads=2, latent_dim=2, rope_dim=3),
            ValueError,
            "rope_dim must be even",
        ),
        (dict(d_model=8, num_heads=2, latent_dim=2, rope_dim=-2), ValueError, "rope_dim"),
        (dict(d_model=9, num_heads=2, latent_dim=2), ValueError, "pass head_dim"),
        (dict(d_model=8, num_heads=2, latent_dim=2, head_dim=0), ValueError, "head_dim"),
        (dict(d_model=8, num_heads=2, latent_dim=2, bias=1), TypeError, "bias must be a bool"),
        (dict(d_model=8, num_heads=2, latent_dim=2, rope_base=0.0), ValueError, "rope_base"),
    ],
)
def test_bad_configurations_name_the_argument(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        MultiHeadLatentAttention(**kwargs)


def test_nine_by_two_heads_with_an_explicit_head_dim_is_fine():
    assert MultiHeadLatentAttention(9, 2, latent_dim=2, head_dim=5).out_proj.in_features == 10


def _filled_cache(mla: MultiHeadLatentAttention) -> KVCache:
    cache = KVCache()
    with torch.no_grad():
        mla(randn(2, 3, 12), causal=True, cache=cache)
    return cache


def _mha_cache() -> KVCache:
    cache = KVCache()
    with torch.no_grad():
        MultiHeadAttention(12, 3).to(F64)(randn(2, 3, 12), causal=True, cache=cache)
    return cache


def _float32_cache() -> KVCache:
    cache = KVCache()
    cache.append(torch.zeros(2, 1, 3, 5), torch.zeros(2, 1, 3, 4))
    return cache


@pytest.mark.parametrize(
    "call,error,pattern",
    [
        (lambda m, c: m(randn(2, 12)), ValueError, r"x must have shape \(B, T, d_model\)"),
        (lambda m, c: m(randn(2, 1, 11)), ValueError, "x has feature size 11"),
        (lambda m, c: m(randn(2, 1, 12).float()), TypeError, "x has dtype torch.float32"),
        (lambda m, c: m(randn(2, 1, 12).numpy()), TypeError, "x must be a torch.Tensor"),
        (
            lambda m, c: m(torch.full((2, 1, 12), math.nan, dtype=F64), cache=c),
            ValueError,
            "x contains NaN",
        ),
        (lambda m, c: m(randn(2, 1, 12), causal=1, cache=c), TypeError, "causal must be a bool"),
        (lambda m, c: m(randn(2, 1, 12), absorbed="yes"), TypeError, "absorbed must be a bool"),
        (
            lambda m, c: m(randn(2, 1, 12), mask=torch.ones(2, 3, 1, 4), cache=c),
            TypeError,
            "mask must be boolean",
        ),
        (
            lambda m, c: m(
                randn(2, 1, 12), mask=torch.ones(2, 3, 1, 9, dtype=torch.bool), cache=c
            ),
            ValueError,
            "mask of shape",
        ),
        (lambda m, c: m(randn(2, 1, 12), cache={}), TypeError, "cache must be a KVCache"),
        (lambda m, c: m(randn(3, 1, 12), cache=c), ValueError, r"cache holds latents of shape"),
        (lambda m, c: m(randn(2, 1, 12), cache=_mha_cache()), ValueError, "cache holds latents"),
        (
            lambda m, c: m(randn(2, 1, 12), cache=_float32_cache()),
            TypeError,
            "cache holds latents of dtype",
        ),
    ],
)
def test_bad_calls_raise_named_errors_and_leave_the_cache(call, error, pattern):
    mla = make()
    cache = _filled_cache(mla)
    key, value, position = cache.key.clone(), cache.value.clone(), cache.position
    params = {k: v.clone() for k, v in mla.state_dict().items()}
    with pytest.raises(error, match=pattern):
        call(mla, cache)
    assert torch.equal(cache.key, key) and torch.equal(cache.value, value)
    assert cache.position == position
    assert all(torch.equal(mla.state_dict()[k], v) for k, v in params.items())


def test_a_parameter_with_nan_raises_and_keeps_the_cache():
    mla = make()
    cache = _filled_cache(mla)
    with torch.no_grad():
        mla.k_rope.weight[0, 0] = math.nan
    with pytest.raises(ValueError, match="k_rope.weight"):
        mla(randn(2, 1, 12), causal=True, cache=cache)
    assert len(cache) == cache.position == 3
