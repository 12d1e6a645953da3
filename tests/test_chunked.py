"""chunked_attention against PyTorch's F.scaled_dot_product_attention."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

import selfattention
from selfattention import chunked_attention
from selfattention.layers.chunked import peak_tensor_bytes


class RecordOps(TorchDispatchMode):
    """Record every aten op that runs, with the sizes of the tensors it returns."""

    def __init__(self):
        super().__init__()
        self.calls = []  # (op name, [numel of each output tensor])

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        outputs = result if isinstance(result, (tuple, list)) else [result]
        sizes = [t.numel() for t in outputs if isinstance(t, torch.Tensor)]
        self.calls.append((func.overloadpacket.__name__, sizes))
        return result


def reference(q, k, v, causal=False, scale=None):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


def test_exported():
    assert "chunked_attention" in selfattention.__all__
    assert selfattention.chunked_attention is chunked_attention


@given(
    batch=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    t_q=st.integers(1, 37),
    t_k=st.integers(1, 37),
    d_k=st.integers(1, 9),
    d_v=st.integers(1, 7),
    block=st.integers(1, 17),
    causal=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_matches_torch_on_random_shapes_float64(batch, t_q, t_k, d_k, d_v, block, causal, seed):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, t_q, d_k, generator=generator, dtype=torch.float64)
    k = torch.randn(*batch, t_k, d_k, generator=generator, dtype=torch.float64)
    v = torch.randn(*batch, t_k, d_v, generator=generator, dtype=torch.float64)
    got = chunked_attention(q, k, v, causal=causal, block_size=block)
    assert got.shape == (*batch, t_q, d_v) and got.dtype == torch.float64
    torch.testing.assert_close(got, reference(q, k, v, causal), atol=1e-12, rtol=0)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "t_q,t_k,block", [(100, 100, 16), (77, 130, 32), (130, 45, 32), (64, 64, 64), (5, 300, 7)]
)
def test_matches_torch_float32(t_q, t_k, block, causal):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, t_q, 16), torch.randn(2, 3, t_k, 16), torch.randn(2, 3, t_k, 8)
    got = chunked_attention(q, k, v, causal=causal, block_size=block)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, reference(q, k, v, causal), atol=1e-5, rtol=0)


def test_default_block_size_and_benchmark_shape_match_torch():
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 4, 600, 64) for _ in range(3))
    for causal in (False, True):
        torch.testing.assert_close(
            chunked_attention(q, k, v, causal=causal),
            reference(q, k, v, causal),
            atol=1e-5,
            rtol=0,
        )


def test_explicit_scale_matches_torch():
    torch.manual_seed(2)
    q, k, v = torch.randn(3, 10, 4), torch.randn(3, 12, 4), torch.randn(3, 12, 5)
    for scale in (0.1, 1.0, -0.7):
        torch.testing.assert_close(
            chunked_attention(q, k, v, scale=scale, block_size=5),
            reference(q, k, v, scale=scale),
            atol=1e-6,
            rtol=0,
        )


def test_leading_dims_broadcast():
    torch.manual_seed(3)
    q = torch.randn(2, 1, 9, 4)  # broadcast over 3 heads of keys
    k = torch.randn(1, 3, 11, 4)
    v = torch.randn(11, 6)  # no batch dims at all
    got = chunked_attention(q, k, v, block_size=4)
    want = reference(q.expand(2, 3, 9, 4), k.expand(2, 3, 11, 4), v.expand(2, 3, 11, 6))
    assert got.shape == (2, 3, 9, 6)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


def test_causal_future_keys_do_not_change_earlier_outputs():
    torch.manual_seed(4)
    q, k, v = torch.randn(20, 8), torch.randn(20, 8), torch.randn(20, 3)
    before = chunked_attention(q, k, v, causal=True, block_size=6)
    k2, v2 = k.clone(), v.clone()
    k2[12:] = torch.randn(8, 8) * 5
    v2[12:] = torch.randn(8, 3) * 5
    after = chunked_attention(q, k2, v2, causal=True, block_size=6)
    torch.testing.assert_close(after[:12], before[:12], atol=0, rtol=0)
    assert not torch.allclose(after[12:], before[12:])


def test_no_keys_gives_zeros_not_nan():
    # The only way a query can have nothing to attend to: T_k = 0 (top-left
    # causal alignment always leaves key 0 visible to every query).
    q, k, v = torch.randn(2, 5, 4), torch.randn(2, 0, 4), torch.randn(2, 0, 3)
    for causal in (False, True):
        out = chunked_attention(q, k, v, causal=causal, block_size=2)
        assert out.shape == (2, 5, 3)
        assert torch.equal(out, torch.zeros(2, 5, 3))


def test_causal_with_more_queries_than_keys_has_no_nan():
    torch.manual_seed(5)
    q, k, v = torch.randn(1, 40, 4), torch.randn(1, 9, 4), torch.randn(1, 9, 3)
    out = chunked_attention(q, k, v, causal=True, block_size=4)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, reference(q, k, v, causal=True), atol=1e-6, rtol=0)


def test_empty_queries():
    out = chunked_attention(torch.randn(3, 0, 4), torch.randn(3, 5, 4), torch.randn(3, 5, 2))
    assert out.shape == (3, 0, 2)


def test_large_scores_do_not_overflow():
    torch.manual_seed(6)
    q, k, v = torch.randn(2, 30, 8) * 300, torch.randn(2, 30, 8) * 300, torch.randn(2, 30, 4)
    out = chunked_attention(q, k, v, block_size=7)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(
        out, reference(q.double(), k.double(), v.double()).float(), atol=1e-5, rtol=0
    )


def test_overflowing_scores_raise_instead_of_nan():
    q = torch.full((1, 2, 4), 1e30)
    with pytest.raises(ValueError, match=r"scores Q K\^T \* scale overflow torch.float32"):
        chunked_attention(q, q, torch.ones(1, 2, 3))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_accumulated_in_float32(dtype):
    torch.manual_seed(7)
    q, k, v = (torch.randn(2, 50, 16) for _ in range(3))
    out = chunked_attention(q.to(dtype), k.to(dtype), v.to(dtype), block_size=8)
    assert out.dtype == dtype
    want = reference(q.to(dtype).float(), k.to(dtype).float(), v.to(dtype).float())
    tol = 1e-3 if dtype == torch.float16 else 1e-2
    torch.testing.assert_close(out.float(), want, atol=tol, rtol=0)


def test_gradients_match_torch():
    torch.manual_seed(8)
    tensors = [torch.randn(2, 13, 4, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    for causal in (False, True):
        grads = torch.autograd.grad(
            chunked_attention(*tensors, causal=causal, block_size=5).sum(), tensors
        )
        wants = torch.autograd.grad(reference(*tensors, causal=causal).sum(), tensors)
        for got, want in zip(grads, wants, strict=True):
            torch.testing.assert_close(got, want, atol=1e-10, rtol=0)


def test_never_materialises_the_score_matrix():
    t, block = 96, 32
    q, k, v = torch.randn(1, t, 4), torch.randn(1, t, 4), torch.randn(1, t, 4)
    with RecordOps() as record:
        chunked_attention(q, k, v, block_size=block)
    largest = max(size for _, sizes in record.calls for size in sizes)
    assert largest == block * block, largest  # one tile of scores, never t * t
    # The check can fail: the plain formula does build the (t, t) matrix.
    with RecordOps() as record:
        torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v
    assert max(size for _, sizes in record.calls for size in sizes) == t * t


def test_causal_skips_tiles_wholly_in_the_future():
    t, block = 64, 16
    q, k, v = (torch.randn(1, t, 4) for _ in range(3))
    counts = {}
    for causal in (False, True):
        with RecordOps() as record:
            chunked_attention(q, k, v, causal=causal, block_size=block)
        counts[causal] = sum(name == "bmm" for name, _ in record.calls)
    tiles = t // block  # 4 query tiles by 4 key tiles
    assert counts[False] == tiles * tiles == 16
    assert counts[True] == tiles * (tiles + 1) // 2 == 10  # the lower triangle of tiles


@pytest.mark.parametrize(
    "args,kwargs,error,pattern",
    [
        (
            ("q", torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)),
            {},
            TypeError,
            r"query must be a torch.Tensor, got str",
        ),
        (
            (torch.zeros(2, 3, 4, dtype=torch.int64), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)),
            {},
            TypeError,
            r"query must be a floating-point tensor, got dtype torch.int64",
        ),
        (
            (torch.zeros(4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)),
            {},
            ValueError,
            r"query must have at least 2 dimensions, got shape \(4,\)",
        ),
        (
            (torch.zeros(2, 3, 4), torch.zeros(2, 5, 3), torch.zeros(2, 5, 6)),
            {},
            ValueError,
            r"query and key must share the feature size d_k: "
            r"query has shape \(2, 3, 4\), key has shape \(2, 5, 3\)",
        ),
        (
            (torch.zeros(2, 3, 4), torch.zeros(2, 5, 4), torch.zeros(2, 4, 6)),
            {},
            ValueError,
            r"key and value must have the same length Tk: "
            r"key has shape \(2, 5, 4\), value has shape \(2, 4, 6\)",
        ),
        (
            (torch.zeros(3, 3, 4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)),
            {},
            ValueError,
            r"do not broadcast: query batch dims of \(3,\), key batch dims of \(2,\)",
        ),
        (
            (
                torch.zeros(2, 3, 4),
                torch.zeros(2, 5, 4, dtype=torch.float64),
                torch.zeros(2, 5, 6),
            ),
            {},
            TypeError,
            r"share one dtype, got torch.float32, torch.float64 and torch.float32",
        ),
        (
            (torch.full((2, 3, 4), math.nan), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)),
            {},
            ValueError,
            r"query contains NaN \(shape \(2, 3, 4\)\); query must be finite, without NaN or inf",
        ),
        (
            (torch.zeros(2, 3, 4), torch.zeros(2, 5, 4), torch.full((2, 5, 6), math.inf)),
            {},
            ValueError,
            r"value must be finite",
        ),
        (
            (torch.zeros(2, 3, 4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)),
            {"block_size": 0},
            ValueError,
            r"block_size must be positive, got 0",
        ),
        (
            (torch.zeros(2, 3, 4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)),
            {"block_size": 2.5},
            TypeError,
            r"block_size must be an int, got float",
        ),
        (
            (torch.zeros(2, 3, 4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)),
            {"scale": math.inf},
            ValueError,
            r"scale must be finite, got inf",
        ),
        (
            (torch.zeros(2, 3, 4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)),
            {"scale": "0.5"},
            TypeError,
            r"scale must be a float or None, got str",
        ),
        (
            (torch.zeros(2, 3, 4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)),
            {"causal": 1},
            TypeError,
            r"causal must be a bool, got int",
        ),
    ],
)
def test_bad_inputs(args, kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        chunked_attention(*args, **kwargs)


def test_docstring_example_runs():
    import doctest

    import selfattention.layers.chunked as module

    result = doctest.testmod(module)
    assert result.attempted >= 1 and result.failed == 0


def test_peak_tensor_bytes_counts_what_is_alive_at_once():
    t, d = 64, 8
    q = torch.randn(t, d)

    def plain(q, k, v):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (t, t), kept alive
        return torch.softmax(scores, dim=-1) @ v

    # The scaled scores and the weights are alive together when the output is made.
    assert peak_tensor_bytes(plain, q, q, q) == 2 * t * t * 4 + t * d * 4
    # Views and in-place results are not new memory; the inputs are never counted.
    assert peak_tensor_bytes(lambda x: x[1:].transpose(0, 1).mul_(2), q.clone()) == 0
    assert peak_tensor_bytes(lambda x: x.double(), q) == t * d * 8
    with pytest.raises(TypeError, match="fn must be callable, got int"):
        peak_tensor_bytes(3)


def test_chunked_memory_grows_linearly_while_plain_grows_quadratically():
    sizes = (256, 512, 1024)
    chunked = [
        peak_tensor_bytes(chunked_attention, x, x, x, block_size=32)
        for x in (torch.randn(t, 16) for t in sizes)
    ]
    plain = [peak_tensor_bytes(reference, x, x, x) for x in (torch.randn(t, 16) for t in sizes)]
    assert chunked[2] / chunked[1] < 2.2 and chunked[1] / chunked[0] < 2.2
    assert chunked[2] < 64 * 1024 * 16 * 4  # well under one T x T float32 matrix
    # Under the counting mode PyTorch's SDPA takes its plain (math) path: quadratic.
    assert plain[2] / plain[1] > 3.8 and plain[1] / plain[0] > 3.8
