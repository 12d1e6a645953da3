"""Mutations of chapter 16: each breaks one claim; the named checks must catch it.

Mutations of the package's kernel (src/selfattention/kernels/) are in
chapter 17's catalogue; the chapter's own kernels and checks are here.
"""

NB = "chapters/16_flash_attention_kernel.ipynb"

MUTATIONS = [
    {
        "id": "causal-blocks-rounded-down",
        "claim": "ceil(min((pid + 1) b_q, T_k) / b_k) blocks",
        "file": "src/selfattention/exercises/ch16.py",
        "old": "    return -(-end // block_n)",
        "new": "    return end // block_n",
        "caught_by": [
            "tests/test_ch16.py::test_causal_key_blocks_reference_counts_the_blocks_with_a_visible_key"
        ],
        "sample": True,
    },
    {
        "id": "sram-bandwidth-typo",
        "claim": "roughly ten times faster by the FlashAttention paper's estimate",
        "file": NB,
        "old": '"SRAM": (108 * 192 * KB, 19 * TB)',
        "new": '"SRAM": (108 * 192 * KB, 1.9 * TB)',
        "caught_by": [NB],
    },
    {
        "id": "masked-lanes-write",
        "claim": "the masked lanes write nothing",
        "file": NB,
        "old": "    tl.store(Y + offsets, 2 * x, mask=inside)",
        "new": "    tl.store(Y + offsets, 2 * x)",
        "caught_by": [NB],
    },
    {
        "id": "padding-keys-not-masked",
        "claim": "the keys past T_k get a score of minus infinity",
        "file": NB,
        "old": '    s = tl.where(j[None, :] < T_k, s, float("-inf"))         # padding keys',
        "new": "    s = s                                                    # padding keys",
        "caught_by": [NB],
    },
    {
        "id": "online-softmax-without-rescaling",
        "claim": "the factor e^(m - m') re-expresses what was summed under the old maximum",
        "file": NB,
        "old": '        o = alpha[:, None] * o + tl.dot(p, v, input_precision="ieee")',
        "new": '        o = o + tl.dot(p, v, input_precision="ieee")',
        "count": 2,
        "caught_by": [NB],
    },
    {
        "id": "no-early-exit",
        "claim": "every key block after that lies wholly in the future and is never loaded",
        "file": NB,
        "old": "        end = tl.minimum((tl.program_id(0) + 1) * BLOCK_M, T_k)",
        "new": "        end = T_k",
        "caught_by": [NB],
    },
    {
        "id": "causal-mask-hides-the-diagonal",
        "claim": "inside the blocks that remain, the mask j <= i hides the future keys",
        "file": NB,
        "old": "visible = visible & (j[None, :] <= i[:, None])   # j <= i",
        "new": "visible = visible & (j[None, :] < i[:, None])    # j <= i",
        "caught_by": [NB],
    },
    {
        "id": "loop-counter-counts-blocks",
        "claim": "the kernel records how many keys the blocks it loaded held",
        "file": NB,
        "old": "        keys += tl.sum((j < T_k).to(tl.int32))",
        "new": "        keys += BLOCK_N",
        "caught_by": [NB],
    },
    {
        "id": "keys-loaded-twice",
        "claim": "every one of its programs reads all T keys and values",
        "file": NB,
        "old": "        blocks += 1\n",
        "new": (
            "        k_t = tl.load(K + j[None, :] * D + l[:, None],\n"
            "                      mask=j[None, :] < T_k, other=0.0)\n"
            "        blocks += 1\n"
        ),
        "caught_by": [NB],
    },
    {
        "id": "counter-counts-masked-lanes",
        "claim": "the bytes of the lanes that the mask lets through",
        "file": NB,
        "old": "            self.loads.append(pointers.data[mask.data])  # (lanes,) addresses",
        "new": "            self.loads.append(pointers.data.ravel())  # (lanes,) addresses",
        "caught_by": [NB],
    },
    {
        "id": "plain-intensity-without-the-six",
        "claim": "plain attention stays at 21 FLOP per byte whatever the sequence length",
        "file": NB,
        "old": "plain_intensity = 2 * d / (3 * e)",
        "new": "plain_intensity = 2 * d / e",
        "caught_by": [NB],
    },
    {
        "id": "decoding-mask-top-left",
        "claim": "a chunk of new tokens must see the keys j <= i + T_k - T_q (bottom-right)",
        "file": NB,
        "old": "bottom_right = torch.ones(4, 50, dtype=torch.bool).tril(50 - 4)  # (4, 50)",
        "new": "bottom_right = torch.ones(4, 50, dtype=torch.bool).tril(0)  # (4, 50)",
        "caught_by": [NB],
    },
    {
        "id": "exercise-1-forgets-m-and-z",
        "claim": "and m, z 8 b_q bytes ... 97 KiB",
        "file": NB,
        "old": "    float32 = 4 * (b_q * b_k + b_q * d + 2 * b_q)   # scores, o, m and z",
        "new": "    float32 = 4 * (b_q * b_k + b_q * d)             # scores, o, m and z",
        "caught_by": [NB],
    },
    {
        "id": "exercise-2-repeat-layout",
        "claim": "g = r mod h_kv is the layout of repeat, which the checker catches",
        "file": NB,
        "old": "    g = r // (num_heads // num_kv_heads)              # key/value head",
        "new": "    g = r % num_kv_heads                              # key/value head",
        "caught_by": [NB],
    },
    {
        "id": "exercise-3-rounds-down",
        "claim": "rounding down drops the last, partial block",
        "file": NB,
        "old": "    return -(-end // block_n)                  # ceil(end / block_n)",
        "new": "    return end // block_n                      # ceil(end / block_n)",
        "caught_by": [NB],
    },
    {
        "id": "capacity-registers-for-shared-memory",
        "claim": "Each bar carries its value (21.2 and 30.8 MB of SRAM)",
        "file": NB,
        "old": '"SRAM": (132 * 228 * KB, None)',
        "new": '"SRAM": (132 * 256 * KB, None)',
        "caught_by": [NB],
    },
    {
        "id": "tiling-loop-sum-not-rescaled",
        "claim": "z and o are rescaled by e^(m - m') before the new block's terms are added",
        "file": NB,
        "old": "    z_run = alpha * z_run + p_block.sum().item()",
        "new": "    z_run = z_run + p_block.sum().item()",
        "caught_by": [NB],
    },
    {
        "id": "early-exit-grid-off-by-one",
        "claim": "Program pid loads pid + 1 blocks (the numbers on the right): 36 of 64",
        "file": NB,
        "old": "    end = min((pid + 1) * block, T)",
        "new": "    end = min(pid * block, T)",
        "caught_by": [NB],
    },
]
