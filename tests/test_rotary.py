"""Rotary position embeddings (chapter 13) against independent references.

The references, none of which calls the package:

- Meta's Llama reference code, which writes RoPE as complex multiplication
  (``torch.polar``, ``torch.view_as_complex``) in the interleaved layout; the
  half layout is the same complex product with the pair ``(l, l + d_k/2)``;
- Hugging Face's ``rotate_half`` formulation (the half layout), and its
  weight-conversion ``permute`` (interleaved to half);
- the ``rotary-embedding-torch`` package (interleaved layout), installed from
  PyPI as a light pure-Python wheel.

Hugging Face's ``transformers`` and ``torchtune`` would pull in large trees
(tokenizers, hub clients, datasets); their few lines of RoPE are transcribed
here instead, with their source named.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from rotary_embedding_torch import RotaryEmbedding

from selfattention import KVCache, MultiHeadAttention, permute_rotary_rows, rotary_embedding
from selfattention.exercises import check_rotary_embedding
from selfattention.layers.rotary import rotary_frequencies

F64 = torch.float64


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


# --- Meta's Llama reference (llama/model.py), float32 -> float64 ---------------


def meta_precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0) -> torch.Tensor:
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].double() / dim))
    t = torch.arange(end, device=freqs.device, dtype=F64)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex128, (end, dim/2)


def meta_apply_rotary_emb(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """Meta's apply_rotary_emb for one tensor ``x (B, T, h, d)``, as Llama lays it out."""
    x_ = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2))  # (B, T, h, d/2)
    shape = [d if i in (1, x_.ndim - 1) else 1 for i, d in enumerate(x_.shape)]
    return torch.view_as_real(x_ * freqs_cis.view(*shape)).flatten(3)


def complex_half(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """The same complex product with pair l = features (l, l + d/2)."""
    half = x.shape[-1] // 2
    rotated = torch.complex(x[..., :half], x[..., half:]) * freqs_cis  # (..., T, d/2)
    return torch.cat((rotated.real, rotated.imag), dim=-1)


# --- Hugging Face (transformers, models/llama), the half layout ----------------


def hf_rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def hf_cos_sin(position_ids: torch.Tensor, dim: int, base: float) -> tuple[torch.Tensor, ...]:
    """LlamaRotaryEmbedding.forward, for position_ids (B, T): cos and sin (B, T, dim)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(F64) / dim))
    inv_freq_expanded = inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].to(F64)
    freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def hf_apply_rotary_pos_emb(x, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    return (x * cos) + (hf_rotate_half(x) * sin)


def hf_permute(w: torch.Tensor, n_heads: int, dim1: int, dim2: int) -> torch.Tensor:
    """convert_llama_weights_to_hf.py: Meta's interleaved rows to HF's half layout."""
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


# --- the references agree with the package ------------------------------------


@pytest.mark.parametrize("head_dim", [2, 8, 64])
def test_interleaved_equals_metas_complex_multiplication(head_dim):
    batch, length, heads = 2, 37, 3
    x = randn(batch, length, heads, head_dim)  # Meta's layout (B, T, h, d)
    freqs_cis = meta_precompute_freqs_cis(head_dim, length)
    expected = meta_apply_rotary_emb(x, freqs_cis)  # (B, T, h, d)
    ours = rotary_embedding(x.transpose(1, 2), layout="interleaved")  # (B, h, T, d)
    torch.testing.assert_close(ours.transpose(1, 2), expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("head_dim", [2, 8, 64])
def test_half_equals_the_complex_product_of_the_half_pairs(head_dim):
    x = randn(2, 3, 37, head_dim)  # (B, h, T, d)
    freqs_cis = meta_precompute_freqs_cis(head_dim, 37, theta=500.0)  # (T, d/2)
    expected = complex_half(x, freqs_cis)
    ours = rotary_embedding(x, base=500.0, layout="half")
    torch.testing.assert_close(ours, expected, atol=1e-12, rtol=0)


def test_half_equals_hugging_faces_rotate_half_with_position_ids():
    batch, heads, length, head_dim = 3, 2, 11, 16
    x = randn(batch, heads, length, head_dim)  # (B, h, T, d)
    position_ids = torch.stack(
        [torch.arange(length), torch.arange(length) + 40, torch.arange(length) * 3]
    )  # (B, T): a different row of positions per batch entry
    cos, sin = hf_cos_sin(position_ids, head_dim, 10000.0)  # (B, T, d)
    expected = hf_apply_rotary_pos_emb(x, cos, sin)
    ours = rotary_embedding(x, position_ids, layout="half")
    torch.testing.assert_close(ours, expected, atol=1e-12, rtol=0)


def test_converter_equals_hugging_faces_weight_permutation():
    n_heads, head_dim, d_model = 4, 8, 16
    weight = randn(n_heads * head_dim, d_model)  # (h d_k, d_model)
    expected = hf_permute(weight, n_heads, n_heads * head_dim, d_model)
    ours = permute_rotary_rows(weight, n_heads, "interleaved", "half")
    assert torch.equal(ours, expected)
    back = permute_rotary_rows(ours, n_heads, "half", "interleaved")
    assert torch.equal(back, weight)


def test_interleaved_equals_rotary_embedding_torch_with_its_own_frequencies():
    # The library computes its frequencies and angles in float32.
    head_dim, length = 32, 50
    x = randn(2, 4, length, head_dim).float()  # (B, h, T, d)
    library = RotaryEmbedding(dim=head_dim, theta=10000, cache_if_possible=False)
    expected = library.rotate_queries_or_keys(x)
    ours = rotary_embedding(x, layout="interleaved")
    torch.testing.assert_close(ours, expected, atol=2e-5, rtol=0)


@pytest.mark.parametrize("offset", [0, 7, 1000])
def test_interleaved_equals_rotary_embedding_torch_with_an_offset(offset):
    # With float64 frequencies handed to it, the library agrees to rounding;
    # its offset is the position of the first token, as under a KV cache.
    head_dim, length = 16, 9
    x = randn(1, 2, length, head_dim)  # (B, h, T, d)
    library = RotaryEmbedding(
        dim=head_dim, custom_freqs=rotary_frequencies(head_dim), cache_if_possible=False
    )
    expected = library.rotate_queries_or_keys(x, offset=offset)
    ours = rotary_embedding(x, torch.arange(offset, offset + length), layout="interleaved")
    torch.testing.assert_close(ours, expected, atol=1e-10, rtol=0)


def test_float_positions_equal_rotary_embedding_torchs_position_interpolation():
    # Position interpolation divides every position by a factor (here 4), so
    # positions become fractions: the library's interpolate_factor.
    head_dim, length, factor = 16, 20, 4.0
    x = randn(1, 1, length, head_dim)  # (B, h, T, d)
    library = RotaryEmbedding(
        dim=head_dim,
        custom_freqs=rotary_frequencies(head_dim),
        interpolate_factor=factor,
        cache_if_possible=False,
    )
    expected = library.rotate_queries_or_keys(x)
    positions = torch.arange(length, dtype=F64) / factor  # (T,)
    ours = rotary_embedding(x, positions, layout="interleaved")
    torch.testing.assert_close(ours, expected, atol=1e-10, rtol=0)


def test_frequencies_follow_the_formula():
    theta = rotary_frequencies(64, base=10000.0)  # (32,)
    expected = torch.tensor([10000.0 ** (-2 * pair / 64) for pair in range(32)], dtype=F64)
    torch.testing.assert_close(theta, expected, atol=0, rtol=1e-15)
    assert theta[0] == 1.0 and math.isclose(
        2 * math.pi / theta[-1].item(), 47_117.24278, rel_tol=1e-9
    )


def test_dtype_and_shape_are_kept():
    for dtype in (torch.float16, torch.bfloat16, torch.float32, F64):
        x = randn(2, 3, 5, 8).to(dtype)
        for layout in ("half", "interleaved"):
            out = rotary_embedding(x, layout=layout)
            assert out.dtype == dtype and out.shape == x.shape
    x = randn(5, 8)  # (T, d_k): no batch axes
    torch.testing.assert_close(rotary_embedding(x), rotary_embedding(x[None, None])[0, 0])


def test_position_zero_is_the_identity_and_d_k_2_layouts_coincide():
    x = randn(1, 6)  # one token at position 0
    assert torch.equal(rotary_embedding(x), x)
    pairs = randn(7, 2)  # d_k = 2: one pair, the same in both layouts
    assert torch.equal(
        rotary_embedding(pairs, layout="half"), rotary_embedding(pairs, layout="interleaved")
    )


def test_the_wrong_layout_changes_scores():
    q, k = randn(6, 8, seed=1), randn(6, 8, seed=2)  # (T, d_k)
    right = rotary_embedding(q, layout="interleaved") @ rotary_embedding(k, layout="interleaved").T
    wrong = rotary_embedding(q, layout="half") @ rotary_embedding(k, layout="half").T
    assert (right - wrong).abs().max() > 0.1


# --- properties ----------------------------------------------------------------

layouts = st.sampled_from(["half", "interleaved"])
head_dims = st.integers(1, 8).map(lambda n: 2 * n)
bases = st.sampled_from([10.0, 500.0, 10000.0, 1e6])


@given(head_dims, st.integers(1, 6), layouts, bases, st.integers(0, 2**16))
def test_every_pair_keeps_its_norm(head_dim, length, layout, base, seed):
    x = randn(2, length, head_dim, seed=seed)
    positions = torch.randint(
        -5000, 5000, (length,), generator=torch.Generator().manual_seed(seed)
    )
    out = rotary_embedding(x, positions, base=base, layout=layout)

    def pair_norms(t):
        half = head_dim // 2
        if layout == "interleaved":
            a, b = t[..., 0::2], t[..., 1::2]
        else:
            a, b = t[..., :half], t[..., half:]
        return (a**2 + b**2).sqrt()  # (..., T, d_k/2)

    torch.testing.assert_close(pair_norms(out), pair_norms(x), atol=1e-12, rtol=1e-12)


@given(
    head_dims,
    st.integers(1, 5),
    st.integers(1, 5),
    layouts,
    bases,
    st.integers(-10_000, 10_000),
    st.integers(0, 2**16),
)
def test_scores_depend_only_on_the_offset(head_dim, t_q, t_k, layout, base, shift, seed):
    gen = torch.Generator().manual_seed(seed)
    q, k = randn(t_q, head_dim, seed=seed), randn(t_k, head_dim, seed=seed + 1)
    i = torch.randint(0, 1000, (t_q,), generator=gen)  # query positions
    j = torch.randint(0, 1000, (t_k,), generator=gen)  # key positions

    def scores(qi, kj):
        rq = rotary_embedding(q, qi, base=base, layout=layout)
        rk = rotary_embedding(k, kj, base=base, layout=layout)
        return rq @ rk.T  # (T_q, T_k)

    torch.testing.assert_close(scores(i + shift, j + shift), scores(i, j), atol=1e-9, rtol=1e-9)


@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 6), head_dims, layouts)
def test_batched_positions_apply_per_row(batch, heads, length, head_dim, layout):
    x = randn(batch, heads, length, head_dim, seed=batch * 100 + length)
    positions = torch.randint(0, 500, (batch, length), generator=torch.Generator().manual_seed(3))
    together = rotary_embedding(x, positions, layout=layout)  # (B, h, T, d)
    for row in range(batch):
        alone = rotary_embedding(x[row], positions[row], layout=layout)  # (h, T, d)
        torch.testing.assert_close(together[row], alone, atol=0, rtol=0)


@given(
    st.integers(1, 4),
    st.integers(1, 4).map(lambda n: 2 * n),
    st.integers(1, 6),
    st.integers(1, 6),
    st.sampled_from([("interleaved", "half"), ("half", "interleaved")]),
    st.booleans(),
    st.integers(0, 2**16),
)
def test_the_converter_leaves_scores_unchanged(
    num_heads, head_dim, d_model, length, layouts_pair, bias, seed
):
    source, target = layouts_pair
    rows = num_heads * head_dim
    w_q, w_k = randn(rows, d_model, seed=seed), randn(rows, d_model, seed=seed + 1)
    b_q, b_k = randn(rows, seed=seed + 2) * bias, randn(rows, seed=seed + 3) * bias
    x = randn(length, d_model, seed=seed + 4)  # (T, d_model)
    positions = torch.arange(length) + seed % 100

    def scores(wq, bq, wk, bk, layout):
        q = (x @ wq.T + bq).view(length, num_heads, head_dim).transpose(0, 1)  # (h, T, d_k)
        k = (x @ wk.T + bk).view(length, num_heads, head_dim).transpose(0, 1)  # (h, T, d_k)
        rq = rotary_embedding(q, positions, layout=layout)
        rk = rotary_embedding(k, positions, layout=layout)
        return rq @ rk.transpose(-2, -1)  # (h, T, T)

    before = scores(w_q, b_q, w_k, b_k, source)
    moved = [permute_rotary_rows(t, num_heads, source, target) for t in (w_q, b_q, w_k, b_k)]
    torch.testing.assert_close(scores(*moved, target), before, atol=1e-9, rtol=1e-9)


# --- bad input -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: rotary_embedding(torch.zeros(3, 5)), ValueError, "x must have an even"),
        (lambda: rotary_embedding(torch.zeros(3, 0)), ValueError, "x must have an even"),
        (lambda: rotary_embedding(torch.zeros(4)), ValueError, "x must have at least 2"),
        (lambda: rotary_embedding(torch.zeros(3, 4, dtype=torch.int64)), TypeError, "x must be"),
        (lambda: rotary_embedding([[1.0, 2.0]]), TypeError, "x must be a torch.Tensor"),
        (
            lambda: rotary_embedding(torch.tensor([[float("nan"), 0.0]])),
            ValueError,
            "x contains NaN",
        ),
        (
            lambda: rotary_embedding(torch.zeros(3, 4), torch.arange(4)),
            ValueError,
            "positions must have shape (T,) = (3,)",
        ),
        (
            lambda: rotary_embedding(torch.zeros(2, 3, 4), torch.zeros(3, 3, dtype=torch.int64)),
            ValueError,
            "or (B, T) = (2, 3)",
        ),
        (
            lambda: rotary_embedding(torch.zeros(3, 4), torch.zeros(1, 3, dtype=torch.int64)),
            ValueError,
            "positions must have shape (T,)",
        ),
        (
            lambda: rotary_embedding(torch.zeros(3, 4), torch.ones(3, dtype=torch.bool)),
            TypeError,
            "positions must hold integers",
        ),
        (
            lambda: rotary_embedding(torch.zeros(3, 4), torch.ones(3, dtype=torch.complex64)),
            TypeError,
            "positions must hold integers",
        ),
        (
            lambda: rotary_embedding(torch.zeros(3, 4), [0, 1, 2]),
            TypeError,
            "positions must be a torch.Tensor",
        ),
        (
            lambda: rotary_embedding(torch.zeros(3, 4), torch.tensor([0.0, float("inf"), 1.0])),
            ValueError,
            "positions contains inf",
        ),
        (lambda: rotary_embedding(torch.zeros(3, 4), base=0.0), ValueError, "base must be"),
        (lambda: rotary_embedding(torch.zeros(3, 4), base=-2.0), ValueError, "base must be"),
        (
            lambda: rotary_embedding(torch.zeros(3, 4), base=float("nan")),
            ValueError,
            "base must be",
        ),
        (lambda: rotary_embedding(torch.zeros(3, 4), base=True), TypeError, "base must be"),
        (lambda: rotary_embedding(torch.zeros(3, 4), base="1e4"), TypeError, "base must be"),
        (
            lambda: rotary_embedding(torch.zeros(3, 4), layout="neox"),
            ValueError,
            "layout must be one of",
        ),
        (lambda: rotary_embedding(torch.zeros(3, 4), layout=None), TypeError, "layout must be"),
        (
            lambda: permute_rotary_rows(torch.zeros(6, 4), 2, "half", "interleaved"),
            ValueError,
            "do not split into num_heads=2 heads of an even width",
        ),
        (
            lambda: permute_rotary_rows(torch.zeros(8, 4), 3, "half", "interleaved"),
            ValueError,
            "do not split into num_heads=3",
        ),
        (
            lambda: permute_rotary_rows(torch.zeros(2, 8, 4), 1, "half", "interleaved"),
            ValueError,
            "weight must have shape",
        ),
        (
            lambda: permute_rotary_rows(torch.zeros(8, 4), 0, "half", "interleaved"),
            ValueError,
            "num_heads must be positive",
        ),
        (
            lambda: permute_rotary_rows(torch.zeros(8, 4), 2.0, "half", "interleaved"),
            TypeError,
            "num_heads must be an int",
        ),
        (
            lambda: permute_rotary_rows(torch.zeros(8, 4, dtype=torch.int32), 2, "half", "half"),
            TypeError,
            "weight must be a floating-point",
        ),
        (
            lambda: permute_rotary_rows(torch.zeros(8, 4), 2, "meta", "half"),
            ValueError,
            "from_layout must be one of",
        ),
        (
            lambda: permute_rotary_rows(torch.zeros(8, 4), 2, "half", "hf"),
            ValueError,
            "to_layout must be one of",
        ),
        (lambda: rotary_frequencies(7), ValueError, "head_dim must be even"),
        (
            lambda: rotary_frequencies(8, dtype=torch.int64),
            TypeError,
            "dtype must be a floating-point torch.dtype such as torch.float64, got torch.dtype",
        ),
        (lambda: rotary_frequencies(8, dtype="float32"), TypeError, "got str 'float32'"),
        (lambda: rotary_frequencies(8, dtype=None), TypeError, "dtype must be a floating-point"),
        (
            lambda: permute_rotary_rows(
                torch.full((8, 4), float("nan")), 2, "half", "interleaved"
            ),
            ValueError,
            "weight contains NaN (shape (8, 4))",
        ),
        (
            lambda: rotary_embedding(torch.zeros(3, 4), [0, 1, 2]),
            TypeError,
            "positions must be a torch.Tensor of integers, got list",
        ),
        (lambda: rotary_embedding(torch.zeros(3, 4), layout=1), TypeError, "got int 1"),
        (lambda: rotary_frequencies(0), ValueError, "head_dim must be positive"),
    ],
)
def test_bad_input_gets_a_named_error(call, error, words):
    with pytest.raises(error) as raised:
        call()
    assert words in str(raised.value)


def test_positions_on_another_device_are_refused():
    x = torch.zeros(3, 4)
    positions = torch.arange(3, device="meta")
    with pytest.raises(ValueError, match="positions is on meta but x is on cpu"):
        rotary_embedding(x, positions)


def test_same_layout_conversion_is_a_copy():
    weight = randn(8, 3)
    copy = permute_rotary_rows(weight, 2, "half", "half")
    assert torch.equal(copy, weight) and copy.data_ptr() != weight.data_ptr()


# --- the chapter's exercise checker ---------------------------------------------


def _reader_rope(x, positions, base=10000.0, sign=1.0, factor=2.0):
    d = x.shape[-1]
    theta = base ** (-factor * torch.arange(d // 2, dtype=F64) / d)  # (d/2,)
    angles = sign * positions.to(F64)[:, None] * theta  # (T, d/2)
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2))
    return torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)).flatten(-2)


def test_rotary_checker_accepts_the_complex_solution(capsys):
    assert check_rotary_embedding(_reader_rope) is True
    assert capsys.readouterr().out.startswith("✓ check_rotary_embedding: all 6 cases pass")


@pytest.mark.parametrize(
    ("wrong", "hint"),
    [
        (lambda x, p, base=10000.0: rotary_embedding(x, p, base, layout="half"), "half layout"),
        (lambda x, p, base=10000.0: _reader_rope(x, p, base, sign=-1.0), "clockwise"),
        (lambda x, p, base=10000.0: _reader_rope(x, p, base, factor=1.0), "factor 2"),
    ],
)
def test_rotary_checker_names_common_mistakes(capsys, wrong, hint):
    assert check_rotary_embedding(wrong) is False
    out = capsys.readouterr().out
    assert "✗ check_rotary_embedding: case" in out and "hint: " in out and hint in out


def test_rotary_checker_catches_a_forgotten_base(capsys):
    def ignores_base(x, positions, base=10000.0):
        return _reader_rope(x, positions)

    assert check_rotary_embedding(ignores_base) is False
    assert "case 5 (base = 500)" in capsys.readouterr().out


# --- MultiHeadAttention(rope=True) and the KV cache ------------------------------


def rope_layer(num_kv_heads: int, d_model: int = 32, num_heads: int = 4, base=10000.0):
    torch.manual_seed(num_kv_heads)
    layer = MultiHeadAttention(
        d_model, num_heads, num_kv_heads=num_kv_heads, rope=True, rope_base=base
    )
    return layer.to(F64).eval()


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
def test_rope_layer_equals_sdpa_on_rotated_queries_and_keys(num_kv_heads):
    layer = rope_layer(num_kv_heads, base=500.0)
    x = randn(2, 9, 32)  # (B, T, d_model)
    with torch.no_grad():
        output, _ = layer(x, causal=True)
        q = layer.split_heads(layer.q_proj(x))  # (B, h, T, d_k)
        k = layer.split_heads(layer.k_proj(x), num_kv_heads)  # (B, h_kv, T, d_k)
        v = layer.split_heads(layer.v_proj(x), num_kv_heads)  # (B, h_kv, T, d_k): not rotated
        q, k = (rotary_embedding(t, base=500.0, layout="half") for t in (q, k))
        context = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=True, enable_gqa=True
        )
        expected = layer.out_proj(layer.merge_heads(context))
    torch.testing.assert_close(output, expected, atol=1e-12, rtol=0)


def decode(layer, x, chunks, restart=False):
    """Feed ``x (B, T, d_model)`` in chunks of the given sizes through one cache."""
    cache, outputs, start = KVCache(), [], 0
    with torch.no_grad():
        for size in chunks:
            outputs.append(layer(x[:, start : start + size], causal=True, cache=cache)[0])
            start += size
            if restart:
                cache.position = 0  # the classic bug: every call starts again at 0
    return torch.cat(outputs, dim=1), cache


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
@pytest.mark.parametrize(
    "chunks", [[1] * 20, [5] + [1] * 15, [5, 3, 1, 4, 7]], ids=["tokens", "prefill", "chunks"]
)
def test_cached_decoding_with_rope_equals_one_causal_pass(num_kv_heads, chunks):
    layer = rope_layer(num_kv_heads)
    x = randn(2, 20, 32, seed=num_kv_heads)  # (B, T, d_model)
    with torch.no_grad():
        full, _ = layer(x, causal=True)
    decoded, cache = decode(layer, x, chunks)
    assert (decoded - full).abs().max() < 1e-10
    assert cache.position == len(cache) == 20


@pytest.mark.parametrize("num_kv_heads", [4, 2, 1])
@pytest.mark.parametrize("chunks", [[1] * 20, [5] + [1] * 15], ids=["tokens", "prefill"])
def test_a_cache_whose_positions_restart_at_zero_fails_the_same_check(num_kv_heads, chunks):
    layer = rope_layer(num_kv_heads)
    x = randn(2, 20, 32, seed=num_kv_heads)
    with torch.no_grad():
        full, _ = layer(x, causal=True)
    decoded, _ = decode(layer, x, chunks, restart=True)
    error = (decoded - full).abs().amax(dim=(0, 2))  # (T,)
    first = chunks[0]
    assert error[:first].max() < 1e-10  # the first call really starts at 0
    assert error[first:].min() > 1e-4  # every later token is wrong


def test_without_rope_the_module_is_unchanged_and_positions_still_count():
    torch.manual_seed(0)
    plain = MultiHeadAttention(16, 2).to(F64).eval()
    assert plain.rope is False
    x = randn(1, 6, 16)
    with torch.no_grad():
        expected = torch.nn.functional.scaled_dot_product_attention(
            *(plain.split_heads(p(x)) for p in (plain.q_proj, plain.k_proj, plain.v_proj))
        )
        output, _ = plain(x)
    torch.testing.assert_close(output, plain.out_proj(plain.merge_heads(expected)))
    decoded, cache = decode(plain, x, [2, 1, 3])
    assert cache.position == 6


def test_cache_position_counts_appends_and_resets():
    cache = KVCache()
    assert cache.position == 0
    cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    cache.append(torch.zeros(1, 2, 2, 4), torch.zeros(1, 2, 2, 4))
    assert cache.position == len(cache) == 5
    with pytest.raises(ValueError):
        cache.append(torch.zeros(1, 3, 1, 4), torch.zeros(1, 3, 1, 4))  # wrong head count
    assert cache.position == 5, "a call that raises does not count"
    cache.reset()
    assert cache.position == 0 and len(cache) == 0


def test_a_failed_rope_call_leaves_the_position_alone():
    layer = rope_layer(2)
    cache = KVCache()
    with torch.no_grad():
        layer(randn(1, 3, 32), causal=True, cache=cache)
        with pytest.raises(ValueError):
            layer(torch.full((1, 1, 32), float("nan"), dtype=F64), causal=True, cache=cache)
    assert cache.position == len(cache) == 3


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"d_model": 6, "num_heads": 2, "rope": True}, ValueError, "even head_dim"),
        ({"d_model": 8, "num_heads": 2, "rope": 1}, TypeError, "rope must be a bool"),
        ({"d_model": 8, "num_heads": 2, "rope": True, "rope_base": 0.0}, ValueError, "rope_base"),
        ({"d_model": 8, "num_heads": 2, "rope_base": "1e4"}, TypeError, "rope_base must be"),
    ],
)
def test_bad_rope_settings_get_a_named_error(kwargs, error, words):
    with pytest.raises(error, match=words):
        MultiHeadAttention(**kwargs)
