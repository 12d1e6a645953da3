"""The gradients of selfattention.kernels.flash_attention against autograd of SDPA.

The reference is autograd of ``F.scaled_dot_product_attention`` computed in
float64 on the same (float32) inputs, so it is exact to about 1e-15: the
kernel's float32 gradients must be within 1e-4 of it. Without a GPU the
backward kernels run under Triton's interpreter, one program at a time, so
the sizes stay small and the blocks large enough that a case has few
programs (a few seconds for all of them).
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from selfattention.kernels import DEVICE, INTERPRETED, flash_attention
from selfattention.kernels.flash import _backward, _forward_with_lse

TOL = 1e-4  # float32 gradients against the float64 reference


def make(batch, heads, kv_heads, t_q, t_k, d_k, d_v, seed=0):
    generator = torch.Generator().manual_seed(seed)
    shapes = [(batch, heads, t_q, d_k), (batch, kv_heads, t_k, d_k), (batch, kv_heads, t_k, d_v)]
    q, k, v = (torch.randn(shape, generator=generator).to(DEVICE) for shape in shapes)
    d_out = torch.randn(batch, heads, t_q, d_v, generator=generator).to(DEVICE)
    return q, k, v, d_out


def reference_grads(q, k, v, d_out, causal, scale=None):
    """Output and gradients of SDPA in float64 (the inputs are float32 numbers)."""
    leaves = [t.detach().double().requires_grad_() for t in (q, k, v)]
    out = F.scaled_dot_product_attention(
        *leaves, is_causal=causal, scale=scale, enable_gqa=q.shape[1] != k.shape[1]
    )
    out.backward(d_out.double())
    return out.detach(), [leaf.grad for leaf in leaves]


def kernel_grads(q, k, v, d_out, causal, scale=None, **blocks):
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = flash_attention(*leaves, causal=causal, scale=scale, **blocks)
    out.backward(d_out)
    return out.detach(), [leaf.grad for leaf in leaves]


def assert_grads_match(q, k, v, d_out, causal, scale=None, **blocks):
    out, grads = kernel_grads(q, k, v, d_out, causal, scale, **blocks)
    ref_out, ref_grads = reference_grads(q, k, v, d_out, causal, scale)
    assert (out.double() - ref_out).abs().max() < TOL
    for name, grad, ref, tensor in zip("qkv", grads, ref_grads, (q, k, v), strict=True):
        assert grad.shape == tensor.shape and grad.dtype == torch.float32, name
        error = (grad.double() - ref).abs().max().item()
        assert error < TOL, f"d{name}: {error:.2e}"


CASES = [
    # batch, h, h_kv, T_q, T_k, d_k, d_v, block_m, block_n
    pytest.param(1, 2, 2, 64, 64, 16, 16, 32, 32, id="multiples-of-the-blocks"),
    pytest.param(1, 2, 2, 45, 45, 32, 32, 16, 32, id="T-not-a-multiple"),
    pytest.param(1, 2, 1, 37, 53, 20, 12, 32, 16, id="Tq<Tk-mqa-d-not-a-power-of-two"),
    pytest.param(1, 4, 2, 50, 21, 16, 24, 32, 16, id="Tq>Tk-gqa"),
    pytest.param(1, 1, 1, 1, 1, 16, 16, 16, 16, id="one-token"),
    pytest.param(1, 1, 1, 20, 20, 128, 128, 16, 16, id="d-128"),
]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("batch", "h", "h_kv", "t_q", "t_k", "d_k", "d_v", "bm", "bn"), CASES)
def test_gradients_match_float64_sdpa(batch, h, h_kv, t_q, t_k, d_k, d_v, bm, bn, causal):
    q, k, v, d_out = make(batch, h, h_kv, t_q, t_k, d_k, d_v)
    assert_grads_match(q, k, v, d_out, causal, block_m=bm, block_n=bn)


@pytest.mark.parametrize("seed", range(4))
def test_random_shapes(seed):
    # Random sizes, head counts, widths (16 to 128), scale and mask: drawn
    # from a seeded generator, so a failure names its seed.
    rng = np.random.default_rng(seed)
    kv_heads = int(rng.choice([1, 2]))
    heads = kv_heads * int(rng.choice([1, 2]))
    t_q, t_k = (int(t) for t in rng.integers(1, 48, size=2))
    d_k, d_v = (int(d) for d in rng.choice([16, 24, 64, 100, 128], size=2))
    scale = float(rng.uniform(0.05, 0.4))
    q, k, v, d_out = make(1, heads, kv_heads, t_q, t_k, d_k, d_v, seed=seed)
    assert_grads_match(q, k, v, d_out, bool(rng.integers(2)), scale, block_m=32, block_n=16)


def test_default_blocks_and_custom_scale():
    q, k, v, d_out = make(1, 1, 1, 70, 70, 16, 16, seed=5)
    assert_grads_match(q, k, v, d_out, True, 0.7)


def test_non_contiguous_inputs_and_output_gradient():
    # (B, T, h, d) tensors viewed as (B, h, T, d), and the expanded gradient
    # (stride 0) that .sum() sends back: the kernels read the strides.
    generator = torch.Generator().manual_seed(2)
    q = torch.randn(1, 40, 2, 16, generator=generator).to(DEVICE).transpose(1, 2)
    k = torch.randn(1, 40, 2, 16, generator=generator).to(DEVICE).transpose(1, 2)
    v = torch.randn(1, 16, 2, 40, generator=generator).to(DEVICE).permute(0, 2, 3, 1)
    d_out = torch.randn(1, 40, 2, 16, generator=generator).to(DEVICE).transpose(1, 2)
    assert not any(t.is_contiguous() for t in (q, k, v, d_out))
    assert_grads_match(q, k, v, d_out, True, block_m=16, block_n=32)
    ones = torch.ones(1, 1, 1, 1, device=DEVICE).expand(1, 2, 40, 16)  # stride 0
    assert_grads_match(q, k, v, ones, False, block_m=32, block_n=16)


def test_gqa_key_and_value_gradients_sum_over_the_heads_that_share_them():
    # Four query heads on two key/value heads: the kernel's dK equals the
    # gradient of K repeated to four heads (repeat_interleave), summed per group.
    q, k, v, d_out = make(1, 4, 2, 24, 24, 16, 16, seed=3)
    _, (_, dk, dv) = kernel_grads(q, k, v, d_out, True, block_m=16, block_n=16)
    k4, v4 = (t.repeat_interleave(2, dim=1).double().requires_grad_() for t in (k, v))
    F.scaled_dot_product_attention(q.double(), k4, v4, is_causal=True).backward(d_out.double())
    for got, expanded in ((dk, k4.grad), (dv, v4.grad)):
        per_group = expanded.reshape(1, 2, 2, 24, 16).sum(dim=2)  # (B, h_kv, T_k, d)
        assert (got.double() - per_group).abs().max() < TOL
        assert (got.double() - expanded[:, ::2]).abs().max() > 0.01  # not one head alone


def test_finite_differences_of_the_kernel_itself():
    # A gradient check in float32 (torch.autograd.gradcheck wants float64,
    # which the interpreter's kernels do not take). For a random direction u,
    # the derivative <grad f, u> of f = <flash_attention(q, k, v), w> must
    # equal the central difference (f(x + eps u) - f(x - eps u)) / (2 eps)
    # computed with the kernel's own forward. eps = 1e-2 balances the
    # truncation error (about eps^2, 1e-4) against float32 rounding in f
    # (about 1e-7 / eps = 1e-5); the tolerance 2e-3 of the derivative's
    # size covers both.
    q, k, v, w = make(1, 1, 1, 6, 6, 16, 16, seed=4)
    inputs = [q, k, v]
    _, grads = kernel_grads(q, k, v, w, True, block_m=16, block_n=16)
    generator = torch.Generator().manual_seed(9)
    eps = 1e-2

    def f(*tensors):
        with torch.no_grad():
            out = flash_attention(*tensors, causal=True, block_m=16, block_n=16)
        return (out.double() * w.double()).sum().item()

    for index in range(3):
        for _ in range(2):
            u = torch.randn(inputs[index].shape, generator=generator).to(DEVICE)
            plus = [t + eps * u if i == index else t for i, t in enumerate(inputs)]
            minus = [t - eps * u if i == index else t for i, t in enumerate(inputs)]
            numeric = (f(*plus) - f(*minus)) / (2 * eps)
            analytic = (grads[index].double() * u.double()).sum().item()
            assert abs(numeric - analytic) < 2e-3 * max(1.0, abs(analytic)), (index, numeric)


def test_only_the_inputs_that_require_a_gradient_get_one():
    q, k, v, d_out = make(1, 2, 2, 20, 20, 16, 16)
    k = k.clone().requires_grad_()
    flash_attention(q, k, v, causal=True, block_m=16, block_n=16).backward(d_out)
    _, (_, dk, _) = reference_grads(q, k, v, d_out, True)
    assert q.grad is None and v.grad is None
    assert (k.grad.double() - dk).abs().max() < TOL


def test_empty_sizes_give_zero_gradients():
    q, k, v, d_out = make(1, 2, 2, 5, 0, 8, 4)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    flash_attention(*leaves).backward(d_out)
    assert leaves[0].grad.shape == q.shape and not leaves[0].grad.any()
    q, k, v, d_out = make(1, 2, 2, 0, 5, 8, 4)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    flash_attention(*leaves, causal=True).backward(d_out)
    assert not leaves[1].grad.any() and not leaves[2].grad.any()
    for sizes in [(0, 2, 2, 5, 5, 8, 4), (1, 2, 2, 5, 5, 8, 0)]:  # no batch; no value feature
        q, k, v, d_out = make(*sizes)
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        flash_attention(*leaves).backward(d_out)
        for leaf, tensor in zip(leaves, (q, k, v), strict=True):
            assert leaf.grad.shape == tensor.shape and not leaf.grad.any(), sizes


def test_one_query_with_one_value_feature_gets_its_gradients():
    # The output has one element: the backward's no-work shortcut must not take it for empty.
    q, k, v, d_out = make(1, 1, 1, 1, 5, 4, 1, seed=3)
    assert_grads_match(q, k, v, d_out + 1.0, False)


def test_a_float64_default_dtype_changes_neither_the_output_nor_the_gradients():
    # The kernels' buffers take the inputs' dtype (or float32 for L and D), not
    # torch's default: a reader who runs torch.set_default_dtype(torch.float64),
    # as gradient checks often do, still gets float32 results, bit for bit.
    q, k, v, d_out = make(1, 2, 2, 20, 20, 16, 16, seed=4)
    expected_out, expected_grads = kernel_grads(q, k, v, d_out, True, block_m=16, block_n=16)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        out, grads = kernel_grads(q, k, v, d_out, True, block_m=16, block_n=16)
    finally:
        torch.set_default_dtype(previous)
    assert out.dtype == torch.float32 and all(g.dtype == torch.float32 for g in grads)
    torch.testing.assert_close(out, expected_out, atol=0, rtol=0)
    for grad, expected in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad, expected, atol=0, rtol=0)


def test_the_backward_skips_the_blocks_the_mask_hides():
    # Causal, 64 tokens, blocks of 16. The dQ programs of queries 0..47 must
    # never load keys 48..63, and the dK/dV programs of keys 16..63 must never
    # load queries 0..15: NaN there stays out of those rows.
    q, k, v, d_out = make(1, 1, 1, 64, 64, 16, 16, seed=6)
    out, lse = _forward_with_lse(q, k, v, True, 0.25, 16, 16)
    _, (dq_ref, dk_ref, dv_ref) = reference_grads(q, k, v, d_out, True, 0.25)
    future_k, future_v = k.clone(), v.clone()
    future_k[..., 48:, :] = float("nan")
    future_v[..., 48:, :] = float("nan")
    dq, _, _ = _backward(q, future_k, future_v, out, lse, d_out, True, 0.25, 16, 16)
    assert (dq[..., :48, :].double() - dq_ref[..., :48, :]).abs().max() < TOL
    past_q, past_do = q.clone(), d_out.clone()
    past_q[..., :16, :] = float("nan")
    past_do[..., :16, :] = float("nan")
    _, dk, dv = _backward(past_q, k, v, out, lse, past_do, True, 0.25, 16, 16)
    assert (dk[..., 16:, :].double() - dk_ref[..., 16:, :]).abs().max() < TOL
    assert (dv[..., 16:, :].double() - dv_ref[..., 16:, :]).abs().max() < TOL


def test_the_stored_log_sum_exp_is_the_rows_logsumexp():
    q, k, v, _ = make(1, 2, 1, 30, 50, 16, 16)
    _, lse = _forward_with_lse(q, k, v, True, 0.3, 16, 16)
    scores = 0.3 * q.double() @ k.double().transpose(-2, -1)  # (1, 2, 30, 50)
    scores = scores.masked_fill(~torch.ones(30, 50, dtype=torch.bool).tril(), -torch.inf)
    assert lse.shape == (1, 2, 30) and lse.dtype == torch.float32
    assert (lse.double() - torch.logsumexp(scores, dim=-1)).abs().max() < 1e-5


def test_a_non_finite_output_gradient_is_named_and_leaves_no_gradient():
    q, k, v, d_out = make(1, 1, 1, 8, 8, 16, 16)
    q = q.clone().requires_grad_()
    out = flash_attention(q, k, v)
    d_out[0, 0, 3, 2] = float("nan")
    with pytest.raises(ValueError, match="gradient of flash_attention's output .* NaN or inf"):
        out.backward(d_out)
    assert q.grad is None


def test_the_function_is_not_differentiable_twice():
    q, k, v, _ = make(1, 1, 1, 8, 8, 16, 16)
    q = q.clone().requires_grad_()
    (grad,) = torch.autograd.grad(flash_attention(q, k, v).sum(), q, create_graph=True)
    with pytest.raises(RuntimeError, match="does not require grad|differentiate twice"):
        grad.sum().backward()


@pytest.mark.skipif(INTERPRETED, reason="float16 and bfloat16 run on a GPU only")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_gradients_on_the_gpu(dtype):  # pragma: no cover - needs a GPU
    q, k, v, d_out = make(2, 8, 2, 300, 300, 64, 64)
    leaves = [t.to(dtype).requires_grad_() for t in (q, k, v)]
    flash_attention(*leaves, causal=True).backward(d_out.to(dtype))
    _, ref = reference_grads(q, k, v, d_out, True)
    for leaf, grad in zip(leaves, ref, strict=True):
        assert leaf.grad.dtype == dtype
        assert (leaf.grad.double() - grad).abs().max() < 5e-2 * grad.abs().max()


def test_very_negative_scores_with_keys_past_the_end():
    # Every score below -100: L is too, and a key past T_k (loaded as zeros,
    # score 0) would get the weight exp(0 - L), past float32's range (inf),
    # unless it is masked. The gradients must stay finite and exact.
    generator = torch.Generator().manual_seed(7)
    base = torch.randn(16, generator=generator)
    q = (8 * base + 0.1 * torch.randn(1, 1, 20, 16, generator=generator)).to(DEVICE)
    k = (-8 * base + 0.1 * torch.randn(1, 1, 20, 16, generator=generator)).to(DEVICE)
    v = torch.randn(1, 1, 20, 16, generator=generator).to(DEVICE)
    d_out = torch.randn(1, 1, 20, 16, generator=generator).to(DEVICE)
    scores = (q @ k.transpose(-2, -1) / 4).max()
    assert scores < -100
    assert_grads_match(q, k, v, d_out, False, block_m=16, block_n=16)
