"""count_multiply_adds against hand counts of the matrix products of known layers."""

import pytest
import torch
import torch.nn.functional as F

from selfattention import KVCache, MultiHeadAttention, SelfAttention
from selfattention.book.measure import count_multiply_adds


def test_matmul_and_linear():
    assert count_multiply_adds(torch.matmul, torch.ones(2, 3), torch.ones(3, 4)) == 2 * 3 * 4
    layer = torch.nn.Linear(16, 8)  # the bias addition is not a multiply-add
    assert count_multiply_adds(layer, torch.ones(3, 5, 16)) == 3 * 5 * 16 * 8


def test_keyword_arguments_reach_the_function():
    q = torch.randn(1, 2, 5, 4)  # (B, h, T_q, d_k)
    k = torch.randn(1, 2, 7, 4)  # (B, h, T_k, d_k)
    v = torch.randn(1, 2, 7, 3)  # (B, h, T_k, d_v)
    expected = 2 * 5 * 7 * (4 + 3)  # Q K^T and A V, per head
    assert count_multiply_adds(F.scaled_dot_product_attention, q, k, v) == expected
    assert count_multiply_adds(F.scaled_dot_product_attention, q, k, v, is_causal=True) == expected


@pytest.mark.parametrize("num_heads", [1, 2, 4, 8])
def test_multi_head_layer_costs_the_same_for_any_number_of_heads(num_heads):
    t, d_model = 6, 16
    layer = MultiHeadAttention(d_model, num_heads)
    expected = 4 * t * d_model**2 + 2 * t**2 * d_model
    assert count_multiply_adds(layer, torch.randn(1, t, d_model)) == expected
    assert count_multiply_adds(SelfAttention(d_model), torch.randn(1, t, d_model)) == expected


def test_cached_step_and_the_cache_it_leaves_behind():
    d_model, h, h_kv, t = 32, 4, 2, 9
    layer = MultiHeadAttention(d_model, h, num_kv_heads=h_kv).eval()
    cache = KVCache()
    with torch.no_grad():
        layer(torch.randn(1, t - 1, d_model), causal=True, cache=cache)
    d_k = d_model // h
    counted = count_multiply_adds(layer, torch.randn(1, 1, d_model), causal=True, cache=cache)
    assert counted == 2 * d_model**2 + 2 * d_model * h_kv * d_k + 2 * h * t * d_k
    assert len(cache) == t  # the call's side effect stays


def test_runs_without_autograd_history():
    layer = torch.nn.Linear(3, 2)
    outputs = []
    count_multiply_adds(lambda x: outputs.append(layer(x)), torch.ones(1, 3))
    assert outputs[0].grad_fn is None


def test_not_callable():
    with pytest.raises(TypeError, match="fn must be callable, got Tensor"):
        count_multiply_adds(torch.ones(2), torch.ones(2))


@pytest.mark.parametrize("t_q, t_k", [(1, 1000), (64, 64), (5, 37)])
def test_fused_attention_on_a_cpu_is_counted(t_q, t_k):
    # 4-D inputs of one width without a mask take PyTorch's fused CPU
    # kernel, which FlopCounterMode alone counts as 0.
    heads, d = 4, 16
    query = torch.randn(2, heads, t_q, d)
    key, value = torch.randn(2, 2, heads, t_k, d)
    count = count_multiply_adds(F.scaled_dot_product_attention, query, key, value)
    assert count == 2 * 2 * heads * t_q * t_k * d  # batch 2, two products
