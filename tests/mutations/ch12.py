"""Mutations of chapter 12 (the cost of attention): each breaks one claim; the named checks must catch it."""

CHAPTER = "chapters/12_cost_of_attention.ipynb"

MUTATIONS = [
    {
        "id": "naive-softmax-over-queries",
        "claim": "attention written plainly ... And it is attention: the same output as PyTorch's own function",
        "file": CHAPTER,
        "old": "return torch.softmax(scores, dim=-1) @ v",
        "new": "return torch.softmax(scores, dim=-2) @ v",
        "caught_by": [CHAPTER],
    },
    {
        "id": "naive-unscaled",
        "claim": "the same output as PyTorch's own function (scaled by the square root of d_k)",
        "file": CHAPTER,
        "old": "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])",
        "new": "scores = q @ k.transpose(-2, -1)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "narrow-layer-timed-on-fewer-steps",
        "claim": "shrinks the width from 64 to 8, which cuts the multiply-adds of h_{t-1} W_h 64-fold, and ... the time falls by less than a factor of four",
        "file": CHAPTER,
        "old": "x_narrow = torch.randn(lengths[-1], narrow)    # (T, 8)",
        "new": "x_narrow = torch.randn(lengths[-1] // 16, narrow)    # (T, 8)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "recurrent-layer-quadratic",
        "claim": "Attention's time grows like T^2, the recurrent layer's like T (each fitted slope nearer its own exponent than the other's)",
        "file": CHAPTER,
        # Each step does t // 16 more small products, so the layer's time
        # grows like T^2 (fitted slope 1.7-2.1 here) while its output and
        # its memory stay as they were: only the timing check can catch it.
        "old": "        h = torch.tanh(h @ W_h + inputs[t])\n",
        "new": "        for _ in range(t // 16):\n"
        "            h @ W_h\n"
        "        h = torch.tanh(h @ W_h + inputs[t])\n",
        "caught_by": [CHAPTER],
    },
    {
        "id": "recurrent-keeps-a-copy",
        "claim": "At its peak the recurrent layer holds exactly three arrays of T x d_h numbers",
        "file": CHAPTER,
        "old": "        states.append(h)\n",
        "new": "        states.append(h.clone())\n",
        "caught_by": [CHAPTER],
    },
    {
        "id": "graph-depth-counts-one-less",
        "claim": "attention's computation graph has the same small depth, 7, for every T",
        "file": CHAPTER,
        "old": "depth[node] = 1 + max((depth[c] for c in children), default=0)",
        "new": "depth[node] = max((depth[c] for c in children), default=1)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "online-softmax-no-rescale",
        "claim": "rescales z and o by exp(m - m') whenever the maximum grows. It gives exactly the softmax",
        "file": CHAPTER,
        "old": "    rescale = np.exp(m - m_new)                      # exp(m - m')\n",
        "new": "    rescale = 1.0                                    # exp(m - m')\n",
        "caught_by": [CHAPTER],
    },
    {
        "id": "online-softmax-rescales-only-z",
        "claim": "multiplying them [the old sum and output] by exp(m - m') re-expresses them against m'",
        "file": CHAPTER,
        "old": "    o = rescale * o + p @ values[start:start + 2]    # (d_v,)\n",
        "new": "    o = o + p @ values[start:start + 2]              # (d_v,)\n",
        "caught_by": [CHAPTER],
    },
    {
        "id": "chunked-no-causal-skip",
        "claim": "with a causal mask it skips the tiles that lie wholly in the future, about half of them",
        "file": "src/selfattention/layers/chunked.py",
        "old": "k_end = min(t_k, q1) if causal else t_k",
        "new": "k_end = t_k",
        "caught_by": [CHAPTER],
    },
    {
        "id": "chunked-masks-every-tile",
        "claim": "only the tiles on the diagonal need a mask",
        "file": "src/selfattention/layers/chunked.py",
        "old": "if causal and k1 - 1 > q0:",
        "new": "if causal:",
        "caught_by": [CHAPTER],
    },
    {
        "id": "chunked-forgets-alpha",
        "claim": "chunked_attention ... the same output as F.scaled_dot_product_attention (to 1e-13 in float64)",
        "file": "src/selfattention/layers/chunked.py",
        "old": "alpha = torch.exp(m - m_new)  # (N, b_q, 1) rescales the old sum and output",
        "new": "alpha = torch.ones_like(m_new)  # (N, b_q, 1) rescales the old sum and output",
        "caught_by": [CHAPTER, "tests/test_chunked.py"],
    },
    {
        "id": "cache-counts-keys-only",
        "claim": "A KV cache costs 2 L h_kv d_k e bytes per token",
        "file": "src/selfattention/layers/cache_sizes.py",
        "old": "return 2 * self.num_kv_heads * self.head_dim",
        "new": "return self.num_kv_heads * self.head_dim",
        "caught_by": [CHAPTER, "tests/test_cache_sizes.py"],
    },
    {
        "id": "cache-counts-keys-only-unit",
        "claim": "A KV cache costs 2 L h_kv d_k e bytes per token (the unit tests alone, for make test's sample)",
        "file": "src/selfattention/layers/cache_sizes.py",
        "old": "return 2 * self.num_kv_heads * self.head_dim",
        "new": "return self.num_kv_heads * self.head_dim",
        "caught_by": ["tests/test_cache_sizes.py"],
        "sample": True,
    },
    {
        "id": "flop-counter-misses-fused-attention",
        "claim": "Decoding ... does only 2 h / (h_kv e) FLOP per byte of it (0.5 in float32 with h_kv = h, counted on the real call)",
        "file": "src/selfattention/book/measure.py",
        "old": "        sdpa_kernel(SDPBackend.MATH),\n",
        "new": "",
        "caught_by": [CHAPTER, "tests/test_measure.py"],
    },
    {
        "id": "exercise-3-forgets-to-rescale-z",
        "claim": "the most common mistake, forgetting to rescale z or o by exp(m - m'), fails the case whose scores raise the maximum",
        "file": CHAPTER,
        "old": "    z_new = rescale * z + p.sum(axis=-1)         # (T_q,)\n",
        "new": "    z_new = z + p.sum(axis=-1)                   # (T_q,)\n",
        "caught_by": [CHAPTER],
    },
    {
        "id": "exercise-3-no-max-subtraction",
        "claim": "scores near 1000 that overflow exp unless the maximum is subtracted first",
        "file": CHAPTER,
        "old": "    p = np.exp(scores - m_new[:, None])          # (T_q, b_k)\n"
        "    z_new = rescale * z + p.sum(axis=-1)         # (T_q,)\n"
        "    o_new = rescale[:, None] * o + p @ values    # (T_q, d_v)\n",
        "new": "    p = np.exp(scores)                           # (T_q, b_k)\n"
        "    z_new = z + p.sum(axis=-1)                   # (T_q,)\n"
        "    o_new = o + p @ values                       # (T_q, d_v)\n",
        "caught_by": [CHAPTER],
    },
    {
        "id": "exercise-2-tiles-off-by-one",
        "claim": "with T not a multiple of the block size, the last tile is smaller but the count is the same",
        "file": "src/selfattention/layers/chunked.py",
        "old": "k_end = min(t_k, q1) if causal else t_k",
        "new": "k_end = min(t_k, q1 + 1) if causal else t_k",
        "caught_by": [CHAPTER],
    },
]
