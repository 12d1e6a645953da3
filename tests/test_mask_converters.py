"""The mask converters of ``selfattention.masks`` against the PyTorch functions
that consume the converted masks (chapter 10's "Rosetta stone")."""

import doctest

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention.bias import causal_lower_right, causal_upper_left

import selfattention.masks as masks_module
from selfattention import (
    MultiHeadAttention,
    causal_mask,
    from_additive,
    from_attention_mask,
    padding_mask,
    to_additive,
    to_key_padding_mask,
    to_mha_attn_mask,
)

ATOL = 1e-10
B, H, T, D = 3, 4, 5, 8


# float64 at tight tolerance, seeded (the fixture lives in conftest.py).
pytestmark = pytest.mark.usefixtures("float64_and_seed")


@pytest.fixture
def modules():
    """A torch nn.MultiheadAttention and this package's copy of it, in eval mode."""
    reference = nn.MultiheadAttention(D, H, batch_first=True).eval()
    return reference, MultiHeadAttention.from_torch(reference).eval()


def random_keep(*shape):
    """A random boolean mask in which every query row keeps at least key 0."""
    keep = torch.rand(*shape) < 0.6
    keep[..., 0] = True
    return keep


def test_doctests_of_the_masks_module():
    result = doctest.testmod(masks_module)
    assert result.failed == 0 and result.attempted >= 11


# to_additive / from_additive


def test_additive_mask_in_sdpa_equals_the_boolean_mask():
    q, k, v = torch.randn(B, H, T, D), torch.randn(B, H, 7, D), torch.randn(B, H, 7, D)
    keep = random_keep(B, 1, T, 7)
    additive = to_additive(keep, dtype=q.dtype)
    assert additive.dtype == torch.float64 and additive.shape == keep.shape
    assert torch.all(additive[keep] == 0) and torch.all(additive[~keep] == float("-inf"))
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    got = F.scaled_dot_product_attention(q, k, v, attn_mask=additive)
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)
    # The inverted mask is a different attention: the test can fail.
    inverted = ~keep
    inverted[..., 1] = True  # keep one key per row so the result has no NaN
    wrong = F.scaled_dot_product_attention(q, k, v, attn_mask=to_additive(inverted, q.dtype))
    assert not torch.allclose(wrong, expected)


def test_additive_mask_in_nn_multiheadattention_equals_ours(modules):
    reference, ours = modules
    x = torch.randn(B, T, D)
    keep = random_keep(T, T)
    expected, _ = ours(x, mask=keep)
    got, _ = reference(x, x, x, attn_mask=to_additive(keep, dtype=x.dtype))
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)


def test_to_additive_numpy_in_numpy_out_and_dtypes():
    keep = causal_mask(3)
    additive = to_additive(keep)
    assert isinstance(additive, np.ndarray) and additive.dtype == np.float32
    assert np.array_equal(additive == 0, keep) and np.all(np.isneginf(additive[~keep]))
    assert to_additive(keep, np.float64).dtype == np.float64
    assert to_additive(torch.from_numpy(keep)).dtype == torch.float32
    assert to_additive(torch.from_numpy(keep), torch.float16).dtype == torch.float16


@pytest.mark.parametrize("fill", [float("-inf"), -1e9, -1e4, None])
def test_from_additive_round_trip_and_common_fills(fill):
    keep = random_keep(2, 3, 4)
    additive = to_additive(keep, torch.float32)
    if fill is None:
        fill = torch.finfo(torch.float32).min
    additive = additive.masked_fill(~keep, fill)
    assert torch.equal(from_additive(additive), keep)
    assert np.array_equal(from_additive(additive.numpy()), keep.numpy())


def test_from_additive_refuses_a_bias_nan_and_booleans():
    with pytest.raises(ValueError, match=r"neither 0 nor .*not a mask"):
        from_additive(np.array([0.0, -0.5, -np.inf]))
    with pytest.raises(ValueError, match=r"NaN .*shape \(2,\)"):
        from_additive(np.array([0.0, np.nan]))
    with pytest.raises(TypeError, match=r"additive must be a floating-point mask.*bool"):
        from_additive(torch.ones(2, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="threshold must be negative"):
        from_additive(np.zeros(2), threshold=1.0)


def test_to_additive_refuses_non_boolean_masks_and_bad_dtypes():
    with pytest.raises(TypeError, match=r"keep must be boolean.*int64 with shape \(2, 3\)"):
        to_additive(torch.ones(2, 3, dtype=torch.int64))
    with pytest.raises(TypeError, match=r"keep must be boolean.*float64 with shape \(3,\)"):
        to_additive(np.zeros(3))
    with pytest.raises(TypeError, match="dtype must be a floating torch dtype"):
        to_additive(torch.ones(2, dtype=torch.bool), torch.int32)
    with pytest.raises(TypeError, match="dtype must be a floating numpy dtype"):
        to_additive(np.ones(2, dtype=bool), np.int32)


# to_mha_attn_mask


def test_2d_attn_mask_matches_ours_and_the_unconverted_mask_does_not(modules):
    reference, ours = modules
    x = torch.randn(B, T, D)
    keep = torch.from_numpy(causal_mask(T))
    expected, expected_weights = ours(x, mask=keep)
    blocked = to_mha_attn_mask(keep)
    assert blocked.shape == (T, T) and torch.equal(blocked, ~keep)
    got, weights = reference(x, x, x, attn_mask=blocked, average_attn_weights=False)
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(weights, expected_weights, atol=ATOL, rtol=0)
    # Feeding our keep-mask unconverted blocks the wrong half: outputs differ.
    with torch.no_grad():
        wrong, _ = reference(x, x, x, attn_mask=keep)
    assert not torch.allclose(wrong, expected, equal_nan=True)


@pytest.mark.parametrize("heads_axis", ["per head", "shared", "3-D"])
def test_batched_attn_mask_matches_ours_with_the_b_times_h_layout(modules, heads_axis):
    reference, ours = modules
    x = torch.randn(B, T, D)
    if heads_axis == "per head":
        keep = random_keep(B, H, T, T)
        ours_mask = keep
    elif heads_axis == "shared":
        keep = random_keep(B, 1, T, T)
        ours_mask = keep
    else:
        keep = random_keep(B, T, T)
        ours_mask = keep[:, None]
    expected, expected_weights = ours(x, mask=ours_mask)
    blocked = to_mha_attn_mask(keep, num_heads=H)
    assert blocked.shape == (B * H, T, T) and blocked.dtype == torch.bool
    got, weights = reference(x, x, x, attn_mask=blocked, average_attn_weights=False)
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(weights, expected_weights, atol=ATOL, rtol=0)


def test_head_major_layout_would_be_wrong(modules):
    """nn.MultiheadAttention's row b * H + head is batch-major; a head-major
    reshape gives different outputs, so the layout test above can fail."""
    reference, ours = modules
    x = torch.randn(B, T, D)
    keep = random_keep(B, H, T, T)
    expected, _ = ours(x, mask=keep)
    head_major = (~keep).transpose(0, 1).reshape(B * H, T, T)
    wrong, _ = reference(x, x, x, attn_mask=head_major)
    assert not torch.allclose(wrong, expected)


def test_one_query_mask_for_a_decoding_step(modules):
    reference, ours = modules
    real = padding_mask(torch.tensor([5, 2, 4]))  # (B, T_k)
    query, memory = torch.randn(B, 1, D), torch.randn(B, T, D)
    keep = real[:, None, None, :]  # (B, 1, 1, T_k), T_q = 1
    expected, _ = ours(query, memory, mask=keep)
    blocked = to_mha_attn_mask(keep, num_heads=H)
    assert blocked.shape == (B * H, 1, T)
    got, _ = reference(query, memory, memory, attn_mask=blocked)
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)


def test_to_mha_attn_mask_numpy_and_errors():
    keep = np.ones((2, 1, 3, 4), dtype=bool)
    keep[0, 0, :, 3] = False
    blocked = to_mha_attn_mask(keep, num_heads=2)
    assert isinstance(blocked, np.ndarray) and blocked.shape == (4, 3, 4)
    assert blocked[0:2, :, 3].all() and not blocked[2:].any()
    with pytest.raises(ValueError, match=r"num_heads is required .*\(2, 1, 3, 4\)"):
        to_mha_attn_mask(keep)
    with pytest.raises(ValueError, match=r"has 3 heads on axis 1; expected 1 or num_heads=2"):
        to_mha_attn_mask(np.ones((2, 3, 3, 4), dtype=bool), num_heads=2)
    with pytest.raises(ValueError, match=r"keep must have shape .* got \(4,\)"):
        to_mha_attn_mask(np.ones(4, dtype=bool))
    with pytest.raises(TypeError, match=r"keep must be boolean.*int64"):
        to_mha_attn_mask(torch.ones(3, 3, dtype=torch.int64))
    with pytest.raises(TypeError, match="num_heads must be an int"):
        to_mha_attn_mask(keep, num_heads=2.0)


# to_key_padding_mask


@pytest.mark.parametrize("form", ["(B, T_k)", "(B, 1, 1, T_k)"])
def test_key_padding_mask_matches_ours(modules, form):
    reference, ours = modules
    lengths = torch.tensor([5, 2, 4])
    real = padding_mask(lengths)  # (B, T), True = real token
    x = torch.randn(B, T, D)
    expected, expected_weights = ours(x, mask=real[:, None, None, :])
    keep = real if form == "(B, T_k)" else real[:, None, None, :]
    kpm = to_key_padding_mask(keep)
    assert kpm.shape == (B, T) and torch.equal(kpm, ~real)
    got, weights = reference(x, x, x, key_padding_mask=kpm, average_attn_weights=False)
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(weights, expected_weights, atol=ATOL, rtol=0)
    assert torch.all(weights[1, :, :, 2:] == 0)
    # Unconverted (True = real read as True = padding): different outputs.
    wrong, _ = reference(x, x, x, key_padding_mask=real)
    assert not torch.allclose(wrong, expected, equal_nan=True)


def test_key_padding_mask_combined_with_a_causal_attn_mask(modules):
    reference, ours = modules
    real = padding_mask(torch.tensor([5, 3, 1]))
    causal = torch.from_numpy(causal_mask(T))
    x = torch.randn(B, T, D)
    expected, _ = ours(x, mask=real[:, None, None, :] & causal)
    got, _ = reference(
        x, x, x, key_padding_mask=to_key_padding_mask(real), attn_mask=to_mha_attn_mask(causal)
    )
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)


def test_to_key_padding_mask_errors():
    with pytest.raises(TypeError, match="from_attention_mask first"):
        to_key_padding_mask(torch.tensor([[1, 1, 0]]))
    with pytest.raises(
        ValueError, match=r"keep must have shape \(B, T_k\) or \(B, 1, 1, T_k\), got \(2, 1, 3\)"
    ):
        to_key_padding_mask(np.ones((2, 1, 3), dtype=bool))
    assert isinstance(to_key_padding_mask(np.ones((2, 3), dtype=bool)), np.ndarray)


# from_attention_mask


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.float32])
def test_tokenizer_attention_mask_in_sdpa_and_ours(modules, dtype):
    _, ours = modules
    attention_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0]]).to(dtype)
    keep = from_attention_mask(attention_mask)
    assert keep.shape == (B, 1, 1, T) and keep.dtype == torch.bool
    assert torch.equal(keep[:, 0, 0], attention_mask != 0)
    x = torch.randn(B, T, D)
    expected, weights = ours(x, mask=keep)
    assert torch.all(weights[1, :, :, 2:] == 0) and torch.all(weights[2, :, :, 4] == 0)
    q = ours.split_heads(ours.q_proj(x))
    k = ours.split_heads(ours.k_proj(x))
    v = ours.split_heads(ours.v_proj(x))
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    got = ours.out_proj(ours.merge_heads(context))
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)


def test_the_wrong_broadcast_runs_silently_when_batch_equals_heads():
    """(B, 1, T_k) lines the batch up with the heads: with B == h it runs."""
    q, k, v = (torch.randn(2, 2, 4, 3) for _ in range(3))  # B = h = 2
    attention_mask = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    right = F.scaled_dot_product_attention(q, k, v, attn_mask=from_attention_mask(attention_mask))
    wrong = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask.bool()[:, None, :])
    assert not torch.allclose(right, wrong)


def test_from_attention_mask_numpy_and_errors():
    keep = from_attention_mask(np.array([[1, 0], [1, 1]]))
    assert isinstance(keep, np.ndarray) and keep.shape == (2, 1, 1, 2)
    assert keep.dtype == np.bool_ and keep.ravel().tolist() == [True, False, True, True]
    with pytest.raises(ValueError, match=r"must hold only 0 and 1"):
        from_attention_mask(np.array([[0.0, -np.inf]]))
    with pytest.raises(ValueError, match=r"attention_mask must have shape \(B, T_k\), got \(3,\)"):
        from_attention_mask(torch.tensor([1, 1, 0]))
    with pytest.raises(TypeError, match="attention_mask must hold 0 and 1, got dtype <U1"):
        from_attention_mask(np.array([["1", "0"]]))


# Causal alignment, against torch.nn.attention.bias


@pytest.mark.parametrize("t_q,t_k", [(3, 7), (4, 4), (1, 6)])
def test_causal_alignments_match_torch_causal_bias(t_q, t_k):
    q, k, v = torch.randn(2, H, t_q, D), torch.randn(2, H, t_k, D), torch.randn(2, H, t_k, D)
    for align, bias in (("top-left", causal_upper_left), ("bottom-right", causal_lower_right)):
        keep = torch.from_numpy(causal_mask(t_q, t_k, align=align))
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bias(t_q, t_k))
        got = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)
    top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    keep = torch.from_numpy(causal_mask(t_q, t_k))
    torch.testing.assert_close(
        F.scaled_dot_product_attention(q, k, v, attn_mask=keep), top_left, atol=ATOL, rtol=0
    )
