"""Mutations of chapter 17 and of selfattention.kernels: each breaks one claim; the named checks must catch it."""

K = "src/selfattention/kernels/flash.py"
NB = "chapters/17_flash_attention_backward.ipynb"
KT = "tests/test_kernels.py"
BT = "tests/test_flash_backward.py"

MUTATIONS = [
    # --- the package's forward kernel (the second read's surviving mutations) ---
    {
        "id": "kernel-no-causal-early-exit",
        "claim": "key blocks wholly in the future of a program's queries are never loaded",
        "file": K,
        "old": "        end_full = (tl.minimum(q0 + 1, T_k) // BLOCK_N) * BLOCK_N\n        end = tl.minimum(q0 + BLOCK_M, T_k)\n    else:\n        end_full = (T_k // BLOCK_N) * BLOCK_N\n        end = T_k\n    for start_n in range(0, end_full, BLOCK_N):\n        m, z, o",
        "new": "        end_full = (tl.minimum(q0 + 1, T_k) // BLOCK_N) * BLOCK_N\n        end = T_k\n    else:\n        end_full = (T_k // BLOCK_N) * BLOCK_N\n        end = T_k\n    for start_n in range(0, end_full, BLOCK_N):\n        m, z, o",
        "caught_by": [
            f"{KT}::test_causal_programs_load_only_visible_blocks_and_mask_only_the_diagonal",
            f"{KT}::test_causal_early_exit_never_reads_future_key_blocks",
        ],
    },
    {
        "id": "kernel-every-block-masked",
        "claim": "only the blocks at the diagonal are masked",
        "file": K,
        "old": "            D, DV, BLOCK_D, BLOCK_DV, False, False, PRECISION, STATS,",
        "new": "            D, DV, BLOCK_D, BLOCK_DV, CAUSAL, True, PRECISION, STATS,",
        "caught_by": [
            f"{KT}::test_causal_programs_load_only_visible_blocks_and_mask_only_the_diagonal"
        ],
    },
    {
        "id": "kernel-no-d-mask-on-q",
        "claim": "d_k is padded to a power of two with masks",
        "file": K,
        "old": "q_mask = (offs_m[:, None] < T_q) & (offs_d[None, :] < D)",
        "new": "q_mask = offs_m[:, None] < T_q",
        "caught_by": [f"{KT}::test_the_kernel_reads_only_elements_of_its_inputs"],
    },
    {
        "id": "kernel-no-d-mask-on-v",
        "claim": "d_v is padded to a power of two with masks",
        "file": K,
        "old": "v = tl.load(v_ptrs, mask=(keys[:, None] < T_k) & (offs_dv[None, :] < DV), other=0.0)",
        "new": "v = tl.load(v_ptrs, mask=keys[:, None] < T_k, other=0.0)",
        "caught_by": [f"{KT}::test_the_kernel_reads_only_elements_of_its_inputs"],
    },
    {
        "id": "kernel-block-d-without-minimum-16",
        "claim": "the inner dimension of each tl.dot must be at least 16 for 16-bit inputs",
        "file": K,
        "old": "return max(16, triton.next_power_of_2(d))",
        "new": "return triton.next_power_of_2(d)",
        "caught_by": [f"{KT}::test_every_kernel_builds_for_sm90_and_sm80_in_every_dtype"],
    },
    {
        "id": "kernel-float32-blocks-not-chosen-by-d",
        "claim": "wider heads get smaller blocks, so that every kernel fits the shared memory",
        "file": K,
        "old": "    return (32, 32) if dtype == torch.float32 else (64, 32)",
        "new": "    return 128, 64",
        "caught_by": [f"{KT}::test_every_kernel_fits_the_shared_memory_of_an_h100_and_an_a100"],
    },
    {
        "id": "kernel-float32-on-tf32",
        "claim": "float32 inputs are multiplied in full float32, with no tensor cores",
        "file": K,
        "old": 'return "ieee" if dtype == torch.float32 else "tf32"',
        "new": 'return "tf32"',
        "caught_by": [f"{KT}::test_float32_uses_exact_products_and_16_bit_the_tensor_cores"],
    },
    # --- the backward kernels ---
    {
        "id": "backward-ds-without-delta",
        "claim": "dS = P o (dP - D), with D = rowsum(dO o O)",
        "file": K,
        "old": "ds = p * (dp - delta[:, None])  # dS = P o (dP - D)",
        "new": "ds = p * dp  # dS = P o (dP - D)",
        "caught_by": [f"{BT}::test_gradients_match_float64_sdpa"],
    },
    {
        "id": "backward-dk-not-scaled",
        "claim": "the kernel's gradients equal autograd of SDPA",
        "file": K,
        "old": "dk = dk * scale  # dS was taken with respect to the scaled scores",
        "new": "dk = dk  # dS was taken with respect to the scaled scores",
        "caught_by": [f"{BT}::test_gradients_match_float64_sdpa"],
    },
    {
        "id": "backward-gqa-one-head-only",
        "claim": "GQA's key and value gradients sum over the query heads that share them",
        "file": K,
        "old": "for r in range(g * GROUP, g * GROUP + GROUP):  # the query heads of group g",
        "new": "for r in range(g * GROUP, g * GROUP + 1):  # the query heads of group g",
        "caught_by": [
            f"{BT}::test_gqa_key_and_value_gradients_sum_over_the_heads_that_share_them"
        ],
    },
    {
        "id": "backward-dkdv-no-causal-mask",
        "claim": "the backward masks the blocks at the diagonal",
        "file": K,
        "old": "p_t = tl.where(offs_n[:, None] <= queries[None, :], p_t, 0.0)",
        "new": "p_t = p_t",
        "caught_by": [f"{BT}::test_gradients_match_float64_sdpa"],
    },
    {
        "id": "backward-dkdv-starts-at-query-0",
        "claim": "the dK/dV programs skip the query blocks that see none of their keys",
        "file": K,
        "old": "start = (n0 // BLOCK_M) * BLOCK_M",
        "new": "start = 0 * n0",
        "caught_by": [f"{BT}::test_the_backward_skips_the_blocks_the_mask_hides"],
    },
    {
        "id": "backward-padded-rows-weight-one",
        "claim": "T not a multiple of the blocks",
        "file": K,
        "old": 'lse2 = tl.load(lse_head + queries, mask=rows, other=float("inf"))',
        "new": "lse2 = tl.load(lse_head + queries, mask=rows, other=0.0)",
        "caught_by": [f"{BT}::test_gradients_match_float64_sdpa"],
    },
    {
        "id": "forward-lse-in-base-2",
        "claim": "the forward kernel writes the row log-sum-exp L",
        "file": K,
        "old": "lse = (m + tl.math.log2(z)) * 0.6931471805599453  # times ln(2)",
        "new": "lse = m + tl.math.log2(z)  # times ln(2)",
        "caught_by": [
            f"{BT}::test_the_stored_log_sum_exp_is_the_rows_logsumexp",
            f"{BT}::test_gradients_match_float64_sdpa",
        ],
    },
]
