"""Property-based tests: what must hold for every input, not just the examples."""

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from selfattention import MultiHeadAttention, SelfAttention, scaled_dot_product_attention, softmax

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
dims = st.integers(1, 6)


@st.composite
def qkv(draw):
    t_q, t_k, d_k, d_v = draw(dims), draw(dims), draw(dims), draw(dims)
    q = draw(arrays(np.float64, (t_q, d_k), elements=st.floats(-10, 10)))
    k = draw(arrays(np.float64, (t_k, d_k), elements=st.floats(-10, 10)))
    v = draw(arrays(np.float64, (t_k, d_v), elements=st.floats(-10, 10)))
    return q, k, v


@given(arrays(np.float64, st.tuples(dims, dims), elements=finite))
def test_softmax_rows_sum_to_one(x):
    weights = softmax(x)
    assert np.all(weights >= 0) and np.all(weights <= 1)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-12)


@given(arrays(np.float64, st.tuples(dims, dims), elements=finite), finite)
def test_softmax_is_shift_invariant(x, shift):
    np.testing.assert_allclose(softmax(x + shift), softmax(x), atol=1e-12)


@given(qkv())
def test_attention_rows_sum_to_one_and_output_is_convex_combination(data):
    q, k, v = data
    output, weights = scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-12)
    assert np.all(output <= v.max(axis=0) + 1e-9) and np.all(output >= v.min(axis=0) - 1e-9)


@given(qkv(), st.randoms(use_true_random=False))
def test_attention_without_positions_is_permutation_equivariant(data, random):
    q, k, v = data
    x_perm = list(range(q.shape[0]))
    random.shuffle(x_perm)
    kv_perm = list(range(k.shape[0]))
    random.shuffle(kv_perm)
    output, _ = scaled_dot_product_attention(q, k, v)
    # Permuting the queries permutes the outputs; permuting key/value pairs
    # together changes nothing.
    shuffled, _ = scaled_dot_product_attention(q[x_perm], k[kv_perm], v[kv_perm])
    np.testing.assert_allclose(shuffled, output[x_perm], atol=1e-9)


@given(st.integers(2, 7), st.integers(0, 6), st.integers(0, 2**16))
def test_causal_attention_ignores_the_future(length, cut, seed):
    cut = cut % length
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(length, 4))
    changed = x.copy()
    changed[cut + 1 :] = rng.normal(size=changed[cut + 1 :].shape)
    before, _ = scaled_dot_product_attention(x, x, x, causal=True)
    after, _ = scaled_dot_product_attention(changed, changed, changed, causal=True)
    np.testing.assert_allclose(after[: cut + 1], before[: cut + 1], atol=1e-12)


@given(st.integers(2, 6), st.integers(0, 5), st.integers(0, 2**16))
def test_torch_modules_causal_future_invariance(length, cut, seed):
    cut = cut % length
    torch.manual_seed(seed)
    single = SelfAttention(4).double()
    multi = MultiHeadAttention(4, 2).double()
    x = torch.randn(1, length, 4, dtype=torch.float64)
    changed = x.clone()
    changed[:, cut + 1 :] = torch.randn_like(changed[:, cut + 1 :])
    for module in (single, multi):
        before, _ = module(x, causal=True)
        after, _ = module(changed, causal=True)
        torch.testing.assert_close(after[:, : cut + 1], before[:, : cut + 1])


@given(st.integers(1, 6), st.integers(0, 2**16))
def test_self_attention_module_is_permutation_equivariant(length, seed):
    torch.manual_seed(seed)
    module = MultiHeadAttention(6, 3).double()
    x = torch.randn(1, length, 6, dtype=torch.float64)
    perm = torch.randperm(length)
    output, _ = module(x)
    shuffled, _ = module(x[:, perm])
    torch.testing.assert_close(shuffled, output[:, perm])
