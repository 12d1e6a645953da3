"""Sliding-window attention (chapter 14): the band mask, and the layer and cache that use it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from selfattention import causal_mask
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
