"""Sliding-window attention (chapter 14): the band mask, and the layer and cache that use it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from selfattention import KVCache, MultiHeadAttention, causal_mask, rotary_embedding
from selfattention.exercises.ch14 import check_window_mask
from selfattention.layers.attention_torch import attend

F64 = torch.float64


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


# --- the band mask --------------------------------------------------------------------


@pytest.mark.parametrize("t_q,t_k", [(1, 1), (5, 5), (3, 8), (8, 3), (0, 4), (4, 0)])
@pytest.mark.parametrize("align", ["top-left", "bottom-right"])
@pytest.mark.parametrize("window", [1, 2, 3, 7, 100])
def test_window_is_the_definition(t_q, t_k, align, window):
    offset = 0 if align == "top-left" else t_k - t_q
    expected = np.zeros((t_q, t_k), dtype=bool)
    for i, j in itertools.product(range(t_q), range(t_k)):
        expected[i, j] = 0 <= (i + offset) - j < window  # i in the alignment's coordinates
    got = causal_mask(t_q, t_k, align=align, window=window)
    assert got.dtype == np.bool_ and np.array_equal(got, expected)


def test_a_window_at_least_as_long_as_the_keys_is_plain_causal():
    for t in (1, 4, 9):
        assert np.array_equal(causal_mask(t, window=t), causal_mask(t))
        assert np.array_equal(causal_mask(t, window=t + 5), causal_mask(t))
    assert np.array_equal(
        causal_mask(3, 7, "bottom-right", window=7), causal_mask(3, 7, "bottom-right")
    )


def test_every_query_sees_at_most_window_keys_and_the_band_is_diagonal():
    mask = causal_mask(20, window=4)
    assert mask.sum(axis=1).tolist() == [1, 2, 3] + [4] * 17
    assert np.array_equal(causal_mask(20, window=1), np.eye(20, dtype=bool))
    # A band: constant along every diagonal.
    for k in range(-20, 21):
        assert len(set(np.diagonal(mask, offset=k).tolist())) <= 1


@pytest.mark.parametrize("window", [1, 3, 6])
@pytest.mark.parametrize("t_q,t_k", [(9, 9), (4, 9)])
def test_windowed_attention_equals_sdpa_with_the_same_band(window, t_q, t_k):
    q, k, v = randn(2, 3, t_q, 5, seed=1), randn(2, 3, t_k, 5, seed=2), randn(2, 3, t_k, 4, seed=3)
    band = torch.from_numpy(causal_mask(t_q, t_k, align="bottom-right", window=window))
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=band)
    got, weights = attend(q, k, v, band)
    assert (got - expected).abs().max() < 1e-12
    assert torch.equal(weights != 0, band.expand_as(weights))


def test_window_bad_arguments_name_it():
    with pytest.raises(ValueError, match="window must be positive"):
        causal_mask(4, window=0)
    with pytest.raises(ValueError, match="window must be positive"):
        causal_mask(4, window=-2)
    with pytest.raises(TypeError, match="window must be an int"):
        causal_mask(4, window=2.0)
    with pytest.raises(TypeError, match="window must be an int"):
        causal_mask(4, window=True)
    assert causal_mask(3, window=np.int64(2)).sum() == 5


# --- the windowed layer -----------------------------------------------------------------


def windowed(window, num_kv_heads=4, rope=False, seed=0, bias=True):
    torch.manual_seed(seed)
    return (
        MultiHeadAttention(16, 4, num_kv_heads=num_kv_heads, rope=rope, window=window, bias=bias)
        .to(F64)
        .eval()
    )


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
@pytest.mark.parametrize("window", [1, 3, 5])
def test_windowed_layer_equals_sdpa_with_the_band(num_kv_heads, window):
    layer = windowed(window, num_kv_heads)
    x = randn(2, 11, 16, seed=1)  # (B, T, d_model)
    with torch.no_grad():
        output, weights = layer(x, causal=True)
        q = layer.split_heads(layer.q_proj(x))  # (B, h, T, d_k)
        k = layer.split_heads(layer.k_proj(x), num_kv_heads)  # (B, h_kv, T, d_k)
        v = layer.split_heads(layer.v_proj(x), num_kv_heads)  # (B, h_kv, T, d_k)
        band = torch.from_numpy(causal_mask(11, window=window))
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=band, enable_gqa=True)
        expected = layer.out_proj(layer.merge_heads(context))
    assert (output - expected).abs().max() < 1e-12
    assert torch.equal(weights != 0, band.expand_as(weights))


def test_a_window_as_long_as_the_sequence_is_plain_causal_attention():
    x = randn(1, 9, 16, seed=2)
    with torch.no_grad():
        plain, _ = windowed(None)(x, causal=True)
        wide, _ = windowed(9)(x, causal=True)
        narrow, _ = windowed(8)(x, causal=True)
    assert torch.equal(plain, wide)
    assert (narrow[:, :8] - plain[:, :8]).abs().max() < 1e-14  # the first 8 cannot tell
    assert (narrow[:, 8] - plain[:, 8]).abs().max() > 1e-3  # token 8 no longer sees token 0


def decode(layer, x, chunks, cache):
    """Feed ``x (B, T, d_model)`` through ``layer`` in chunks of the given sizes."""
    outputs, start, lengths = [], 0, []
    with torch.no_grad():
        for size in chunks:
            outputs.append(layer(x[:, start : start + size], causal=True, cache=cache)[0])
            start += size
            lengths.append(len(cache))
    assert start == x.shape[1]
    return torch.cat(outputs, dim=1), lengths


def mixed_chunks(total, sizes):
    """Chunk sizes taken from ``sizes`` in turn, the last one cut so that they sum to ``total``."""
    chunks = []
    while sum(chunks) < total:
        chunks.append(min(sizes[len(chunks) % len(sizes)], total - sum(chunks)))
    return chunks


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize("window", [1, 2, 4])
def test_windowed_cached_decoding_equals_the_full_windowed_pass(num_kv_heads, rope, window):
    T = 8 * window
    layer = windowed(window, num_kv_heads, rope=rope, seed=1)
    x = randn(2, T, 16, seed=3)  # (B, T, d_model)
    with torch.no_grad():
        full, _ = layer(x, causal=True)
    plans = {
        "token by token": [1] * T,
        "a prefill longer than the window, then tokens": [window + 3] + [1] * (T - window - 3),
        "chunks of mixed sizes": mixed_chunks(T, [2, 1, window + 1, 3, 1]),
    }
    for plan, chunks in plans.items():
        cache = KVCache()
        got, lengths = decode(layer, x, chunks, cache)
        assert (got - full).abs().max() < 1e-10, plan
        assert max(lengths) <= window, plan
        assert cache.position == T and len(cache) == window, plan


def test_cache_bytes_stop_growing_at_the_window():
    window = 4
    layer = windowed(window, num_kv_heads=2, rope=True)
    x = randn(1, 10 * window, 16, seed=4)
    cache = KVCache()
    sizes = []
    with torch.no_grad():
        for t in range(10 * window):
            layer(x[:, t : t + 1], causal=True, cache=cache)
            sizes.append(cache.nbytes)
    per_token = 2 * 2 * 4 * 8  # keys and values, h_kv = 2, d_k = 4, float64
    assert sizes[:window] == [per_token * (t + 1) for t in range(window)]
    assert sizes[window - 1] == sizes[10 * window - 1] == per_token * window
    assert set(sizes[window - 1 :]) == {per_token * window}


def test_trimmed_cache_keeps_the_last_keys_with_their_absolute_rotations():
    window = 3
    layer = windowed(window, num_kv_heads=1, rope=True, seed=2)
    x = randn(1, 10, 16, seed=5)
    cache = KVCache()
    with torch.no_grad():
        decode(layer, x, [4, 1, 1, 4], cache)
        keys = layer.split_heads(layer.k_proj(x), 1)  # (1, 1, T, d_k)
        rotated = rotary_embedding(keys, torch.arange(10))  # absolute positions 0..9
    assert (cache.key - rotated[:, :, -window:]).abs().max() < 1e-14
    assert cache.position == 10


def test_stacked_windowed_layers_reach_exactly_l_times_w_minus_1_tokens_back():
    window, T = 3, 16
    torch.manual_seed(0)
    stack = [MultiHeadAttention(8, 2, window=window).to(F64).eval() for _ in range(3)]
    x = randn(1, T, 8, seed=6)

    def run(inputs, layers):
        with torch.no_grad():
            for layer in layers:
                inputs = inputs + layer(inputs, causal=True)[0]  # residual, as in a model
        return inputs

    for depth in (1, 2, 3):
        base = run(x, stack[:depth])
        for j in range(T):
            changed = x.clone()
            changed[:, j] = randn(8, seed=100 + j)
            moved = (run(changed, stack[:depth]) - base)[0].abs().amax(dim=-1) > 1e-12  # (T,)
            reach = [i for i in range(T) if moved[i]]
            assert reach == list(range(j, min(T, j + depth * (window - 1) + 1))), (depth, j)


def test_window_needs_causal_and_a_refused_call_leaves_the_cache():
    layer = windowed(3)
    cache = KVCache()
    with torch.no_grad():
        layer(randn(1, 5, 16), causal=True, cache=cache)
    key, position = cache.key.clone(), cache.position
    with pytest.raises(ValueError, match=r"window=3.*causal=True"):
        layer(randn(1, 1, 16), cache=cache)
    with pytest.raises(ValueError, match="window=3"):
        layer(randn(1, 4, 16))
    assert torch.equal(cache.key, key) and cache.position == position == 5 and len(cache) == 3


@pytest.mark.parametrize(
    "window,error,pattern",
    [
        (0, ValueError, "window must be positive"),
        (-3, ValueError, "window must be positive"),
        (2.0, TypeError, "window must be an int"),
        (True, TypeError, "window must be an int"),
        ("4", TypeError, "window must be an int"),
    ],
)
def test_bad_windows_name_the_argument(window, error, pattern):
    with pytest.raises(error, match=pattern):
        MultiHeadAttention(16, 4, window=window)


# --- the chapter's exercise checker ---------------------------------------------------


def test_window_mask_checker_accepts_a_right_answer(capsys):
    def right(t_q, t_k, window):
        i = np.arange(t_q)[:, None] + t_k - t_q  # positions of the queries
        j = np.arange(t_k)[None, :]
        return (i - j >= 0) & (i - j < window)

    assert check_window_mask(right) is True
    assert capsys.readouterr().out.startswith("✓ check_window_mask: all 6 cases pass")


@pytest.mark.parametrize(
    "wrong,case,hint",
    [
        (
            lambda t_q, t_k, w: causal_mask(t_q, t_k, "bottom-right", window=w + 1),
            "case 1",
            "window + 1 keys",
        ),
        (lambda t_q, t_k, w: causal_mask(t_q, t_k, window=w), "case 2", "aligned top-left"),
        (
            lambda t_q, t_k, w: (
                np.abs(np.arange(t_q)[:, None] + t_k - t_q - np.arange(t_k)[None, :]) < w
            ),
            "case 1",
            "reaches into the future",
        ),
        (lambda t_q, t_k, w: causal_mask(t_q, t_k, "bottom-right"), "case 1", "no window"),
    ],
)
def test_window_mask_checker_names_the_case_and_the_mistake(capsys, wrong, case, hint):
    assert check_window_mask(wrong) is False
    out = capsys.readouterr().out
    assert f"✗ check_window_mask: {case} (" in out
    assert "hint: " in out and hint in out


@pytest.mark.parametrize("dtype", [int, np.float64, np.uint8])
def test_window_mask_checker_refuses_numbers_for_booleans(capsys, dtype):
    # The right values as 0/1 numbers are no mask: SDPA would add them to the scores.
    def numbers(t_q, t_k, w):
        return causal_mask(t_q, t_k, "bottom-right", window=w).astype(dtype)

    assert check_window_mask(numbers) is False
    out = capsys.readouterr().out
    assert out.startswith("✗ check_window_mask: case 1 (")
    assert "not booleans" in out and "hint: return booleans" in out
    assert all(len(line) <= 79 for line in out.splitlines())


def test_window_mask_checker_reports_wrong_numbers_as_wrong_values(capsys):
    def wrong_numbers(t_q, t_k, w):
        return causal_mask(t_q, t_k, "bottom-right", window=w + 1).astype(int)

    assert check_window_mask(wrong_numbers) is False
    out = capsys.readouterr().out
    assert "values differ" in out and "window + 1 keys" in out
