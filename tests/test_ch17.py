"""Chapter 17's exercise checker: the right Triton passes, the usual mistakes fail."""

import selfattention.kernels  # noqa: F401, I001  (first: selects the interpreter without a GPU)

import torch
import triton
import triton.language as tl

from selfattention.exercises import check_dv_update
from selfattention.exercises.ch17 import reference_dv_update


def test_reference_is_the_gradient_of_the_values():
    # dV of one key block against one query block, by autograd in float64.
    generator = torch.Generator().manual_seed(0)
    k, q, do = (torch.randn(n, 8, generator=generator, dtype=torch.float64) for n in (5, 7, 7))
    v = torch.randn(5, 8, generator=generator, dtype=torch.float64, requires_grad=True)
    torch.softmax(0.3 * q @ k.T, dim=-1).matmul(v).backward(do)
    lse = torch.logsumexp(0.3 * q @ k.T, dim=-1)
    got = reference_dv_update(torch.zeros(5, 8), k, q, do, lse, 0.3)
    assert (got.double() - v.grad).abs().max() < 1e-5


@triton.jit
def right(dv, k, q, do, lse, scale):
    s_t = tl.dot(k, tl.trans(q), input_precision="ieee") * scale  # (b_k, b_q)
    p_t = tl.math.exp2((s_t - lse[None, :]) * 1.4426950408889634)
    return dv + tl.dot(p_t, do, input_precision="ieee")


@triton.jit
def forgets_lse(dv, k, q, do, lse, scale):
    p_t = tl.exp(tl.dot(k, tl.trans(q), input_precision="ieee") * scale)
    return dv + tl.dot(p_t, do, input_precision="ieee")


@triton.jit
def local_softmax(dv, k, q, do, lse, scale):
    # Normalises over this block's keys and ignores L: right only where the
    # block holds every key of its queries.
    s_t = tl.dot(k, tl.trans(q), input_precision="ieee") * scale  # (b_k, b_q)
    p_t = tl.exp(s_t - tl.max(s_t, 0)[None, :])
    p_t = p_t / tl.sum(p_t, 0)[None, :]
    return dv + tl.dot(p_t, do, input_precision="ieee")


@triton.jit
def overwrites(dv, k, q, do, lse, scale):
    p_t = tl.exp(tl.dot(k, tl.trans(q), input_precision="ieee") * scale - lse[None, :])
    return tl.dot(p_t, do, input_precision="ieee")


@triton.jit
def no_scale(dv, k, q, do, lse, scale):
    p_t = tl.exp(tl.dot(k, tl.trans(q), input_precision="ieee") - lse[None, :])
    return dv + tl.dot(p_t, do, input_precision="ieee")


def test_dv_update_checker(capsys):
    assert check_dv_update(right) is True
    assert capsys.readouterr().out.startswith("✓ check_dv_update: all 5 cases pass")
    assert check_dv_update(forgets_lse) is False
    assert "case 1 (b_q = b_k = 16" in capsys.readouterr().out
    assert check_dv_update(local_softmax) is False
    assert "case 2 (the block is one of three" in capsys.readouterr().out
    assert check_dv_update(overwrites) is False
    assert "case 5 (a non-zero dv" in capsys.readouterr().out
    assert check_dv_update(no_scale) is False
    assert "case 1" in capsys.readouterr().out
