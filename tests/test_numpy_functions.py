"""The numpy functions against PyTorch's own implementations, in float64."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from selfattention import (
    causal_mask,
    cosine_similarity,
    scaled_dot_product_attention,
    sinusoidal_positional_encoding,
    softmax,
)

ATOL = 1e-12


def t(array):
    return torch.from_numpy(np.ascontiguousarray(array))


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# --- softmax -----------------------------------------------------------------


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_matches_torch(rng, axis):
    x = rng.normal(scale=5.0, size=(3, 4, 5))
    np.testing.assert_allclose(
        softmax(x, axis=axis), torch.softmax(t(x), dim=axis).numpy(), atol=ATOL
    )


def test_softmax_with_mask_matches_torch_masked_fill(rng):
    x = rng.normal(size=(4, 6))
    mask = rng.random((4, 6)) > 0.3
    mask[:, 0] = True
    expected = torch.softmax(t(x).masked_fill(~t(mask), float("-inf")), dim=-1).numpy()
    np.testing.assert_allclose(softmax(x, mask=mask), expected, atol=ATOL)


def test_softmax_fully_masked_row_is_zero_not_nan():
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = np.array([[True, False, True], [False, False, False]])
    weights = softmax(x, mask=mask)
    assert np.all(np.isfinite(weights))
    np.testing.assert_array_equal(weights[1], 0.0)
    assert weights[0, 1] == 0.0
    np.testing.assert_allclose(weights[0].sum(), 1.0)


def test_softmax_broadcast_mask():
    x = np.zeros((2, 3, 4))
    mask = np.array([True, True, False, False])  # broadcasts over (2, 3)
    weights = softmax(x, mask=mask)
    np.testing.assert_allclose(weights[..., :2], 0.5)
    np.testing.assert_array_equal(weights[..., 2:], 0.0)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_softmax_keeps_dtype_and_stays_finite_on_huge_inputs(dtype):
    big = np.finfo(dtype).max
    x = np.array([[big, big / 2, -big], [0.0, 1.0, 2.0]], dtype=dtype)
    weights = softmax(x)
    assert weights.dtype == dtype
    assert np.all(np.isfinite(weights))
    np.testing.assert_allclose(weights.astype(np.float64).sum(axis=-1), 1.0, atol=1e-3)
    assert weights[0, 0] == 1


def test_softmax_integers_become_float64():
    assert softmax(np.array([1, 2, 3])).dtype == np.float64


def test_softmax_minus_inf_entries_get_zero_weight():
    weights = softmax(np.array([0.0, -np.inf, 0.0]))
    np.testing.assert_allclose(weights, [0.5, 0.0, 0.5])
    np.testing.assert_array_equal(softmax(np.array([-np.inf, -np.inf])), [0.0, 0.0])


# --- cosine similarity -------------------------------------------------------


def test_cosine_similarity_matches_torch_pairwise(rng):
    a = rng.normal(size=(2, 4, 6))
    b = rng.normal(size=(2, 5, 6))
    expected = F.cosine_similarity(t(a)[:, :, None, :], t(b)[:, None, :, :], dim=-1).numpy()
    got = cosine_similarity(a, b)
    assert got.shape == (2, 4, 5)
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_cosine_similarity_broadcasts_leading_dims(rng):
    a = rng.normal(size=(3, 2, 4))
    b = rng.normal(size=(5, 4))
    got = cosine_similarity(a, b)
    assert got.shape == (3, 2, 5)
    np.testing.assert_allclose(got[1], cosine_similarity(a[1], b))


def test_cosine_similarity_zero_vector_gives_zero():
    got = cosine_similarity(np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[1.0, 1.0], [0.0, 0.0]]))
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, [[0.0, 0.0], [np.sqrt(0.5), 0.0]])


def test_cosine_similarity_range_and_scale_invariance(rng):
    a = rng.normal(size=(6, 3))
    got = cosine_similarity(a, 1000.0 * a)
    np.testing.assert_allclose(np.diag(got), 1.0)
    assert np.all(np.abs(got) <= 1.0)


# --- positional encoding ------------------------------------------------------


def test_sinusoidal_encoding_formula():
    pe = sinusoidal_positional_encoding(50, 16)
    assert pe.shape == (50, 16)
    pos, i = 7, 3
    angle = pos / 10000.0 ** (2 * i / 16)
    assert pe[pos, 2 * i] == pytest.approx(np.sin(angle))
    assert pe[pos, 2 * i + 1] == pytest.approx(np.cos(angle))
    np.testing.assert_allclose(pe[0, 0::2], 0.0)
    np.testing.assert_allclose(pe[0, 1::2], 1.0)


def test_sinusoidal_encoding_custom_base_and_zero_length():
    pe = sinusoidal_positional_encoding(3, 4, base=100.0)
    assert pe[2, 2] == pytest.approx(np.sin(2 / 100.0 ** (2 / 4)))
    assert sinusoidal_positional_encoding(0, 8).shape == (0, 8)


# --- causal mask ----------------------------------------------------------------


def test_causal_mask_is_lower_triangular_boolean():
    mask = causal_mask(4)
    assert mask.dtype == bool and mask.shape == (4, 4)
    np.testing.assert_array_equal(mask, np.tril(np.ones((4, 4), dtype=bool)))
    expected = ~torch.ones(4, 4, dtype=torch.bool).triu(1)
    np.testing.assert_array_equal(mask, expected.numpy())


# --- scaled dot-product attention ---------------------------------------------


def torch_sdpa(q, k, v, mask=None, causal=False, scale=None):
    return F.scaled_dot_product_attention(
        t(q),
        t(k),
        t(v),
        attn_mask=None if mask is None else t(mask),
        is_causal=causal,
        scale=scale,
    ).numpy()


def test_sdpa_matches_torch_plain(rng):
    q, k, v = (
        rng.normal(size=(2, 3, 5, 8)),
        rng.normal(size=(2, 3, 5, 8)),
        rng.normal(size=(2, 3, 5, 4)),
    )
    output, weights = scaled_dot_product_attention(q, k, v)
    assert output.shape == (2, 3, 5, 4) and weights.shape == (2, 3, 5, 5)
    np.testing.assert_allclose(output, torch_sdpa(q, k, v), atol=ATOL)
    np.testing.assert_allclose(weights.sum(-1), 1.0)


def test_sdpa_matches_torch_with_tq_not_tk_and_scale(rng):
    q, k, v = rng.normal(size=(3, 8)), rng.normal(size=(7, 8)), rng.normal(size=(7, 2))
    output, weights = scaled_dot_product_attention(q, k, v, scale=0.3)
    assert output.shape == (3, 2) and weights.shape == (3, 7)
    np.testing.assert_allclose(output, torch_sdpa(q, k, v, scale=0.3), atol=ATOL)


def test_sdpa_matches_torch_with_boolean_mask(rng):
    q, k, v = rng.normal(size=(2, 4, 6)), rng.normal(size=(2, 5, 6)), rng.normal(size=(2, 5, 3))
    mask = rng.random((2, 4, 5)) > 0.4
    mask[..., 0] = True  # torch returns NaN for fully masked rows; keep every row alive here
    output, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_allclose(output, torch_sdpa(q, k, v, mask=mask), atol=ATOL)
    assert np.all(weights[~mask] == 0.0)


@pytest.mark.parametrize("t_q,t_k", [(5, 5), (3, 6), (6, 3)])
def test_sdpa_matches_torch_causal(rng, t_q, t_k):
    q, k, v = (
        rng.normal(size=(2, t_q, 4)),
        rng.normal(size=(2, t_k, 4)),
        rng.normal(size=(2, t_k, 4)),
    )
    output, weights = scaled_dot_product_attention(q, k, v, causal=True)
    np.testing.assert_allclose(output, torch_sdpa(q, k, v, causal=True), atol=ATOL)
    assert np.all(
        weights[..., np.triu_indices(t_q, 1, t_k)[0], np.triu_indices(t_q, 1, t_k)[1]] == 0
    )


def test_sdpa_causal_combines_with_mask(rng):
    q = k = v = rng.normal(size=(4, 3))
    padding = np.array([True, True, True, False])
    output, weights = scaled_dot_product_attention(q, k, v, mask=padding, causal=True)
    combined = np.tril(np.ones((4, 4), dtype=bool)) & padding
    np.testing.assert_allclose(output, torch_sdpa(q, k, v, mask=combined), atol=ATOL)
    assert weights[3, 3] == 0.0 and weights[0, 1] == 0.0


def test_sdpa_broadcasts_leading_dims(rng):
    q = rng.normal(size=(2, 1, 3, 4))
    k = rng.normal(size=(1, 5, 6, 4))
    v = rng.normal(size=(6, 2))
    output, weights = scaled_dot_product_attention(q, k, v)
    assert output.shape == (2, 5, 3, 2) and weights.shape == (2, 5, 3, 6)
    expected = torch_sdpa(
        np.broadcast_to(q, (2, 5, 3, 4)),
        np.broadcast_to(k, (2, 5, 6, 4)),
        np.broadcast_to(v, (2, 5, 6, 2)),
    )
    np.testing.assert_allclose(output, expected, atol=ATOL)


def test_sdpa_fully_masked_query_gets_zero_output(rng):
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 2))
    mask = np.array([[True, True, True], [False, False, False], [True, False, False]])
    output, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert np.all(np.isfinite(output)) and np.all(np.isfinite(weights))
    np.testing.assert_array_equal(weights[1], 0.0)
    np.testing.assert_array_equal(output[1], 0.0)
    np.testing.assert_allclose(output[2], v[0])


def test_sdpa_default_scale_is_inverse_sqrt_dk(rng):
    q, k, v = rng.normal(size=(2, 36)), rng.normal(size=(3, 36)), rng.normal(size=(3, 1))
    _, weights = scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(weights, softmax(q @ k.T / 6.0))
