"""Bad input gets a ValueError or TypeError that names the argument and the shapes."""

import numpy as np
import pytest
import torch

from selfattention import (
    KVCache,
    MultiHeadAttention,
    SelfAttention,
    causal_mask,
    chunked_attention,
    cosine_similarity,
    scaled_dot_product_attention,
    sinusoidal_positional_encoding,
    softmax,
)

Q = np.zeros((2, 3, 4))
K = np.zeros((2, 5, 4))
V = np.zeros((2, 5, 6))


@pytest.mark.parametrize(
    "kwargs,error,pattern",
    [
        (
            dict(query=np.zeros((2, 3, 4)), key=np.zeros((2, 5, 3)), value=V),
            ValueError,
            r"query and key must share the feature size d_k: "
            r"query has shape \(2, 3, 4\), key has shape \(2, 5, 3\)",
        ),
        (
            dict(query=Q, key=K, value=np.zeros((2, 4, 6))),
            ValueError,
            r"key and value must have the same length Tk: "
            r"key has shape \(2, 5, 4\), value has shape \(2, 4, 6\)",
        ),
        (
            dict(query=np.zeros(4), key=K, value=V),
            ValueError,
            r"query must have at least 2 dimensions, got shape \(4,\)",
        ),
        (
            dict(query=Q, key=np.zeros(4), value=V),
            ValueError,
            r"key must have at least 2 dimensions, got shape \(4,\)",
        ),
        (
            dict(query=Q, key=K, value=np.zeros(5)),
            ValueError,
            r"value must have at least 2 dimensions",
        ),
        (
            dict(query=np.zeros((3, 3, 4)), key=K, value=V),
            ValueError,
            r"do not broadcast: query batch dims of \(3,\), key batch dims of \(2,\)",
        ),
        (
            dict(query=Q, key=K, value=V, mask=np.ones((2, 3, 5))),
            TypeError,
            r"mask must be boolean .* got dtype float64",
        ),
        (
            dict(query=Q, key=K, value=V, mask=np.ones((3, 4), dtype=bool)),
            ValueError,
            r"mask of shape \(3, 4\) does not broadcast to the score shape \(2, 3, 5\)",
        ),
        (
            dict(query=Q, key=K, value=V, mask=np.ones((4, 2, 3, 5), dtype=bool)),
            ValueError,
            r"mask of shape \(4, 2, 3, 5\) does not broadcast to the score shape \(2, 3, 5\)",
        ),
        (
            dict(query=np.array([["a"]]), key=K, value=V),
            TypeError,
            r"query must hold real numbers",
        ),
        (
            dict(query=np.full((2, 3, 4), np.nan), key=K, value=V),
            ValueError,
            r"query contains NaN",
        ),
        (
            dict(query=np.full((2, 3, 4), np.inf), key=K, value=V),
            ValueError,
            r"query must be finite",
        ),
        (dict(query=Q, key=K, value=V, scale=float("inf")), ValueError, r"scale must be finite"),
    ],
)
def test_sdpa_bad_inputs(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        scaled_dot_product_attention(**kwargs)


def test_softmax_bad_inputs():
    with pytest.raises(TypeError, match=r"mask must be boolean .* got dtype int64"):
        softmax(np.zeros((2, 3)), mask=np.ones((2, 3), dtype=np.int64))
    with pytest.raises(
        ValueError, match=r"mask of shape \(4,\) does not broadcast to the score shape \(2, 3\)"
    ):
        softmax(np.zeros((2, 3)), mask=np.ones(4, dtype=bool))
    with pytest.raises(ValueError, match=r"x contains NaN \(shape \(2,\)\)"):
        softmax(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match=r"\+inf"):
        softmax(np.array([1.0, np.inf]))
    with pytest.raises(ValueError, match=r"axis 2 is out of range for x of shape \(2, 3\)"):
        softmax(np.zeros((2, 3)), axis=2)
    with pytest.raises(TypeError, match=r"x must hold real numbers, got dtype bool"):
        softmax(np.array([True, False]))
    with pytest.raises(TypeError, match=r"x must hold real numbers, got dtype complex128"):
        softmax(np.array([1j]))
    with pytest.raises(ValueError, match="scalar"):
        softmax(3.0)


def test_cosine_similarity_bad_inputs():
    with pytest.raises(
        ValueError, match=r"same feature size d: a has shape \(2, 3\), b has shape \(2, 4\)"
    ):
        cosine_similarity(np.ones((2, 3)), np.ones((2, 4)))
    with pytest.raises(ValueError, match=r"a must have at least 2 dimensions, got shape \(3,\)"):
        cosine_similarity(np.ones(3), np.ones((2, 3)))
    with pytest.raises(
        ValueError, match=r"do not broadcast: a batch dims of \(2,\), b batch dims of \(3,\)"
    ):
        cosine_similarity(np.ones((2, 4, 3)), np.ones((3, 4, 3)))
    with pytest.raises(ValueError, match="eps must be positive"):
        cosine_similarity(np.ones((2, 3)), np.ones((2, 3)), eps=0.0)


def test_positional_encoding_bad_inputs():
    with pytest.raises(ValueError, match="d_model must be even, got 7|d_model must be even"):
        sinusoidal_positional_encoding(4, 7)
    with pytest.raises(ValueError, match="length must be non-negative, got -1"):
        sinusoidal_positional_encoding(-1, 8)
    with pytest.raises(TypeError, match="length must be an int, got float"):
        sinusoidal_positional_encoding(3.0, 8)
    with pytest.raises(ValueError, match="base must be"):
        sinusoidal_positional_encoding(3, 8, base=1.0)
    with pytest.raises(ValueError, match="length must be non-negative"):
        causal_mask(-2)


def test_self_attention_bad_inputs():
    module = SelfAttention(8)
    with pytest.raises(
        ValueError,
        match=r"x has feature size 6 but the module has d_model=8 \(x shape \(2, 3, 6\)\)",
    ):
        module(torch.zeros(2, 3, 6))
    with pytest.raises(
        ValueError, match=r"x must have shape \(B, T, d_model\) or \(T, d_model\), got \(8,\)"
    ):
        module(torch.zeros(8))
    with pytest.raises(
        TypeError, match="x must be a floating-point tensor, got dtype torch.int64"
    ):
        module(torch.zeros(2, 3, 8, dtype=torch.long))
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got ndarray"):
        module(np.zeros((2, 3, 8)))
    with pytest.raises(TypeError, match="mask must be boolean .* got dtype torch.float32"):
        module(torch.zeros(2, 3, 8), mask=torch.ones(3, 3))
    with pytest.raises(
        ValueError,
        match=r"mask of shape \(4, 4\) does not broadcast to the score shape \(2, 3, 3\)",
    ):
        module(torch.zeros(2, 3, 8), mask=torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="d_model must be positive, got 0"):
        SelfAttention(0)


def test_multi_head_bad_inputs():
    with pytest.raises(ValueError, match="d_model=10 is not divisible by num_heads=3"):
        MultiHeadAttention(10, 3)
    module = MultiHeadAttention(8, 2)
    with pytest.raises(
        ValueError,
        match=r"query has feature size 6 but the module has d_model=8 \(query shape \(1, 3, 6\)\)",
    ):
        module(torch.zeros(1, 3, 6))
    with pytest.raises(ValueError, match=r"key has feature size 4 .*key shape \(1, 3, 4\)"):
        module(torch.zeros(1, 3, 8), torch.zeros(1, 3, 4), torch.zeros(1, 3, 8))
    with pytest.raises(
        ValueError,
        match=r"key and value must have the same batch size and length: "
        r"key has shape \(1, 4, 8\), value has shape \(1, 5, 8\)",
    ):
        module(torch.zeros(1, 3, 8), torch.zeros(1, 4, 8), torch.zeros(1, 5, 8))
    with pytest.raises(ValueError, match=r"query must have shape \(B, T, d_model\), got \(3, 8\)"):
        module(torch.zeros(3, 8))
    with pytest.raises(ValueError, match=r"query and key must have the same batch size"):
        module(torch.zeros(2, 3, 8), torch.zeros(1, 3, 8))
    with pytest.raises(TypeError, match="mask must be boolean"):
        module(torch.zeros(1, 3, 8), mask=torch.zeros(3, 3, dtype=torch.long))
    with pytest.raises(
        ValueError,
        match=r"mask of shape \(3, 2\) does not broadcast to the score shape \(1, 2, 3, 3\)",
    ):
        module(torch.zeros(1, 3, 8), mask=torch.ones(3, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="dropout must be in"):
        MultiHeadAttention(8, 2, dropout=1.5)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_no_silent_nan_on_large_scores(dtype):
    big = np.full((1, 3, 4), 100.0, dtype=dtype)
    try:
        output, weights = scaled_dot_product_attention(big, big, big)
    except ValueError as exc:  # overflow to inf must be reported, never hidden as NaN
        assert "finite" in str(exc) or "inf" in str(exc)
    else:
        assert np.all(np.isfinite(output)) and np.all(np.isfinite(weights))


# --- One policy everywhere (issue 18) -------------------------------------------------


@pytest.mark.parametrize(
    "call,pattern",
    [
        (
            lambda: scaled_dot_product_attention(Q, K, V, causal=1),
            "causal must be a bool, got int 1",
        ),
        (lambda: SelfAttention(4)(torch.zeros(2, 4), causal="yes"), "causal must be a bool"),
        (
            lambda: MultiHeadAttention(8, 2)(torch.zeros(1, 2, 8), causal=1),
            "causal must be a bool",
        ),
        (lambda: MultiHeadAttention(8, 2, bias="yes"), "bias must be a bool, got str 'yes'"),
        (lambda: SelfAttention(4, bias=1), "bias must be a bool, got int 1"),
        (lambda: MultiHeadAttention(8, 2, dropout="0.1"), "dropout must be a real number"),
        (lambda: cosine_similarity(np.ones((1, 2)), np.ones((1, 2)), eps="1e-8"), "eps must be"),
        (lambda: sinusoidal_positional_encoding(3, 4, base="1e4"), "base must be a real number"),
        (lambda: scaled_dot_product_attention(Q, K, V, scale="0.5"), "scale must be a float"),
        (lambda: softmax(np.zeros(3), axis=1.0), "axis must be an int, got float 1.0"),
    ],
)
def test_flags_and_numbers_are_checked_for_type_by_name(call, pattern):
    with pytest.raises(TypeError, match=pattern):
        call()


def test_modules_name_dtype_and_device_mismatches():
    module = MultiHeadAttention(8, 2)  # float32 parameters on the CPU
    x64 = torch.zeros(1, 3, 8, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"query has dtype torch.float64, the module's param"):
        module(x64)
    with pytest.raises(TypeError, match=r"x has dtype torch.float64, the module's param"):
        SelfAttention(8)(x64)
    with pytest.raises(ValueError, match=r"query is on the meta device"):
        module(torch.zeros(1, 3, 8, device="meta"))
    meta_module = MultiHeadAttention(8, 2).to("meta")
    with pytest.raises(
        ValueError, match=r"query is on device cpu, the module's parameters on meta"
    ):
        meta_module(torch.zeros(1, 3, 8))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_input_raises_in_every_function(bad):
    """The one non-finite policy: NaN or inf in, a ValueError naming the argument out."""
    t = torch.zeros(1, 3, 8)
    t[0, 1, 2] = bad
    a = np.zeros((1, 3, 4))
    a[0, 1, 2] = bad
    word = "NaN" if bad != bad else "inf"
    calls = {
        "query": lambda: MultiHeadAttention(8, 2)(t),
        "x": lambda: SelfAttention(8)(t),
        "key": lambda: KVCache().append(t[None], t[None]),
        "value": lambda: chunked_attention(torch.zeros(1, 3, 8), torch.zeros(1, 3, 8), t),
        "query ": lambda: scaled_dot_product_attention(a, a, a),
        "a": lambda: cosine_similarity(a, a),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=rf"{name.strip()} contains {word}"):
            call()


def test_softmax_takes_minus_inf_but_not_nan_or_plus_inf():
    np.testing.assert_array_equal(softmax(np.array([0.0, -np.inf])), [1.0, 0.0])
    with pytest.raises(ValueError, match=r"x contains \+inf .*-inf means blocked"):
        softmax(np.array([0.0, np.inf]))
    with pytest.raises(ValueError, match=r"x contains NaN"):
        softmax(np.array([np.nan, -np.inf]))


def test_fully_masked_rows_give_zeros_not_nan_everywhere():
    """Refusing NaN input must not turn the package's zero rows into errors."""
    keep = np.array([[True, True], [False, False]])  # query 1 may attend to nothing
    out, weights = scaled_dot_product_attention(
        np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 3)), mask=keep
    )
    assert np.all(weights[1] == 0) and np.all(out[1] == 0)
    _, weights = SelfAttention(3)(torch.randn(2, 3), mask=keep)
    assert torch.all(weights[1] == 0)
    _, weights = MultiHeadAttention(4, 2)(torch.randn(1, 2, 4), mask=keep)
    assert torch.all(weights[0, :, 1] == 0)
    assert np.all(softmax(np.ones(2), mask=np.array([False, False])) == 0)
    empty = chunked_attention(torch.ones(1, 2, 4), torch.ones(1, 0, 4), torch.ones(1, 0, 3))
    assert torch.all(empty == 0)


def test_numpy_consumers_take_torch_masks_and_torch_consumers_take_numpy_masks():
    keep = causal_mask(3)  # numpy (3, 3)
    q = np.random.default_rng(0).normal(size=(3, 4))
    from_numpy, _ = scaled_dot_product_attention(q, q, q, mask=keep)
    from_torch, _ = scaled_dot_product_attention(q, q, q, mask=torch.from_numpy(keep))
    np.testing.assert_array_equal(from_numpy, from_torch)
    module = SelfAttention(4)
    x = torch.randn(3, 4)
    torch.testing.assert_close(module(x, mask=keep)[0], module(x, causal=True)[0], rtol=0, atol=0)
