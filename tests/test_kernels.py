"""selfattention.kernels.flash_attention against F.scaled_dot_product_attention.

Without a CUDA GPU these run the Triton kernel under Triton's interpreter,
which can fail silently (a wrong index reads a wrong but finite number), so
every case is compared with PyTorch's own attention, in float32 to 1e-5 or
tighter. The sizes stay small: the interpreter runs numpy, one program at a
time.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from selfattention.kernels import DEVICE, INTERPRETED, _interpreter_needed, flash_attention
from selfattention.kernels.flash import _forward, _forward_with_lse

NO_GPU = not torch.cuda.is_available()
ATOL = 2e-6  # float32: the kernel and SDPA add the same terms in another order


def make(batch, heads, kv_heads, t_q, t_k, d_k, d_v, seed=0, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, t_q, d_k, generator=generator, dtype=dtype)
    k = torch.randn(batch, kv_heads, t_k, d_k, generator=generator, dtype=dtype)
    v = torch.randn(batch, kv_heads, t_k, d_v, generator=generator, dtype=dtype)
    return q.to(DEVICE), k.to(DEVICE), v.to(DEVICE)


def sdpa(q, k, v, causal=False, scale=None):
    return F.scaled_dot_product_attention(
        q, k, v, is_causal=causal, scale=scale, enable_gqa=q.shape[1] != k.shape[1]
    )


def run_python(code):
    """Run ``code`` in a fresh interpreter with this environment, minus TRITON_INTERPRET."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )


# --- importing -------------------------------------------------------------------


def test_a_fresh_process_imports_triton_only_for_the_kernels():
    # The package alone does not import triton; selfattention.kernels does,
    # and without a GPU it selects the interpreter first.
    result = run_python(
        "import os, sys, selfattention\n"
        "print('triton' in sys.modules)\n"
        "import selfattention.kernels as k\n"
        "print('triton' in sys.modules, k.INTERPRETED, k.DEVICE,"
        " os.environ.get('TRITON_INTERPRET'))"
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert lines[0] == "False"
    if NO_GPU:
        assert lines[1].split() == ["True", "True", "cpu", "1"]
    else:  # pragma: no cover - needs a GPU
        assert lines[1].split() == ["True", "False", "cuda", "None"]


class FakeStandard:
    """Stands in for triton.language.standard, whose ``zeros`` is a jitted function."""

    def __init__(self, zeros):
        self.zeros = zeros


def test_triton_imported_first_without_the_interpreter_is_refused(monkeypatch):
    # What a fresh process that imports triton first, on a CPU, would meet.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setitem(sys.modules, "triton.language.standard", FakeStandard(object()))
    message = (
        "triton was imported before selfattention.kernels, without TRITON_INTERPRET=1, on a "
        "machine without a CUDA GPU: its kernels cannot run here. Import "
        "selfattention.kernels before anything that imports triton (or set "
        "TRITON_INTERPRET=1 before that), in a fresh Python process"
    )
    with pytest.raises(ImportError, match=f"^{re.escape(message)}$"):
        _interpreter_needed()


def test_triton_imported_first_with_the_interpreter_is_accepted(monkeypatch):
    from triton.runtime.interpreter import InterpretedFunction

    def zeros():  # pragma: no cover - never called
        pass

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setitem(
        sys.modules, "triton.language.standard", FakeStandard(InterpretedFunction(zeros))
    )
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert _interpreter_needed() is True


def test_with_a_gpu_the_interpreter_is_chosen_only_by_hand(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert _interpreter_needed() is False
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert _interpreter_needed() is True


def test_with_a_gpu_triton_s_spellings_of_on_select_the_interpreter(monkeypatch):
    # Triton reads TRITON_INTERPRET as on for 1, true, on and yes, in any case.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for value in ("1", "true", "TRUE", "On", "yes", "YES"):
        monkeypatch.setenv("TRITON_INTERPRET", value)
        assert _interpreter_needed() is True, value
    for value in ("0", "false", "off", "no", ""):
        monkeypatch.setenv("TRITON_INTERPRET", value)
        assert _interpreter_needed() is False, value
    monkeypatch.delenv("TRITON_INTERPRET")
    assert _interpreter_needed() is False  # unset: the kernels are compiled


def test_without_a_gpu_the_interpreter_is_selected_for_triton(monkeypatch):
    # Before triton is imported: the choice is written where triton reads it.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delitem(sys.modules, "triton.language.standard", raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert _interpreter_needed() is True
    assert os.environ["TRITON_INTERPRET"] == "1"


@pytest.fixture(scope="module")
def compiled():
    """tests/compile_kernels.py's rows, one per (target, dtype, d, kernel), in one process."""
    result = subprocess.run(
        [sys.executable, str(pathlib.Path(__file__).with_name("compile_kernels.py"))],
        capture_output=True,
        text=True,
        env={key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"},
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_the_compile_check_is_collected_first(request):
    # conftest.py sorts the tests that use `compiled` to the front, so that one
    # xdist worker takes them all at its start and compiles once (about 20 s of
    # one core), not each worker for itself near the end of the run.
    uses = ["compiled" in getattr(item, "fixturenames", ()) for item in request.session.items]
    assert uses[: sum(uses)] == [True] * sum(uses), "a `compiled` test is not at the front"


# Shared memory per block (thread block = program) that each GPU allows.
SHARED_LIMIT = {90: 227 * 1024, 80: 163 * 1024}


def test_every_kernel_builds_for_sm90_and_sm80_in_every_dtype(compiled):
    # CI has no GPU, so the compiled path would go untested: Triton's compiler
    # builds the forward and both backward kernels here with the launch
    # settings flash_attention uses. d = 8 checks the padding to 16 (tl.dot's
    # minimum for 16-bit inputs); the bfloat16 kernels at d = 128 for sm_90 go
    # down to a cubin through the ptxas in Triton's wheel.
    kinds = {(row["arch"], row["dtype"], row["d"]) for row in compiled}
    assert len(kinds) == 2 * 8 and len(compiled) == 3 * len(kinds)
    failed = [row for row in compiled if "error" in row]
    assert not failed, failed[0]
    cubins = [row for row in compiled if "cubin" in row]
    assert len(cubins) == 3 and all(row["cubin"] for row in cubins)
    assert {row["arch"] for row in cubins} == {90}
    # The allocation pass's figure is the one the compiled kernel's metadata carries.
    assert all(row["compiled_shared"] == row["shared"] for row in cubins)


def test_every_kernel_fits_the_shared_memory_of_an_h100_and_an_a100(compiled):
    # Read from the kernels themselves (Triton's shared-memory allocation), so
    # that a block size or a number of stages too large for the GPU fails here
    # instead of raising OutOfResources on the first GPU that runs it. The
    # default blocks are chosen by d and dtype (_default_blocks); float32 at
    # d = 256 with the 16-bit blocks would need about 295 KB.
    over = [
        (row["arch"], row["dtype"], row["d"], row["kind"], row["shared"])
        for row in compiled
        if row["shared"] > SHARED_LIMIT[row["arch"]]
    ]
    assert not over, over
    assert max(row["shared"] for row in compiled) > 100 * 1024  # the figure is real


def test_float32_uses_exact_products_and_16_bit_the_tensor_cores(compiled):
    # input_precision="ieee": float32 products on the ordinary units (no mma
    # layout at all); float16 and bfloat16 products on the tensor cores.
    for row in compiled:
        assert row["tensor_cores"] == (row["dtype"] != "torch.float32"), row


def test_this_session_uses_the_interpreter_exactly_when_there_is_no_gpu():
    if NO_GPU:
        assert INTERPRETED and DEVICE == "cpu"
    else:
        assert INTERPRETED == (os.environ.get("TRITON_INTERPRET") == "1")


# --- against PyTorch -------------------------------------------------------------

SHAPES = [
    # batch, h, h_kv, T_q, T_k, d_k, d_v, block_m, block_n
    pytest.param(1, 2, 2, 64, 64, 16, 16, 16, 16, id="multiples-of-the-blocks"),
    pytest.param(1, 2, 2, 100, 100, 32, 32, 32, 32, id="T-not-a-multiple"),
    pytest.param(1, 2, 2, 37, 53, 20, 12, 16, 16, id="Tq<Tk-d-not-a-power-of-two"),
    pytest.param(1, 2, 2, 90, 33, 16, 24, 32, 16, id="Tq>Tk"),
    pytest.param(1, 4, 2, 50, 70, 16, 16, 16, 32, id="gqa-2-per-group"),
    pytest.param(2, 4, 1, 40, 40, 16, 8, 32, 16, id="mqa"),
    pytest.param(1, 2, 2, 130, 130, 64, 64, 128, 64, id="block_m>block_n"),
    pytest.param(1, 2, 2, 70, 150, 16, 16, 16, 64, id="block_m<block_n"),
    pytest.param(1, 1, 1, 1, 1, 8, 8, 16, 16, id="one-token"),
]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("batch", "h", "h_kv", "t_q", "t_k", "d_k", "d_v", "bm", "bn"), SHAPES)
def test_matches_sdpa_float32(batch, h, h_kv, t_q, t_k, d_k, d_v, bm, bn, causal):
    q, k, v = make(batch, h, h_kv, t_q, t_k, d_k, d_v)
    got = flash_attention(q, k, v, causal=causal, block_m=bm, block_n=bn)
    assert got.shape == (batch, h, t_q, d_v) and got.dtype == torch.float32
    torch.testing.assert_close(got, sdpa(q, k, v, causal), atol=ATOL, rtol=0)


def test_causal_alignment_is_top_left_when_tq_differs_from_tk():
    # Top-left: query i sees keys 0..i, also when T_q != T_k. A bottom-right
    # mask (query i sees keys 0..i + T_k - T_q) gives a different answer.
    q, k, v = make(1, 1, 1, 20, 50, 16, 16)
    got = flash_attention(q, k, v, causal=True, block_m=16, block_n=16)
    top_left = torch.ones(20, 50, dtype=torch.bool, device=DEVICE).tril()
    bottom_right = torch.ones(20, 50, dtype=torch.bool, device=DEVICE).tril(diagonal=30)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=top_left)
    other = F.scaled_dot_product_attention(q, k, v, attn_mask=bottom_right)
    torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)
    assert (got - other).abs().max() > 0.1


def test_against_float64_attention():
    # The kernel's float32 result is as close to exact (float64) attention as SDPA's.
    q, k, v = make(1, 2, 2, 77, 77, 32, 32)
    exact = sdpa(q.double(), k.double(), v.double(), causal=True)
    got = flash_attention(q, k, v, causal=True, block_m=32, block_n=16).double()
    assert (got - exact).abs().max() < 2e-6


def test_gqa_uses_consecutive_query_heads_per_kv_head():
    # enable_gqa's layout: query heads 0, 1 read kv head 0; heads 2, 3 read kv head 1.
    q, k, v = make(1, 4, 2, 24, 24, 16, 16)
    got = flash_attention(q, k, v, block_m=16, block_n=16)
    interleaved = sdpa(q, k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1))
    tiled = sdpa(q, k.repeat(1, 2, 1, 1), v.repeat(1, 2, 1, 1))
    torch.testing.assert_close(got, interleaved, atol=ATOL, rtol=0)
    assert (got - tiled).abs().max() > 0.1


@pytest.mark.parametrize(("bm", "bn"), [(16, 16), (16, 32), (32, 16), (64, 64), (128, 16)])
def test_block_sizes_do_not_change_the_result(bm, bn):
    q, k, v = make(1, 2, 2, 75, 75, 16, 16, seed=3)
    got = flash_attention(q, k, v, causal=True, block_m=bm, block_n=bn)
    torch.testing.assert_close(got, sdpa(q, k, v, True), atol=ATOL, rtol=0)


def test_explicit_scale_and_default_blocks():
    q, k, v = make(1, 2, 2, 150, 150, 32, 32)
    got = flash_attention(q, k, v, scale=0.3)
    torch.testing.assert_close(got, sdpa(q, k, v, scale=0.3), atol=ATOL, rtol=0)


def test_default_scale_is_one_over_root_d_k_even_for_d_k_1():
    # d_k = 1: the default scale is 1 (a scale of 1 / sqrt(max(d_k, 2)) survived mutmut).
    q, k, v = make(1, 1, 1, 20, 20, 1, 4, seed=5)
    q, k = 3 * q, 3 * k  # scores large enough that a scale of 0.71 shows
    got = flash_attention(q, k, v, block_m=16, block_n=16)
    torch.testing.assert_close(got, sdpa(q, k, v), atol=ATOL, rtol=0)
    assert (got - sdpa(q, k, v, scale=2**-0.5)).abs().max() > 0.05


def test_non_contiguous_inputs_use_their_strides():
    # (B, T, h, d) tensors viewed as (B, h, T, d): the kernel reads the strides.
    generator = torch.Generator().manual_seed(1)
    q = torch.randn(1, 40, 2, 16, generator=generator).to(DEVICE).transpose(1, 2)
    k = torch.randn(1, 40, 2, 16, generator=generator).to(DEVICE).transpose(1, 2)
    v = torch.randn(1, 16, 2, 40, generator=generator).to(DEVICE).permute(0, 2, 3, 1)
    assert not (q.is_contiguous() or k.is_contiguous() or v.is_contiguous())
    got = flash_attention(q, k, v, causal=True, block_m=16, block_n=16)
    torch.testing.assert_close(got, sdpa(q, k, v, True), atol=ATOL, rtol=0)


def test_causal_early_exit_never_reads_future_key_blocks():
    # NaN in the values of keys 48..63: the programs of queries 0..47 (block
    # 16) must never load them, so their rows stay finite and exact. (The
    # checked flash_attention would refuse the NaN; the launcher does not.)
    q, k, v = make(1, 1, 1, 64, 64, 16, 16)
    poisoned = v.clone()
    poisoned[..., 48:, :] = float("nan")
    got = _forward(q, k, poisoned, True, 0.25, 16, 16)
    assert torch.isnan(got[..., 48:, :]).all()
    torch.testing.assert_close(
        got[..., :48, :], sdpa(q, k, v, True)[..., :48, :], atol=ATOL, rtol=0
    )


def test_future_keys_do_not_change_earlier_outputs():
    q, k, v = make(1, 2, 2, 50, 50, 16, 16)
    first = flash_attention(q, k, v, causal=True, block_m=16, block_n=16)
    k2, v2 = k.clone(), v.clone()
    k2[..., 30:, :] += 5.0
    v2[..., 30:, :] -= 3.0
    second = flash_attention(q, k2, v2, causal=True, block_m=16, block_n=16)
    torch.testing.assert_close(first[..., :30, :], second[..., :30, :], atol=0, rtol=0)
    assert (first[..., 30:, :] - second[..., 30:, :]).abs().max() > 0.1


def test_no_keys_gives_zeros_and_no_queries_an_empty_output():
    q, k, v = make(1, 2, 2, 5, 0, 8, 4)
    out = flash_attention(q, k, v)
    assert out.shape == (1, 2, 5, 4) and not out.any()
    q, k, v = make(1, 2, 2, 0, 5, 8, 4)
    assert flash_attention(q, k, v, causal=True).shape == (1, 2, 0, 4)


def test_one_query_with_one_value_feature_is_attended_like_any_other():
    # The output has one element here: the no-work shortcut for empty outputs
    # must not take it for empty (`numel() == 1` survived mutmut as a plain edit).
    q, k, v = make(1, 1, 1, 1, 5, 4, 1, seed=3)
    v = v + 1.0  # an average of values near 1 is far from the shortcut's 0
    got = flash_attention(q, k, v)
    assert got.shape == (1, 1, 1, 1) and got.item() > 0.5
    torch.testing.assert_close(got, sdpa(q, k, v), atol=ATOL, rtol=0)


def test_large_scores_do_not_overflow():
    q, k, v = make(1, 1, 1, 33, 33, 16, 16)
    got = flash_attention(q * 30, k * 30, v, causal=True, block_m=16, block_n=16)
    torch.testing.assert_close(got, sdpa(q * 30, k * 30, v, True), atol=ATOL, rtol=0)


@pytest.mark.skipif(INTERPRETED, reason="float16 and bfloat16 run on a GPU only")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_on_the_gpu(dtype):  # pragma: no cover - needs a GPU
    q, k, v = make(2, 8, 2, 300, 300, 64, 64)
    got = flash_attention(q.to(dtype), k.to(dtype), v.to(dtype), causal=True)
    assert got.dtype == dtype
    torch.testing.assert_close(got.float(), sdpa(q, k, v, True), atol=2e-2, rtol=0)


# --- bad inputs --------------------------------------------------------------------


def good():
    return make(1, 2, 2, 8, 8, 16, 16)


def bad_cases():
    q, k, v = good()
    return [
        ((q.cpu().numpy(), k, v), {}, TypeError, "query must be a torch.Tensor"),
        ((q, k.int(), v), {}, TypeError, "key must be a floating-point tensor"),
        ((q[0], k, v), {}, ValueError, r"query must have 4 dimensions \(B, h, T_q, d_k\)"),
        ((q, k, v[0]), {}, ValueError, r"value must have 4 dimensions"),
        ((q, k[:, :, :5], v), {}, ValueError, "key and value must share h_kv and T_k"),
        ((q[:, :, :, :8], k, v), {}, ValueError, "query and key must share the feature size"),
        ((torch.cat([q, q]), k, v), {}, ValueError, "share the batch size B"),
        ((q[:, :1], k, v), {}, ValueError, "h_kv must divide the query heads h"),
        ((q, k.double(), v), {}, TypeError, "key has dtype torch.float64, query torch.float32"),
        ((q, k, v.to("meta")), {}, ValueError, "value is on the meta device"),
        ((q, k, v), {"causal": "yes"}, TypeError, "causal must be a bool, got str 'yes'"),
        ((q, k, v), {"scale": float("nan")}, ValueError, "scale must be finite, got nan"),
        ((q, k, v), {"scale": True}, TypeError, "scale must be a float or None, got bool"),
        ((q, k, v), {"causal": 1}, TypeError, "causal must be a bool"),
        ((q, k, v), {"scale": "0.5"}, TypeError, "scale must be a float"),
        ((q, k, v), {"block_m": 24}, ValueError, "block_m must be a power of two of at least 16"),
        ((q, k, v), {"block_n": 8}, ValueError, "block_n must be a power of two of at least 16"),
        ((q, k, v), {"block_n": 0}, ValueError, "block_n must be positive"),
        ((q, k, v), {"block_m": 16.0}, TypeError, "block_m must be an int"),
    ]


@pytest.mark.parametrize("index", range(len(bad_cases())))
def test_bad_inputs_get_named_errors(index):
    args, kwargs, error, pattern = bad_cases()[index]
    with pytest.raises(error, match=pattern):
        flash_attention(*args, **kwargs)


@pytest.mark.skipif(not INTERPRETED, reason="the interpreter's dtype limit")
def test_the_interpreter_takes_float32_only():
    q, k, v = (t.double() for t in good())
    with pytest.raises(TypeError, match="under Triton's interpreter takes torch.float32"):
        flash_attention(q, k, v)


@pytest.mark.parametrize("name", ["query", "key", "value"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_input_is_named_before_the_kernel_runs(name, bad, monkeypatch):
    inputs = dict(zip(("query", "key", "value"), good(), strict=True))
    inputs[name] = inputs[name].clone()
    inputs[name][0, 1, 3, 2] = bad

    def launched(*args, **kwargs):
        raise AssertionError("the kernel ran on non-finite input")

    monkeypatch.setattr("selfattention.kernels.flash._forward", launched)
    word = "NaN" if bad != bad else "inf"
    with pytest.raises(ValueError, match=rf"{name} contains {word} \(shape \(1, 2, 8, 16\)\)"):
        flash_attention(**inputs)


def test_a_numpy_bool_flag_is_a_bool():
    q, k, v = good()
    torch.testing.assert_close(
        flash_attention(q, k, v, causal=np.bool_(True), block_m=16, block_n=16),
        sdpa(q, k, v, True),
        atol=ATOL,
        rtol=0,
    )


def test_overflowing_scores_raise_instead_of_nan():
    q, k, v = good()
    with pytest.raises(ValueError, match=r"the output is not finite \(scores or values too large"):
        flash_attention(q, k, v, scale=1e38)


def test_huge_values_are_named_too():
    # Finite values near float32's limit: the running output overflows before
    # the division by the sum, and the message does not blame the scores alone.
    q, k, v = good()
    with pytest.raises(ValueError, match="scores or values too large"):
        flash_attention(q, k, v * 1e38)


# --- what the kernel loads ---------------------------------------------------------


def block_counts(t_q, t_k, block_m, block_n, causal):
    """Per program: (key blocks loaded, blocks masked), from the kernel's debugging counters."""
    q, k, v = make(1, 1, 1, t_q, t_k, 16, 16)
    programs = -(-t_q // block_m)
    stats = torch.zeros(programs, 2, dtype=torch.int32, device=DEVICE)
    out, _ = _forward_with_lse(q, k, v, causal, 0.25, block_m, block_n, stats=stats)
    torch.testing.assert_close(out, sdpa(q, k, v, causal, 0.25), atol=ATOL, rtol=0)
    return stats.cpu().tolist()


def expected_counts(t_q, t_k, block_m, block_n, causal):
    rows = []
    for program in range(-(-t_q // block_m)):
        q0 = program * block_m
        end = min(q0 + block_m, t_k) if causal else t_k  # the early exit
        visible = (min(q0 + 1, t_k) if causal else t_k) // block_n  # wholly visible blocks
        loaded = -(-end // block_n)
        rows.append([loaded, loaded - visible])
    return rows


@pytest.mark.parametrize(
    ("t_q", "t_k", "block_m", "block_n", "causal"),
    [
        (64, 64, 16, 16, True),
        (64, 64, 32, 16, True),
        (40, 70, 16, 32, True),
        (70, 40, 16, 16, True),
        (50, 50, 16, 16, False),
        (48, 48, 16, 16, False),
    ],
)
def test_causal_programs_load_only_visible_blocks_and_mask_only_the_diagonal(
    t_q, t_k, block_m, block_n, causal
):
    # The kernel's counters (STATS=True, compiled out otherwise): program pid
    # loads the key blocks up to its last query (the early exit), and applies
    # a mask only to the blocks at the diagonal or past T_k; the wholly
    # visible blocks before them run without any tl.where.
    counts = block_counts(t_q, t_k, block_m, block_n, causal)
    assert counts == expected_counts(t_q, t_k, block_m, block_n, causal)
    if causal and t_q == t_k == 64 and block_m == block_n:
        assert counts == [[pid + 1, 1] for pid in range(4)]  # 10 of 16 blocks


def element_addresses(view):
    """The byte address of every element of a (possibly strided) tensor view."""
    index = np.indices(view.shape).reshape(view.dim(), -1)
    offsets = (np.array(view.stride())[:, None] * index).sum(axis=0)
    return view.data_ptr() + offsets * view.element_size()


def padded_view(shape, seed, pad=7):
    """A random tensor as a view into a larger buffer of NaN (extra rows and columns)."""
    generator = torch.Generator().manual_seed(seed)
    buffer = torch.full((*shape[:-2], shape[-2] + pad, shape[-1] + pad), float("nan"))
    view = buffer[..., : shape[-2], : shape[-1]]
    view.copy_(torch.randn(shape, generator=generator))
    return buffer.to(DEVICE), view


@pytest.mark.skipif(not INTERPRETED, reason="watches the interpreter's loads")
def test_the_kernel_reads_only_elements_of_its_inputs(monkeypatch):
    # Every input is a view into a larger buffer of NaN: the load masks (past
    # T and past d, which is padded to a power of two) must keep every read
    # inside the view's own elements. The interpreter's loads are recorded and
    # each address that falls inside a buffer must be one of the view's.
    from triton.runtime.interpreter import InterpreterBuilder

    loads = []
    original = InterpreterBuilder.create_masked_load

    def recording(self, ptrs, mask, other, cache_policy, is_volatile):
        loads.append(ptrs.data[mask.data].astype(np.int64).ravel())
        return original(self, ptrs, mask, other, cache_policy, is_volatile)

    monkeypatch.setattr(InterpreterBuilder, "create_masked_load", recording)
    shapes = {"query": (1, 2, 37, 20), "key": (1, 1, 29, 20), "value": (1, 1, 29, 12)}
    buffers, views = {}, {}
    for seed, (name, shape) in enumerate(shapes.items()):
        buffers[name], views[name] = padded_view(shape, seed)
    for causal in (False, True):
        loads.clear()
        got = flash_attention(**views, causal=causal, block_m=16, block_n=16)
        torch.testing.assert_close(
            got, sdpa(*(t.contiguous() for t in views.values()), causal), atol=ATOL, rtol=0
        )
        read = np.concatenate(loads)
        for name, buffer in buffers.items():
            start = buffer.data_ptr()
            inside = read[(read >= start) & (read < start + buffer.numel() * 4)]
            assert inside.size > 0, name
            stray = np.setdiff1d(inside, element_addresses(views[name]))
            assert stray.size == 0, f"{name}: {stray.size} reads outside its elements"
