"""The torch modules against PyTorch: F.scaled_dot_product_attention and nn.MultiheadAttention."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from selfattention import (
    MultiHeadAttention,
    SelfAttention,
    causal_mask,
    from_additive,
    from_attention_mask,
    padding_mask,
    scaled_dot_product_attention,
    softmax,
)

ATOL = 1e-10


# float64 at tight tolerance, seeded (the fixture lives in conftest.py).
pytestmark = pytest.mark.usefixtures("float64_and_seed")


def reference_self_attention(module, x, mask=None, causal=False):
    """The same projections, with PyTorch's fused attention in the middle."""
    q, k, v = module.q_proj(x), module.k_proj(x), module.v_proj(x)
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    return module.out_proj(context)


@pytest.mark.parametrize("d_k,d_v,bias", [(None, None, True), (4, 6, True), (3, 5, False)])
def test_self_attention_matches_torch(d_k, d_v, bias):
    module = SelfAttention(8, d_k=d_k, d_v=d_v, bias=bias)
    x = torch.randn(2, 5, 8)
    output, weights = module(x)
    assert output.shape == (2, 5, 8) and weights.shape == (2, 5, 5)
    torch.testing.assert_close(output, reference_self_attention(module, x), atol=ATOL, rtol=0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 5))


def test_self_attention_mask_and_causal_match_torch():
    module = SelfAttention(6, d_k=4)
    x = torch.randn(3, 5, 6)
    mask = torch.rand(3, 5, 5) > 0.3
    mask[..., 0] = True
    out_masked, _ = module(x, mask=mask)
    torch.testing.assert_close(
        out_masked, reference_self_attention(module, x, mask=mask), atol=ATOL, rtol=0
    )
    out_causal, weights = module(x, causal=True)
    torch.testing.assert_close(
        out_causal, reference_self_attention(module, x, causal=True), atol=ATOL, rtol=0
    )
    assert torch.all(weights.triu(1) == 0)


def test_self_attention_unbatched_input():
    module = SelfAttention(4)
    x = torch.randn(3, 4)
    output, weights = module(x)
    assert output.shape == (3, 4) and weights.shape == (3, 3)
    torch.testing.assert_close(output, module(x[None])[0][0])


def test_self_attention_fully_masked_row_has_zero_weights_and_finite_gradients():
    module = SelfAttention(4)
    x = torch.randn(3, 4, requires_grad=True)
    mask = torch.tensor([[True, True, False], [False, False, False], [True, True, True]])
    output, weights = module(x, mask=mask)
    assert torch.all(weights[1] == 0)
    output.sum().backward()
    assert torch.isfinite(x.grad).all()


def torch_mha(d_model, heads, bias=True):
    return nn.MultiheadAttention(d_model, heads, bias=bias, batch_first=True).eval()


def run_torch(reference, query, key, value, blocked=None):
    return reference(
        query, key, value, attn_mask=blocked, need_weights=True, average_attn_weights=False
    )


@pytest.mark.parametrize("bias", [True, False])
def test_mha_from_torch_self_attention(bias):
    reference = torch_mha(12, 3, bias=bias)
    module = MultiHeadAttention.from_torch(reference)
    x = torch.randn(2, 5, 12)
    output, weights = module(x)
    expected_out, expected_w = run_torch(reference, x, x, x)
    assert output.shape == (2, 5, 12) and weights.shape == (2, 3, 5, 5)
    torch.testing.assert_close(output, expected_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(weights, expected_w, atol=ATOL, rtol=0)


def test_mha_from_torch_maps_random_biases_in_order():
    # nn.MultiheadAttention starts its biases at zero, so a zero-bias test
    # cannot see a bias copied into the wrong projection: use random ones.
    reference = torch_mha(12, 3)
    nn.init.normal_(reference.in_proj_bias)
    nn.init.normal_(reference.out_proj.bias)
    module = MultiHeadAttention.from_torch(reference)
    chunks = reference.in_proj_bias.chunk(3)
    for proj, chunk in zip((module.q_proj, module.k_proj, module.v_proj), chunks, strict=True):
        torch.testing.assert_close(proj.bias, chunk, atol=0, rtol=0)
    torch.testing.assert_close(module.out_proj.bias, reference.out_proj.bias, atol=0, rtol=0)
    query, memory = torch.randn(2, 4, 12), torch.randn(2, 6, 12)
    for key in (query, memory):  # self- and cross-attention
        output, weights = module(query, key, key)
        expected_out, expected_w = run_torch(reference, query, key, key)
        torch.testing.assert_close(output, expected_out, atol=ATOL, rtol=0)
        torch.testing.assert_close(weights, expected_w, atol=ATOL, rtol=0)


def test_mha_from_torch_cross_attention():
    reference = torch_mha(8, 2)
    module = MultiHeadAttention.from_torch(reference)
    query, memory = torch.randn(2, 3, 8), torch.randn(2, 7, 8)
    output, weights = module(query, memory, memory)
    expected_out, expected_w = run_torch(reference, query, memory, memory)
    assert weights.shape == (2, 2, 3, 7)
    torch.testing.assert_close(output, expected_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(weights, expected_w, atol=ATOL, rtol=0)


def test_mha_from_torch_mask_convention_is_inverted():
    reference = torch_mha(8, 4)
    module = MultiHeadAttention.from_torch(reference)
    x = torch.randn(1, 6, 8)
    may_attend = torch.rand(6, 6) > 0.4
    may_attend.fill_diagonal_(True)
    output, weights = module(x, mask=may_attend)
    expected_out, expected_w = run_torch(reference, x, x, x, blocked=~may_attend)
    torch.testing.assert_close(output, expected_out, atol=ATOL, rtol=0)
    torch.testing.assert_close(weights, expected_w, atol=ATOL, rtol=0)


def test_mha_from_torch_causal():
    reference = torch_mha(8, 2)
    module = MultiHeadAttention.from_torch(reference)
    x = torch.randn(2, 5, 8)
    output, _ = module(x, causal=True)
    blocked = nn.Transformer.generate_square_subsequent_mask(5) < 0
    expected_out, _ = run_torch(reference, x, x, x, blocked=blocked)
    torch.testing.assert_close(output, expected_out, atol=ATOL, rtol=0)


def test_mha_per_head_mask_broadcast():
    module = MultiHeadAttention(8, 2)
    x = torch.randn(1, 4, 8)
    per_head = torch.ones(1, 2, 4, 4, dtype=torch.bool)
    per_head[0, 1, :, 0] = False
    _, weights = module(x, mask=per_head)
    assert torch.all(weights[0, 1, :, 0] == 0) and torch.all(weights[0, 0, :, 0] > 0)


def test_mha_split_heads_keeps_token_features_together():
    module = MultiHeadAttention(6, 2)
    x = torch.arange(2 * 4 * 6, dtype=torch.float64).view(2, 4, 6)
    heads = module.split_heads(x)
    assert heads.shape == (2, 2, 4, 3)
    torch.testing.assert_close(heads[1, 1, 2], x[1, 2, 3:])
    torch.testing.assert_close(module.merge_heads(heads), x)


def test_mha_dropout_only_in_training():
    module = MultiHeadAttention(8, 2, dropout=0.5)
    x = torch.randn(1, 6, 8)
    module.eval()
    _, weights = module(x)
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, 2, 6))
    module.train()
    _, dropped = module(x)
    assert not torch.allclose(dropped.sum(-1), torch.ones(1, 2, 6))


def test_from_torch_rejects_unsupported_configurations():
    with pytest.raises(TypeError, match="MultiheadAttention"):
        MultiHeadAttention.from_torch(nn.Linear(4, 4))
    with pytest.raises(ValueError, match="kdim"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, kdim=4, vdim=4))
    with pytest.raises(ValueError, match="add_bias_kv"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))


def test_scale_uses_per_head_dimension():
    module = MultiHeadAttention(72, 2)  # head_dim 36: the divisor is 6, not sqrt(72)
    x = torch.randn(1, 3, 72)
    _, weights = module(x)
    q = module.split_heads(module.q_proj(x))
    k = module.split_heads(module.k_proj(x))
    torch.testing.assert_close(weights, torch.softmax(q @ k.transpose(-2, -1) / 6.0, dim=-1))
    assert math.sqrt(module.head_dim) == 6.0


# Masks are interchangeable: whatever a mask builder returns, every consumer takes.


def _builders():
    """(name, mask) for every mask builder of the package, in both libraries; T = 4."""
    tokens = np.array([[1, 1, 1, 1], [1, 1, 0, 0]])  # a tokenizer's attention_mask (B, T_k)
    additive = np.where(causal_mask(4), 0.0, -np.inf)  # (T_q, T_k)
    return [
        ("causal_mask", causal_mask(4)),  # numpy (4, 4)
        ("padding_mask(list)", padding_mask([4, 2])[:, None, None, :]),  # numpy (B, 1, 1, T_k)
        ("padding_mask(tensor)", padding_mask(torch.tensor([4, 2]))[:, None, None, :]),
        ("from_attention_mask(numpy)", from_attention_mask(tokens)),  # (B, 1, 1, T_k)
        ("from_attention_mask(torch)", from_attention_mask(torch.from_numpy(tokens))),
        ("from_additive(numpy)", from_additive(additive)),
        ("from_additive(torch)", from_additive(torch.from_numpy(additive))),
    ]


def _as_torch(mask):
    return mask if isinstance(mask, torch.Tensor) else torch.from_numpy(mask)


@pytest.mark.parametrize("name,mask", _builders(), ids=[name for name, _ in _builders()])
def test_every_mask_builder_feeds_every_consumer(name, mask):
    x = torch.randn(2, 4, 8)  # (B, T, d_model)
    keep = _as_torch(mask)  # the same mask as a tensor: the reference's

    module = MultiHeadAttention(8, 2)
    q = module.split_heads(module.q_proj(x))  # (B, h, T, head_dim)
    k = module.split_heads(module.k_proj(x))  # (B, h, T, head_dim)
    v = module.split_heads(module.v_proj(x))  # (B, h, T, head_dim)
    expected = module.out_proj(
        module.merge_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=keep))
    )
    torch.testing.assert_close(module(x, mask=mask)[0], expected, atol=ATOL, rtol=0)

    single = SelfAttention(8, d_k=4)
    mask3 = mask[:, 0] if mask.ndim == 4 else mask  # scores (B, T, T): drop the head axis
    torch.testing.assert_close(
        single(x, mask=mask3)[0],
        reference_self_attention(single, x, mask=_as_torch(mask3)),
        atol=ATOL,
        rtol=0,
    )

    q_np, k_np, v_np = (t.detach().numpy() for t in (q, k, v))  # (B, h, T, head_dim)
    output, _ = scaled_dot_product_attention(q_np, k_np, v_np, mask=mask)
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=keep).detach().numpy()
    np.testing.assert_allclose(output, reference, atol=ATOL, rtol=0)

    scores = np.random.default_rng(0).normal(size=(2, 1, 4, 4))  # (B, h, T_q, T_k)
    weights = softmax(scores, mask=mask)
    expected = torch.softmax(torch.from_numpy(scores).masked_fill(~keep, -torch.inf), -1)
    np.testing.assert_allclose(weights, expected.numpy(), atol=ATOL, rtol=0)
