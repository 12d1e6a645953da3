"""The one key/value-cache size helper against caches the package really fills."""

import pytest
import torch

from selfattention import KVCache, MultiHeadAttention, MultiHeadLatentAttention
from selfattention.layers.cache_sizes import CacheConfig

# --- measured: MultiHeadAttention + KVCache, MHA / GQA / MQA ---------------------------


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])  # multi-head, grouped-query, multi-query
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("batch", [1, 3])
def test_cache_bytes_equal_what_kv_caches_hold(num_kv_heads, dtype, batch):
    torch.manual_seed(0)
    num_layers, d_model, num_heads = 2, 32, 4
    layers = [
        MultiHeadAttention(d_model, num_heads, num_kv_heads=num_kv_heads).to(dtype).eval()
        for _ in range(num_layers)
    ]
    caches = [KVCache() for _ in layers]
    config = CacheConfig(num_layers, num_kv_heads, head_dim=d_model // num_heads)
    element_size = torch.empty((), dtype=dtype).element_size()
    tokens = 0
    with torch.no_grad():
        for step in (5, 1, 1, 4, 1):  # a prefill, single tokens, a chunk
            x = torch.randn(batch, step, d_model, dtype=dtype)  # (B, T_new, d_model)
            for layer, cache in zip(layers, caches, strict=True):
                x, _ = layer(x, causal=True, cache=cache)
            tokens += step
            measured = sum(cache.nbytes for cache in caches)
            assert measured == config.cache_bytes(tokens, element_size, batch=batch)
    assert config.bytes_per_token(element_size) * tokens * batch == measured


def test_bytes_per_token_is_the_growth_of_one_step():
    torch.manual_seed(0)
    layer = MultiHeadAttention(24, 6, num_kv_heads=3).eval()
    cache = KVCache()
    config = CacheConfig(1, 3, 4)
    with torch.no_grad():
        layer(torch.randn(1, 7, 24), causal=True, cache=cache)
        before = cache.nbytes
        layer(torch.randn(1, 1, 24), causal=True, cache=cache)
    assert cache.nbytes - before == config.bytes_per_token(4) == 2 * 3 * 4 * 4


# --- arithmetic: the formulas, windows, local/global mixes, latent attention ------------


def test_plain_formula():
    config = CacheConfig(num_layers=32, num_kv_heads=8, head_dim=128)
    assert config.numbers_per_token_per_layer == 2 * 8 * 128
    assert config.bytes_per_token(2) == 2 * 32 * 8 * 128 * 2
    assert config.cache_bytes(4096, 2) == 2 * 32 * 8 * 4096 * 128 * 2 == 2**29
    assert config.cache_bytes(4096, 2, batch=5) == 5 * config.cache_bytes(4096, 2)
    assert config.cache_bytes(0, 2) == 0
    assert config.local_layers == 0


def test_window_caps_every_layer():
    config = CacheConfig(4, 2, 8, window=16)
    plain = CacheConfig(4, 2, 8)
    for tokens in (0, 1, 15, 16):
        assert config.cache_bytes(tokens, 4) == plain.cache_bytes(tokens, 4)
    for tokens in (17, 100, 10_000):
        assert config.cache_bytes(tokens, 4) == plain.cache_bytes(16, 4)
    assert config.local_layers == 4
    assert config.bytes_per_token(4) == plain.bytes_per_token(4)


@pytest.mark.parametrize("tokens", [0, 3, 4096, 4097, 32768])
def test_local_and_global_layers(tokens):
    # Gemma-2-style: 26 layers, half local with a window of 4096.
    mixed = CacheConfig(26, 4, 256, window=4096, num_local_layers=13)
    per_layer_token = 2 * 4 * 256 * 2  # bytes, bfloat16
    expected = per_layer_token * (13 * tokens + 13 * min(tokens, 4096))
    assert mixed.cache_bytes(tokens, 2) == expected
    assert mixed.local_layers == 13


def test_zero_local_layers_is_all_global_and_all_local_is_a_bare_window():
    none_local = CacheConfig(6, 2, 8, window=4, num_local_layers=0)
    all_local = CacheConfig(6, 2, 8, window=4, num_local_layers=6)
    assert none_local.cache_bytes(50, 2) == CacheConfig(6, 2, 8).cache_bytes(50, 2)
    assert all_local.cache_bytes(50, 2) == CacheConfig(6, 2, 8, window=4).cache_bytes(50, 2)


def test_latent_attention_caches_latent_plus_rope_whatever_the_heads():
    # DeepSeek-V2: 60 layers, d_c = 512, d_R = 64, 128 heads of width 128.
    mla = CacheConfig(60, 128, 128, latent_dim=512, rope_dim=64)
    assert mla.numbers_per_token_per_layer == 576
    assert mla.bytes_per_token(2) == 60 * 576 * 2
    assert mla.cache_bytes(1000, 2, batch=2) == 2 * 2 * 60 * 576 * 1000
    other_heads = CacheConfig(60, 1, 8, latent_dim=512, rope_dim=64)
    assert other_heads.cache_bytes(1000, 2) == mla.cache_bytes(1000, 2)
    full = CacheConfig(60, 128, 128)
    assert full.bytes_per_token(2) / mla.bytes_per_token(2) == 2 * 128 * 128 / 576
    assert CacheConfig(2, 1, 1, latent_dim=3).numbers_per_token_per_layer == 3


def test_latent_attention_with_a_window():
    config = CacheConfig(2, 1, 1, window=5, latent_dim=10, rope_dim=2)
    assert config.cache_bytes(100, 1) == 2 * 12 * 5


def test_numpy_integers_are_stored_as_ints():
    np = pytest.importorskip("numpy")
    config = CacheConfig(np.int64(2), np.int32(3), np.int64(4), window=np.int64(5))
    assert type(config.num_layers) is int and type(config.window) is int
    assert config == CacheConfig(2, 3, 4, window=5)


def test_configs_are_frozen():
    config = CacheConfig(1, 1, 1)
    with pytest.raises(AttributeError):
        config.num_layers = 2  # type: ignore[misc]


# --- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        (
            dict(num_layers=0, num_kv_heads=1, head_dim=1),
            ValueError,
            "num_layers must be positive",
        ),
        (dict(num_layers=1.0, num_kv_heads=1, head_dim=1), TypeError, "num_layers must be an int"),
        (dict(num_layers=1, num_kv_heads=-2, head_dim=1), ValueError, "num_kv_heads"),
        (dict(num_layers=1, num_kv_heads=1, head_dim=True), TypeError, "head_dim"),
        (dict(num_layers=1, num_kv_heads=1, head_dim=1, window=0), ValueError, "window"),
        (
            dict(num_layers=2, num_kv_heads=1, head_dim=1, num_local_layers=1),
            ValueError,
            "num_local_layers=1 needs a window",
        ),
        (
            dict(num_layers=2, num_kv_heads=1, head_dim=1, window=4, num_local_layers=3),
            ValueError,
            "num_local_layers=3 exceeds num_layers=2",
        ),
        (
            dict(num_layers=2, num_kv_heads=1, head_dim=1, window=4, num_local_layers=-1),
            ValueError,
            "num_local_layers must be non-negative",
        ),
        (dict(num_layers=1, num_kv_heads=1, head_dim=1, latent_dim=0), ValueError, "latent_dim"),
        (
            dict(num_layers=1, num_kv_heads=1, head_dim=1, rope_dim=64),
            ValueError,
            "rope_dim=64 is the decoupled rotary key",
        ),
        (
            dict(num_layers=1, num_kv_heads=1, head_dim=1, latent_dim=4, rope_dim=-1),
            ValueError,
            "rope_dim must be non-negative",
        ),
    ],
)
def test_bad_configurations_name_the_argument(kwargs, error, message):
    with pytest.raises(error, match=message):
        CacheConfig(**kwargs)


@pytest.mark.parametrize(
    "call,error,message",
    [
        (lambda c: c.bytes_per_token(0), ValueError, "element_size must be positive"),
        (lambda c: c.bytes_per_token(2.0), TypeError, "element_size must be an int"),
        (lambda c: c.bytes_per_token(torch.float16), TypeError, "element_size must be an int"),
        (lambda c: c.cache_bytes(-1, 2), ValueError, "tokens must be non-negative"),
        (lambda c: c.cache_bytes(10.5, 2), TypeError, "tokens must be an int"),
        (lambda c: c.cache_bytes(10, 2, batch=0), ValueError, "batch must be positive"),
    ],
)
def test_bad_arguments_name_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call(CacheConfig(2, 2, 4))


# --- measured: sliding windows, local and global layers, latent attention (chapter 14) --


def _decode_all(layers, caches, steps, d_model, batch, dtype, config, element_size):
    """Decode through ``layers`` in chunks of ``steps``; after each, the helper must agree."""
    tokens = 0
    with torch.no_grad():
        for step in steps:
            x = torch.randn(batch, step, d_model, dtype=dtype)  # (B, T_new, d_model)
            for layer, cache in zip(layers, caches, strict=True):
                x = x + layer(x, causal=True, cache=cache)[0]
            tokens += step
            measured = sum(cache.nbytes for cache in caches)
            assert measured == config.cache_bytes(tokens, element_size, batch=batch), tokens
    return tokens


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("num_local_layers", [None, 0, 2, 4])
def test_windowed_and_mixed_caches_equal_the_helper(dtype, num_local_layers):
    torch.manual_seed(0)
    num_layers, d_model, num_heads, num_kv_heads, window = 4, 16, 4, 2, 5
    local = num_layers if num_local_layers is None else num_local_layers
    layers = [  # local layers first; the order does not change the bytes
        MultiHeadAttention(
            d_model, num_heads, num_kv_heads=num_kv_heads, window=window if n < local else None
        )
        .to(dtype)
        .eval()
        for n in range(num_layers)
    ]
    caches = [KVCache() for _ in layers]
    config = CacheConfig(
        num_layers, num_kv_heads, d_model // num_heads, window=window,
        num_local_layers=num_local_layers,
    )  # fmt: skip
    element_size = torch.empty((), dtype=dtype).element_size()
    steps = (3, 1, 1, 4, 1, 7, 1, 1)  # 19 tokens: well past the window
    tokens = _decode_all(layers, caches, steps, d_model, 2, dtype, config, element_size)
    assert tokens == 19 and all(
        len(c) == (window if n < local else 19) for n, c in enumerate(caches)
    )


@pytest.mark.parametrize("rope_dim", [0, 4])
def test_latent_caches_equal_the_helper(rope_dim):
    torch.manual_seed(0)
    dtype, d_model = torch.bfloat16, 16
    layers = [
        MultiHeadLatentAttention(d_model, 4, latent_dim=6, rope_dim=rope_dim, head_dim=8)
        .to(dtype)
        .eval()
        for _ in range(3)
    ]
    caches = [KVCache() for _ in layers]
    config = CacheConfig(3, 4, 8, latent_dim=6, rope_dim=rope_dim)
    _decode_all(layers, caches, (5, 1, 1, 3), d_model, 2, dtype, config, 2)
    assert config.bytes_per_token(2) == 3 * (6 + rope_dim) * 2
