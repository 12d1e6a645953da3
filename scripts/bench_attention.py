"""Benchmark attention's cost: time and peak memory against the sequence length.

    python scripts/bench_attention.py            # what `make bench-attention` runs
    python scripts/bench_attention.py --quick    # T = 512..2048 only, fewer repeats
    python scripts/bench_attention.py --gpu-only # only the Triton kernel against SDPA (GPU)

Four implementations of the same attention, side by side in one process, on
inputs of shape (1, heads, T, d_head) in float32:

- ``sdpa``: PyTorch's fused ``F.scaled_dot_product_attention``;
- ``naive``: ``softmax(Q K^T / sqrt(d)) V`` written in three torch lines;
- ``mha``: the math of ``selfattention.MultiHeadAttention`` (its ``attend``
  function, which also returns the weights);
- ``chunked``: ``selfattention.chunked_attention`` (the online softmax).

Times are the minimum over several repeats after a warm-up, with the methods
interleaved (in a rotating order), so that load from other processes hits
all of them alike. They
are printed as ratios to SDPA. The achieved GFLOP/s counts 4 T^2 d per head
(two matrix products of 2 T^2 d each) and is shown as a share of a plain
2048 x 2048 matmul measured in the same run, the machine's practical limit.

Peak memory is measured for each (method, T) in a fresh Python process: the
process resets its peak resident set size (Linux ``/proc/self/clear_refs``),
notes its current size, runs the method once and reads the new peak; the
difference is the peak *extra* memory of one call, inputs excluded. Where
the reset is not available it falls back to ``resource.getrusage``'s
``ru_maxrss``, which may over-count.

With a CUDA GPU, it also times chapter 17's forward plus backward
(``_forward_with_lse`` and ``_backward``, without the input checks)
against SDPA's forward plus backward, bfloat16, T = 1024..16384, after
checking the gradients through autograd once per size; and chapter 16's Triton kernel
(``selfattention.kernels``) against SDPA on the GPU: inputs (1, 16, T,
64) in bfloat16 for T = 1024..32768, with and without the causal mask,
each time the median of ``triton.testing.do_bench`` (CUDA events), as a
ratio to SDPA's time and as achieved TFLOP/s (4 T^2 d per head, half of it
with the causal mask). It times the kernel's launch
(``selfattention.kernels.flash._forward``), without ``flash_attention``'s
input checks, whose output check waits for the GPU on every call; the
output of the checked function is compared with SDPA's once per size first.
Without a GPU that part is skipped with a note: Triton's interpreter runs the
kernel on a CPU for the tests, but timing it would time numpy, not the kernel.

A benchmark, not a test: it prints its figures and whether the chapter's
targets are met, and always exits 0 unless it crashes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from selfattention import chunked_attention
from selfattention.layers.attention_torch import attend

METHODS = ("sdpa", "naive", "mha", "chunked")
MIB = 2**20


def naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d)) V, holding the (T, T) scores and weights."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (1, h, T, T)
    return torch.softmax(scores, dim=-1) @ v  # (1, h, T, d)


def implementation(name: str, block_size: int | None) -> Callable[..., torch.Tensor]:
    if name == "sdpa":
        return F.scaled_dot_product_attention
    if name == "naive":
        return naive
    if name == "mha":
        return lambda q, k, v: attend(q, k, v)[0]
    if name == "chunked":
        if block_size is None:
            return chunked_attention
        return lambda q, k, v: chunked_attention(q, k, v, block_size=block_size)
    raise ValueError(f"unknown method {name!r}")


def inputs(length: int, heads: int, d_head: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(1, heads, length, d_head, generator=generator) for _ in range(3))


def attention_flops(length: int, heads: int, d_head: int) -> float:
    """Q K^T and A V: 2 T^2 d multiply-adds counted as flops each, per head."""
    return 4.0 * length * length * d_head * heads


def matmul_gflops(repeats: int) -> float:
    """The best GFLOP/s of a plain float32 2048 x 2048 matrix product."""
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm-up
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2.0 * n**3 / best / 1e9


def time_methods(
    methods: dict[str, Callable[..., torch.Tensor]],
    args: tuple[torch.Tensor, ...],
    repeats: int,
    budget_s: float,
) -> dict[str, float]:
    """Minimum seconds per call of each method, the methods interleaved."""
    for fn in methods.values():
        fn(*args)  # warm-up
    best = {name: math.inf for name in methods}
    names = list(methods)
    started = time.perf_counter()
    for repeat in range(repeats):
        # Rotate the order, so that no method always runs right after the
        # memory-hungry naive one (whose freed gigabytes leave cold caches).
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            fn = methods[name]
            start = time.perf_counter()
            fn(*args)
            best[name] = min(best[name], time.perf_counter() - start)
        if repeat >= 2 and time.perf_counter() - started > budget_s:
            break  # at least three repeats, then stop when over budget
    return best


# --- peak memory, one fresh process per point ----------------------------------


def _rss_bytes(field: str) -> int | None:
    """VmRSS or VmHWM of this process in bytes, from /proc (Linux), else None."""
    try:
        for line in pathlib.Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    try:
        pathlib.Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def memory_worker(
    method: str, length: int, heads: int, d_head: int, block_size: int | None
) -> None:
    """Run one call of ``method`` and print its peak extra memory as JSON."""
    fn = implementation(method, block_size)
    q, k, v = inputs(length, heads, d_head)
    fn(*inputs(64, heads, d_head))  # load the kernels on a tiny input first
    with torch.no_grad():
        if _reset_peak() and _rss_bytes("VmRSS") is not None:
            before = _rss_bytes("VmRSS")
            out = fn(q, k, v)
            peak = _rss_bytes("VmHWM")
            how = "VmHWM"
        else:  # pragma: no cover - non-Linux fallback
            scale = 1 if sys.platform == "darwin" else 1024
            before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
            out = fn(q, k, v)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
            how = "ru_maxrss"
    del out
    print(json.dumps({"extra_bytes": max(0, peak - before), "how": how}))


def measure_memory(
    method: str, length: int, heads: int, d_head: int, block_size: int | None
) -> tuple[int, str]:
    command = [
        sys.executable,
        __file__,
        "--memory-worker",
        method,
        str(length),
        "--heads",
        str(heads),
        "--d-head",
        str(d_head),
    ]
    if block_size is not None:
        command += ["--block-size", str(block_size)]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    record = json.loads(result.stdout.strip().splitlines()[-1])
    return record["extra_bytes"], record["how"]


# --- chapter 16's Triton kernel on a GPU ----------------------------------------

KERNEL_SIZES = [1024, 2048, 4096, 8192, 16384, 32768]


def kernel_benchmark(sizes: list[int], heads: int = 16, d_head: int = 64) -> None:
    """Time the Triton kernel against SDPA on the GPU, bf16, (1, heads, T, d_head)."""
    if not torch.cuda.is_available():
        print(
            "\nTriton kernel (chapter 16): no CUDA GPU here, skipped (the interpreter "
            "runs it on a CPU for the tests; its time would be numpy's, not the kernel's)"
        )
        return
    # Import before anything else imports triton (selfattention.kernels' rule).
    from selfattention.kernels import INTERPRETED, flash_attention
    from selfattention.kernels.flash import _forward

    if INTERPRETED:
        print("\nTriton kernel: TRITON_INTERPRET=1 is set, so nothing to time; skipped")
        return
    from triton.testing import do_bench

    name = torch.cuda.get_device_name()
    print(
        f"\nTriton kernel (chapter 16) against SDPA on {name}: (1, {heads}, T, {d_head}) "
        "bfloat16, median of triton.testing.do_bench"
    )
    print(
        f"{'T':>6} {'causal':>6} {'SDPA ms':>9} {'kernel ms':>10} {'kernel/SDPA':>12} "
        f"{'SDPA TFLOP/s':>13} {'kernel TFLOP/s':>15}"
    )
    ratios: dict[tuple[int, bool], float] = {}
    generator = torch.Generator(device="cuda").manual_seed(0)
    scale = 1.0 / math.sqrt(d_head)
    for length in sizes:
        q, k, v = (
            torch.randn(1, heads, length, d_head, device="cuda", generator=generator).to(
                torch.bfloat16
            )
            for _ in range(3)
        )
        for causal in (False, True):
            with torch.no_grad():
                reference = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                error = (flash_attention(q, k, v, causal=causal) - reference).abs().max().item()
            assert error < 3e-2, f"the kernel differs from SDPA by {error:.2e} at T = {length}"
            sdpa_ms = do_bench(
                lambda q=q, k=k, v=v, c=causal: F.scaled_dot_product_attention(
                    q, k, v, is_causal=c
                ),
                return_mode="median",
            )
            kernel_ms = do_bench(
                lambda q=q, k=k, v=v, c=causal: _forward(q, k, v, c, scale, 128, 64),
                return_mode="median",
            )
            flop = attention_flops(length, heads, d_head) / (2 if causal else 1)
            ratios[(length, causal)] = kernel_ms / sdpa_ms
            print(
                f"{length:>6} {causal!s:>6} {sdpa_ms:>9.3f} {kernel_ms:>10.3f} "
                f"{kernel_ms / sdpa_ms:>11.2f}x {flop / sdpa_ms / 1e9:>13.0f} "
                f"{flop / kernel_ms / 1e9:>15.0f}",
                flush=True,
            )
        del q, k, v
    long = [ratio for (length, _), ratio in ratios.items() if length >= 4096]
    if long:
        worst = max(long)
        verdict = "met" if worst <= 1.3 else f"MISSED by {100 * (worst / 1.3 - 1):.0f}%"
        print(f"  kernel within 1.3x of SDPA's time at T >= 4096: worst {worst:.2f}x, {verdict}")


BACKWARD_SIZES = [1024, 2048, 4096, 8192, 16384]


def backward_benchmark(sizes: list[int], heads: int = 16, d_head: int = 64) -> None:
    """Time forward plus backward of the Triton kernels against SDPA's, bf16, on the GPU."""
    if not torch.cuda.is_available():
        print(
            "\nTriton forward + backward (chapter 17): no CUDA GPU here, skipped (the "
            "interpreter runs the kernels on a CPU for the tests; timing it would time numpy)"
        )
        return
    from selfattention.kernels import INTERPRETED, flash_attention
    from selfattention.kernels.flash import _backward, _default_blocks, _forward_with_lse

    if INTERPRETED:
        print("\nTriton forward + backward: TRITON_INTERPRET=1 is set; skipped")
        return
    from triton.testing import do_bench

    name = torch.cuda.get_device_name()
    block_m, block_n = _default_blocks(d_head, d_head, torch.bfloat16)
    print(
        f"\nTriton forward + backward (chapter 17) against SDPA's on {name}: "
        f"(1, {heads}, T, {d_head}) bfloat16, median of triton.testing.do_bench"
    )
    print(f"{'T':>6} {'causal':>6} {'SDPA ms':>9} {'kernels ms':>11} {'kernels/SDPA':>13}")
    ratios: dict[tuple[int, bool], float] = {}
    generator = torch.Generator(device="cuda").manual_seed(0)
    scale = 1.0 / math.sqrt(d_head)
    for length in sizes:
        q, k, v, d_out = (
            torch.randn(1, heads, length, d_head, device="cuda", generator=generator).to(
                torch.bfloat16
            )
            for _ in range(4)
        )
        for causal in (False, True):
            # Checked once through autograd: the kernels' gradients against SDPA's.
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            refs = [t.clone().requires_grad_() for t in (q, k, v)]
            flash_attention(*leaves, causal=causal).backward(d_out)
            F.scaled_dot_product_attention(*refs, is_causal=causal).backward(d_out)
            for mine, theirs in zip(leaves, refs, strict=True):
                error = (mine.grad.float() - theirs.grad.float()).abs().max().item()
                scale_of = theirs.grad.float().abs().max().item()
                assert error < 5e-2 * scale_of, f"gradients differ by {error:.2e} at T = {length}"

            def kernels(c=causal, q=q, k=k, v=v, grad=d_out) -> None:
                out, lse = _forward_with_lse(q, k, v, c, scale, block_m, block_n)
                _backward(q, k, v, out, lse, grad, c, scale, block_m, block_n)

            def sdpa(c=causal, leaves=refs, grad=d_out) -> None:
                F.scaled_dot_product_attention(*leaves, is_causal=c).backward(grad)

            sdpa_ms = do_bench(sdpa, grad_to_none=refs, return_mode="median")
            kernel_ms = do_bench(kernels, return_mode="median")
            ratios[(length, causal)] = kernel_ms / sdpa_ms
            print(
                f"{length:>6} {causal!s:>6} {sdpa_ms:>9.3f} {kernel_ms:>11.3f} "
                f"{kernel_ms / sdpa_ms:>12.2f}x",
                flush=True,
            )
        del q, k, v, d_out
    long = [ratio for (length, _), ratio in ratios.items() if length >= 4096]
    if long:
        worst = max(long)
        verdict = "met" if worst <= 1.5 else f"MISSED by {100 * (worst / 1.5 - 1):.0f}%"
        print(
            f"  forward + backward within 1.5x of SDPA's at T >= 4096: worst {worst:.2f}x, "
            f"{verdict}"
        )


# --- the report ------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="T = 512..2048 and fewer repeats")
    parser.add_argument("--sizes", type=int, nargs="+", help="sequence lengths to time")
    parser.add_argument(
        "--memory-sizes", type=int, nargs="+", help="sequence lengths for the memory table"
    )
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument(
        "--block-size", type=int, default=None, help="chunked_attention's block_size"
    )
    parser.add_argument(
        "--block-sweep",
        type=int,
        nargs="*",
        default=None,
        help="block sizes to compare at T = 4096 (default 64 128 256 512 1024)",
    )
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument(
        "--gpu-only", action="store_true", help="only chapter 16's Triton kernel against SDPA"
    )
    parser.add_argument(
        "--kernel-sizes", type=int, nargs="+", help="sequence lengths for the Triton kernel (GPU)"
    )
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--memory-worker", nargs=2, metavar=("METHOD", "T"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    if args.memory_worker:
        method, length = args.memory_worker
        memory_worker(method, int(length), args.heads, args.d_head, args.block_size)
        return 0

    kernel_sizes = args.kernel_sizes or ([1024, 4096] if args.quick else KERNEL_SIZES)
    if args.gpu_only:
        kernel_benchmark(kernel_sizes)
        backward_benchmark([t for t in kernel_sizes if t <= 16384])
        return 0

    quick_sizes = [512, 1024, 2048]
    sizes = args.sizes or (quick_sizes if args.quick else [512, 1024, 2048, 4096, 8192])
    memory_sizes = args.memory_sizes or (quick_sizes if args.quick else [1024, 2048, 4096, 8192])
    repeats = args.repeats or (3 if args.quick else 7)
    sweep = args.block_sweep if args.block_sweep is not None else [64, 128, 256, 512, 1024]
    sweep = [] if args.quick else sweep
    heads, d_head = args.heads, args.d_head

    print(
        f"torch {torch.__version__}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"torch.set_num_threads({args.threads})"
    )
    print(
        f"inputs (1, {heads}, T, {d_head}) float32; times are the minimum of up to "
        f"{repeats} interleaved repeats after a warm-up"
    )
    peak = matmul_gflops(max(repeats, 10))
    print(f"plain 2048 x 2048 float32 matmul: {peak:.0f} GFLOP/s (the practical limit)\n")

    methods = {name: implementation(name, args.block_size) for name in METHODS}
    times: dict[int, dict[str, float]] = {}
    header = f"{'T':>6} {'SDPA ms':>9}" + "".join(f" {name + '/SDPA':>13}" for name in METHODS[1:])
    header += "   " + "  ".join(f"{name:>7}" for name in METHODS) + "  (GFLOP/s as % of matmul)"
    print(header)
    with torch.no_grad():
        for length in sizes:
            args_t = inputs(length, heads, d_head)
            # Cross-check once per size that all four agree before timing them.
            reference = F.scaled_dot_product_attention(*args_t)
            for name, fn in methods.items():
                error = (fn(*args_t) - reference).abs().max().item()
                assert error < 1e-4, f"{name} differs from SDPA by {error:.2e} at T = {length}"
            budget = 20.0 if length >= 8192 else 10.0
            best = time_methods(methods, args_t, repeats, budget)
            times[length] = best
            flops = attention_flops(length, heads, d_head)
            row = f"{length:>6} {best['sdpa'] * 1e3:>9.1f}"
            row += "".join(f" {best[name] / best['sdpa']:>12.2f}x" for name in METHODS[1:])
            shares = (100 * flops / best[name] / 1e9 / peak for name in METHODS)
            row += "   " + "  ".join(f"{share:>6.0f}%" for share in shares)
            print(row, flush=True)

        if sweep:
            length = 4096 if 4096 in sizes else max(sizes)
            args_t = inputs(length, heads, d_head)
            sweep_methods = {"sdpa": F.scaled_dot_product_attention}
            sweep_methods.update({f"block {b}": implementation("chunked", b) for b in sweep})
            sweep_times = time_methods(sweep_methods, args_t, repeats, 30.0)
            print(f"\nchunked_attention's block_size at T = {length} (time / SDPA; causal=False):")
            print(
                "  "
                + "  ".join(
                    f"{name}: {sweep_times[name] / sweep_times['sdpa']:.2f}x"
                    for name in sweep_methods
                    if name != "sdpa"
                )
            )

    again = matmul_gflops(max(repeats, 10))
    print(
        f"(the plain matmul again after the timings: {again:.0f} GFLOP/s; a large change means "
        "the machine's load changed during the run)"
    )

    print("\npeak extra memory of one call, each point in a fresh process (MiB)")
    memory: dict[str, dict[int, int]] = {"naive": {}, "chunked": {}, "sdpa": {}}
    how = ""
    print(f"{'T':>6} {'naive':>9} {'chunked':>9} {'sdpa':>9} {'one T x T float32':>18}")
    for length in memory_sizes:
        for method in memory:
            memory[method][length], how = measure_memory(
                method, length, heads, d_head, args.block_size
            )
        square = length * length * 4
        naive_mib, chunked_mib = memory["naive"][length] / MIB, memory["chunked"][length] / MIB
        sdpa_mib = memory["sdpa"][length] / MIB
        print(
            f"{length:>6} {naive_mib:>9.1f} {chunked_mib:>9.1f} {sdpa_mib:>9.1f} "
            f"{square / MIB:>18.1f}",
            flush=True,
        )
    print(f"(measured with {how}; the inputs themselves are not counted)")

    print("\ntargets")
    if 4096 in times:
        ratio = times[4096]["chunked"] / times[4096]["sdpa"]
        faster = times[4096]["chunked"] < times[4096]["naive"]
        verdict = "met" if ratio <= 1.5 else f"MISSED by {100 * (ratio / 1.5 - 1):.0f}%"
        print(f"  chunked within 1.5x of SDPA at T = 4096: {ratio:.2f}x, {verdict}")
        print(
            f"  chunked faster than naive at T = 4096: {'met' if faster else 'MISSED'} "
            f"({times[4096]['naive'] / times[4096]['chunked']:.2f}x)"
        )
    if 2048 in memory["chunked"] and 8192 in memory["chunked"]:
        low, high = memory["chunked"][2048], memory["chunked"][8192]
        growth = high / max(low, 1)
        print(
            f"  chunked memory growth from T = 2048 to 8192: {growth:.1f}x "
            f"(linear 4x, quadratic 16x): {'met' if growth < 8 else 'MISSED'}"
        )
        quarter = 8192 * 8192 * 4 / 4
        print(
            f"  chunked at T = 8192: {high / MIB:.1f} MiB, under a quarter of one T x T "
            f"float32 matrix ({quarter / MIB:.0f} MiB): {'met' if high < quarter else 'MISSED'}"
        )
        naive_growth = memory["naive"][8192] / max(memory["naive"][2048], 1)
        print(f"  (naive grows {naive_growth:.1f}x over the same range)")
    kernel_benchmark(kernel_sizes)
    backward_benchmark([t for t in kernel_sizes if t <= 16384])
    return 0


if __name__ == "__main__":
    sys.exit(main())
