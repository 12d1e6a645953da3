"""MultiHeadAttention's contract beyond the chapters (chapters 8-15).

Written against the survivors of `make mutate-package` in
`layers/multi_head.py` (docs/mutation-score.md): the messages of a result
that is not finite (which result, which inputs) and of every refusal (the
constructor's, split_heads', merge_heads', the cache's layout); the rotary
positions of a call without a cache and of cross-attention with more keys
than queries; the causal alignment without a cache; ``bias=False`` for the
key projection.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from selfattention import KVCache, MultiHeadAttention

D_MODEL, HEADS = 8, 2


def layer(**options: object) -> MultiHeadAttention:
    """A small seeded module in eval mode."""
    torch.manual_seed(0)
    return MultiHeadAttention(d_model=D_MODEL, num_heads=HEADS, **options).eval()


@pytest.mark.parametrize(
    ("part", "what"), [("k_proj", "keys"), ("v_proj", "values"), ("out_proj", "output")]
)
def test_a_result_that_overflows_is_named_and_the_cache_stays_empty(part: str, what: str) -> None:
    """With a cache, the keys and values it would store are checked before the output."""
    attention = layer()
    with torch.no_grad():
        getattr(attention, part).weight.fill_(3e38)  # finite, but its sums overflow float32
    cache = KVCache()
    with pytest.raises(
        ValueError,
        match=rf"^the attention's {what} overflows torch\.float32 although query, key and "
        r"value are finite: their projections or scores are too large for the dtype; "
        r"rescale the inputs or compute in float64$",
    ):
        attention(torch.ones(1, 3, D_MODEL), causal=True, cache=cache)
    assert len(cache) == 0 and cache.position == 0


@pytest.mark.parametrize(
    ("part", "what"), [("k_proj", "keys"), ("v_proj", "values"), ("out_proj", "output")]
)
def test_a_parameter_that_is_not_finite_is_named_with_the_result_it_spoils(
    part: str, what: str
) -> None:
    """One NaN weight: the message names the parameter, its shape and the result."""
    attention = layer(num_kv_heads=1)  # k_proj and v_proj: (4, 8), out_proj: (8, 8)
    shape = tuple(getattr(attention, part).weight.shape)
    with torch.no_grad():
        getattr(attention, part).weight[0, 0] = float("nan")
    cache = KVCache()
    with pytest.raises(
        ValueError,
        match=rf"^the module's parameter {part}\.weight \(shape \({shape[0]}, {shape[1]}\)\) "
        rf"holds NaN or inf, so the attention's {what} would too$",
    ):
        attention(torch.ones(1, 3, D_MODEL), causal=True, cache=cache)
    assert len(cache) == 0


def test_the_output_overflow_without_a_cache_names_the_three_inputs() -> None:
    """Scores too large for float32: the output is named, and query, key and value."""
    with pytest.raises(
        ValueError,
        match=r"^the attention's output overflows torch\.float32 although query, key and "
        r"value are finite",
    ):
        layer()(torch.full((1, 3, D_MODEL), 1e30))


def test_rope_without_a_cache_counts_from_zero_like_an_empty_cache() -> None:
    """No cache and an empty cache both start at position 0: the same bits."""
    attention = layer(rope=True)
    torch.manual_seed(1)
    x = torch.randn(2, 6, D_MODEL)  # (B, T, d_model)
    with torch.no_grad():
        alone, alone_weights = attention(x, causal=True)
        cached, cached_weights = attention(x, causal=True, cache=KVCache())
    assert torch.equal(alone, cached)
    assert torch.equal(alone_weights, cached_weights)


def test_rope_cross_attention_takes_more_keys_than_queries_and_features() -> None:
    """One query (position 0) over 12 keys, more than d_model: row 0 of self-attention."""
    attention = layer(rope=True)
    torch.manual_seed(1)
    x = torch.randn(1, 12, D_MODEL)  # T = 12 > d_model = 8
    with torch.no_grad():
        everyone, everyone_weights = attention(x)
        first, first_weights = attention(x[:, :1], x)
    assert first.shape == (1, 1, D_MODEL) and first_weights.shape == (1, HEADS, 1, 12)
    assert torch.allclose(first, everyone[:, :1], atol=1e-6)
    assert torch.allclose(first_weights, everyone_weights[:, :, :1], atol=1e-6)


def test_causal_cross_attention_without_a_cache_is_top_left_aligned() -> None:
    """2 queries, 4 keys, no cache: query i sees keys 0..i, like PyTorch's is_causal."""
    attention = layer()
    torch.manual_seed(1)
    query, memory = torch.randn(1, 2, D_MODEL), torch.randn(1, 4, D_MODEL)
    with torch.no_grad():
        output, weights = attention(query, memory, causal=True)
        q = attention.split_heads(attention.q_proj(query))
        k = attention.split_heads(attention.k_proj(memory))
        v = attention.split_heads(attention.v_proj(memory))
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # top-left
    seen = (weights[0] > 0).int()  # (h, T_q, T_k)
    assert seen.tolist() == [[[1, 0, 0, 0], [1, 1, 0, 0]]] * HEADS
    assert torch.allclose(output, attention.out_proj(attention.merge_heads(expected)), atol=1e-6)


def test_bias_false_leaves_every_projection_without_a_bias() -> None:
    """q_proj, k_proj, v_proj and out_proj all follow ``bias``."""
    attention = MultiHeadAttention(D_MODEL, HEADS, bias=False, num_kv_heads=1)
    projections = (attention.q_proj, attention.k_proj, attention.v_proj, attention.out_proj)
    assert [proj.bias for proj in projections] == [None] * 4


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"d_model": 0, "num_heads": 2}, ValueError, r"^d_model must be positive, got 0$"),
        ({"d_model": 8, "num_heads": 0}, ValueError, r"^num_heads must be positive, got 0$"),
        (
            {"d_model": 8, "num_heads": 2, "dropout": 1.0},
            ValueError,
            r"^dropout must be in \[0, 1\), got 1\.0$",
        ),
        (
            {"d_model": 6, "num_heads": 2, "rope": True},
            ValueError,
            r"^rope=True needs an even head_dim = d_model // num_heads \(pairs of features\), "
            r"got 6 // 2 = 3$",
        ),
    ],
)
def test_the_constructor_names_the_argument_it_refuses(
    options: dict[str, object], error: type[Exception], message: str
) -> None:
    """Each refusal names its argument and the value that came."""
    with pytest.raises(error, match=message):
        MultiHeadAttention(**options)


def test_the_odd_head_dim_check_is_exact_beyond_float_precision() -> None:
    """d_model = 2**54 + 2, two heads: head_dim 2**53 + 1 is odd, though float says even."""
    d_model = 2**54 + 2  # refused before any weight is allocated
    assert (d_model / 2) % 2 == 0  # the float quotient rounds to 2**53
    with pytest.raises(ValueError, match=rf"got {d_model} // 2 = {2**53 + 1}$"):
        MultiHeadAttention(d_model, 2, rope=True)


def test_split_heads_names_x_and_num_heads() -> None:
    """split_heads' refusals name its own arguments."""
    attention = layer()
    with pytest.raises(ValueError, match=r"^num_heads must be positive, got 0$"):
        attention.split_heads(torch.zeros(1, 3, D_MODEL), num_heads=0)
    with pytest.raises(ValueError, match=r"^x has feature size 6 "):
        attention.split_heads(torch.zeros(1, 3, 6))


@pytest.mark.parametrize(
    ("heads", "got"),
    [
        (torch.zeros(1, 3, 5, 4), r"\(1, 3, 5, 4\)"),  # 4-D, but 3 heads, not 2
        (torch.zeros(1, 2, 5, 3), r"\(1, 2, 5, 3\)"),  # 4-D, but head_dim 3, not 4
        (torch.zeros(1, 2, 5), r"\(1, 2, 5\)"),  # 3-D
        ("heads", r"str"),  # not a tensor
    ],
)
def test_merge_heads_refuses_any_other_layout_and_says_what_came(heads: object, got: str) -> None:
    """Only (B, num_heads, T, head_dim) merges; the message shows the shape or the type."""
    with pytest.raises(
        ValueError,
        match=r"^x must have shape \(B, num_heads, T, head_dim\) = \(B, 2, T, 4\), got "
        + got
        + "$",
    ):
        layer().merge_heads(heads)


def test_forward_names_the_value_it_refuses() -> None:
    """A value of the wrong width or with NaN is named as ``value``."""
    attention = layer()
    x = torch.zeros(1, 3, D_MODEL)
    with pytest.raises(ValueError, match=r"^value has feature size 6 but the module has"):
        attention(x, x, torch.zeros(1, 3, 6))
    with pytest.raises(ValueError, match=r"^value contains NaN \(shape \(1, 3, 8\)\); value must"):
        attention(x, x, torch.full((1, 3, D_MODEL), float("nan")))


def test_a_window_without_causal_says_what_to_do() -> None:
    """The whole message: the window, what it means, and the fix."""
    with pytest.raises(
        ValueError,
        match=r"^this module has window=2, a sliding window over earlier tokens: "
        r"call it with causal=True$",
    ):
        layer(window=2)(torch.zeros(1, 3, D_MODEL))


@pytest.mark.parametrize(
    ("keys", "values", "slot", "shape"),
    [
        ((1, 1, 3, 4), (1, 1, 3, 4), "keys", r"\(1, 1, 3, 4\)"),  # one head, not two
        ((1, 2, 3, 2), (1, 2, 3, 4), "keys", r"\(1, 2, 3, 2\)"),  # head_dim 2, not 4
        ((1, 2, 3, 4), (1, 2, 3, 6), "values", r"\(1, 2, 3, 6\)"),  # the values' width
    ],
)
def test_a_cache_of_another_layer_is_refused_with_its_layout(
    keys: tuple[int, ...], values: tuple[int, ...], slot: str, shape: str
) -> None:
    """The message names the slot (keys or values) and the labels num_kv_heads, head_dim."""
    cache = KVCache()
    cache.append(torch.zeros(keys), torch.zeros(values))
    with pytest.raises(
        ValueError,
        match=rf"^cache holds {slot} of shape {shape}, but this call needs "
        r"\(B, num_kv_heads, T, head_dim\) = \(1, 2, T, 4\); use one KVCache per layer "
        r"and per batch$",
    ):
        layer()(torch.zeros(1, 1, D_MODEL), cache=cache)
    assert len(cache) == 3
