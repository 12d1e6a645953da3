"""Bad input gets a ValueError or TypeError that names the argument and the shapes."""

import numpy as np
import pytest
import torch

from selfattention import (
    MultiHeadAttention,
    SelfAttention,
    causal_mask,
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
