"""Compile the package's Triton kernels for a GPU without one (run by tests/test_kernels.py).

    python tests/compile_kernels.py    # prints one JSON line per kernel

For each target (sm_90: H100/H200; sm_80: A100), dtype and head width d it
builds the kernels with the launch settings ``flash_attention`` would use
(``_default_blocks``, ``_launch_options``) and reports:

- ``shared``: the shared memory the kernel needs, in bytes, from Triton's
  own allocation pass (the ``ttg.shared`` attribute that ``triton.compile``
  copies into the compiled kernel's metadata, and that the launcher compares
  with the GPU's limit before raising ``OutOfResources``);
- ``tensor_cores``: whether the matrix products use the tensor cores
  (an ``nvidia_mma`` layout, or Hopper's ``warp_group_dot``);
- with ``full``, whether the whole pipeline, down to ``ptxas`` (shipped in
  Triton's wheel), produces a cubin, and the shared memory in its metadata.

Compiling a float32 kernel down to a cubin takes about a minute (its
products become thousands of scalar multiply-adds), so the full pipeline
runs for bfloat16 at d = 128 on sm_90 only (about 8 s for the three kernels
with a cold Triton cache; sm_80 would add as much to every ``make test``);
the others stop after shared-memory allocation, which is where a kernel too
large for the GPU is found.
"""

from __future__ import annotations

import sys


def main() -> int:
    """Everything happens here, so that importing this file (pytest's doctest
    collection imports every module under tests/) changes nothing."""
    import json
    import os

    os.environ["TRITON_INTERPRET"] = "0"

    import torch

    torch.cuda.is_available = lambda: True  # compile as on a GPU machine; nothing runs

    import triton
    from triton._C.libtriton import ir, nvidia, passes
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import get_ptx_version_from_options
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    from selfattention.kernels import flash

    POINTER = {torch.float32: "*fp32", torch.float16: "*fp16", torch.bfloat16: "*bf16"}
    INPUTS = ("Q", "K", "V", "Out", "DOut", "DQ", "DK", "DV_")
    KERNELS = {
        "forward": flash._flash_forward_kernel,
        "dkdv": flash._flash_backward_dkdv_kernel,
        "dq": flash._flash_backward_dq_kernel,
    }

    def source(kind: str, dtype: torch.dtype, d: int) -> tuple[ASTSource, dict]:
        """The kernel with the constants and options ``flash_attention`` launches it with."""
        block_m, block_n = flash._default_blocks(d, d, dtype)
        width = flash._block_width(d)
        constants = dict(
            D=d, DV=d, BLOCK_D=width, BLOCK_DV=width, BLOCK_M=block_m, BLOCK_N=block_n,
            CAUSAL=True, PRECISION=flash._precision(dtype),
        )  # fmt: skip
        if kind == "forward":
            constants["STATS"] = False
        kernel = KERNELS[kind]
        signature = {}
        for name in kernel.arg_names:
            if name in constants:
                signature[name] = "constexpr"
            elif name in ("scale", "scale_log2"):
                signature[name] = "fp32"
            elif name in INPUTS:
                signature[name] = POINTER[dtype]
            elif name == "Stats":
                signature[name] = "*i32"
            elif name in ("Lse", "Delta"):
                signature[name] = "*fp32"
            else:
                signature[name] = "i32"
        indices = {(kernel.arg_names.index(name),): value for name, value in constants.items()}
        owned = block_n if kind == "dkdv" else block_m
        options = flash._launch_options(kind, dtype, owned, width)
        return ASTSource(fn=kernel, signature=signature, constexprs=indices), options

    def allocated(src: ASTSource, arch: int, options: dict) -> tuple[int, bool]:
        """Shared memory from Triton's allocation pass, and whether tensor cores are used."""
        target = GPUTarget("cuda", arch, 32)
        backend = make_backend(target)
        parsed = backend.parse_options(options)
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        codegen = backend.get_codegen_implementation(parsed)
        module = src.make_ir(target, parsed, codegen, backend.get_module_map(), context)
        stages: dict = {}
        backend.add_stages(stages, parsed, src.language)
        metadata: dict = {}
        module = stages["ttir"](module, metadata)
        module = stages["ttgir"](module, metadata)
        text = str(module)
        tensor_cores = "nvidia_mma" in text or "warp_group_dot" in text
        # The first passes of the nvidia backend's make_llir, up to the allocation.
        pm = ir.pass_manager(module.context)
        passes.ttgpuir.add_combine_tensor_select_and_if(pm)
        passes.ttgpuir.add_allocate_warp_groups(pm, False)
        passes.convert.add_scf_to_cf(pm)
        passes.gluon.add_inliner(pm)
        ptx_version = get_ptx_version_from_options(parsed, arch)
        nvidia.passes.ttgpuir.add_allocate_shared_memory_nv(pm, arch, ptx_version)
        pm.run(module, "allocate")
        return module.get_int_attr("ttg.shared"), tensor_cores

    def compile_all() -> int:
        full = {(90, torch.bfloat16, 128)}
        # The widest d of each of _default_blocks' cases (the shared memory grows
        # with d at fixed blocks), and d = 8, padded to 16 for tl.dot.
        widths = {
            torch.float32: (64, 128, 256),
            torch.float16: (128, 256),
            torch.bfloat16: (8, 128, 256),
        }
        for arch in (90, 80):
            for dtype, ds in widths.items():
                for d in ds:
                    for kind in KERNELS:
                        row = dict(
                            arch=arch,
                            dtype=str(dtype),
                            d=d,
                            kind=kind,
                            blocks=flash._default_blocks(d, d, dtype),
                        )
                        src, options = source(kind, dtype, d)
                        try:
                            row["shared"], row["tensor_cores"] = allocated(src, arch, options)
                        except Exception as error:  # e.g. a tl.dot too small for the GPU
                            row["error"] = f"{type(error).__name__}: {str(error)[-300:]}"
                            print(json.dumps(row), flush=True)
                            continue
                        if (arch, dtype, d) in full:
                            compiled = triton.compile(
                                src, target=GPUTarget("cuda", arch, 32), options=options
                            )
                            row["cubin"] = "cubin" in compiled.asm
                            row["compiled_shared"] = compiled.metadata.shared
                        print(json.dumps(row), flush=True)
        return 0

    return compile_all()


if __name__ == "__main__":
    sys.exit(main())
