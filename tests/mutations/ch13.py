"""Mutations of chapter 13 (RoPE): each breaks one claim; the named checks must catch it."""

# ruff: noqa: E501 (claims and code lines are quoted whole)

NB = "chapters/13_rotary_position_embeddings.ipynb"
ROTARY = "src/selfattention/layers/rotary.py"

MUTATIONS = [
    {
        "id": "frequency-without-factor-two",
        "claim": "Pair l of the features turns by pos theta_l, theta_l = base^(-2l/d_k)",
        "file": ROTARY,
        "old": "return (base ** (-2.0 * pair / head_dim)).to(dtype)",
        "new": "return (base ** (-1.0 * pair / head_dim)).to(dtype)",
        "caught_by": [NB, "tests/test_rotary.py"],
    },
    {
        "id": "reflection-not-rotation",
        "claim": "a rotation of a 2-D vector, or the complex product (a + ib) e^(i pos theta_l)",
        "file": ROTARY,
        "old": "first = a * cos - b * sin  # (..., T, d_k/2)",
        "new": "first = a * cos + b * sin  # (..., T, d_k/2)",
        "caught_by": [NB, "tests/test_rotary.py"],
    },
    {
        "id": "angles-in-x-dtype",
        "claim": "the package computes angles in float64, so float32 queries stay exact to 1e-5 at position 1e6",
        "file": ROTARY,
        "old": 'work = torch.float32 if x.device.type == "mps" else torch.float64',
        "new": "work = x.dtype",
        "caught_by": [NB],
    },
    {
        "id": "converter-keeps-rows",
        "claim": "permute_rotary_rows reorders each head's rows so that the scores agree to 1e-12",
        "file": ROTARY,
        "old": "return grouped.transpose(1, 2).reshape(shape).clone()",
        "new": "return grouped.reshape(shape).clone()",
        "caught_by": [NB, "tests/test_rotary.py"],
    },
    {
        "id": "layout-permutation-transposed",
        "claim": "Under the half layout, feature 2l of each head must sit at index l and feature 2l+1 at l + d_k/2",
        "file": NB,
        "old": """                        "half").T                    # (d_k, d_k): q' = q P""",
        "new": """                        "half")                      # (d_k, d_k): q' = q P""",
        "caught_by": [NB],
    },
    {
        "id": "gqa-keys-converted-with-num-heads",
        "claim": "a key projection under grouped-query attention takes num_kv_heads, not num_heads",
        "file": NB,
        "old": 'for name, heads in (("q_proj", h), ("k_proj", key_heads)):',
        "new": 'for name, heads in (("q_proj", h), ("k_proj", h)):',
        "caught_by": [NB],
    },
    {
        "id": "decode-restarts-at-zero",
        "claim": "new tokens continue from the number of positions seen (cache.position)",
        "file": NB,
        "old": "start = 0 if restart else cache.position   # the bug, or the fix",
        "new": "start = 0                                   # the bug, or the fix",
        "caught_by": [NB],
        "sample": True,
    },
    {
        "id": "layer-start-is-len-cache",
        "claim": "new tokens continue from the number of positions seen (cache.position), not len(cache)",
        "file": "src/selfattention/layers/multi_head.py",
        "old": "start = 0 if cache is None else cache.position\n",
        "new": "start = 0 if cache is None else len(cache)\n",
        "caught_by": [
            "chapters/14_sliding_windows_and_latent_attention.ipynb",
            "tests/test_windows.py",
        ],
    },
    {
        "id": "position-is-len",
        "claim": "KVCache counts the positions it has seen in position; without trimming it equals len(cache)",
        "file": "src/selfattention/layers/kv_cache.py",
        "old": "        self.key, self.value = keys, values\n        self.position += new\n",
        "new": "        self.key, self.value = keys, values\n        self.position = keys.shape[-2]\n",
        "caught_by": [
            "chapters/14_sliding_windows_and_latent_attention.ipynb",
            "tests/test_windows.py",
        ],
    },
    {
        "id": "cache-stores-unrotated-keys",
        "claim": "the cache stores keys already rotated: a key is rotated once, when its token arrives",
        "file": "src/selfattention/layers/multi_head.py",
        "old": (
            '            k = _rotate(k, where[: key.shape[1]], self.rope_base, "half")'
            "  # values: not rotated\n"
            "        if cache is not None:\n"
            "            # Keys and values that are not finite must not reach the cache; say why.\n"
            '            _check_output_finite(k, self, "query, key and value", "keys")\n'
            '            _check_output_finite(v, self, "query, key and value", "values")\n'
            "            k, v = cache._extended(k, v)  # (B, h_kv, T_k, head_dim), T_k = cached + new\n"
            "        k_heads = _expand_kv_heads(k, self.num_heads)  # (B, h, T_k, head_dim)\n"
        ),
        "new": (
            "        if cache is not None:\n"
            '            _check_output_finite(k, self, "query, key and value", "keys")\n'
            '            _check_output_finite(v, self, "query, key and value", "values")\n'
            "            k, v = cache._extended(k, v)  # plain keys go to the cache\n"
            "        k_rotated = k\n"
            "        if self.rope:  # rotate every stored key again on every call\n"
            "            first = start + key.shape[1] - k.shape[-2]\n"
            "            at = torch.arange(first, first + k.shape[-2], device=query.device)\n"
            '            k_rotated = _rotate(k, at, self.rope_base, "half")\n'
            "        k_heads = _expand_kv_heads(k_rotated, self.num_heads)  # (B, h, T_k, head_dim)\n"
        ),
        "caught_by": [NB, "chapters/14_sliding_windows_and_latent_attention.ipynb"],
    },
    {
        "id": "bound-with-average-step",
        "claim": "RoFormer's long-term decay is a decaying upper bound, reached by summing by parts",
        "file": NB,
        "old": "return score, steps.abs().max() * sums, steps.abs().mean() * sums",
        "new": "return score, steps.abs().mean() * sums, steps.abs().mean() * sums",
        "caught_by": [NB],
    },
    {
        "id": "summation-by-parts-wrong-index",
        "claim": "Summing by parts: sum u_l e_l = sum_l (u_(l-1) - u_l) C_l",
        "file": NB,
        "old": "steps = u - torch.cat([u[1:], u.new_zeros(1)])",
        "new": "steps = u - torch.cat([u.new_zeros(1), u[:-1]])",
        "caught_by": [NB],
    },
    {
        "id": "unequal-windows",
        "claim": "Random pairs neither decay nor grow (the same spread at every offset, asserted with equal windows)",
        "file": NB,
        "old": "far = random_scores[:, -64:].abs().amax(dim=1)         # (N,) 449..512",
        "new": "far = random_scores[:, 256:].abs().amax(dim=1)         # (N,) 449..512",
        "caught_by": [NB],
    },
    {
        "id": "k-equals-q-without-positions",
        "claim": "a key equal to its query decays on average, from 64 at offset 0 to about 13 at 500",
        "file": NB,
        "old": """    q_at_p = rotary_embedding(q_many, torch.full((N,), p),
                              layout="interleaved")    # (N, d_k)""",
        "new": """    q_at_p = rotary_embedding(q_many,
                              layout="interleaved")    # (N, d_k)""",
        "caught_by": [NB],
    },
    {
        "id": "interpolation-factor-inverted",
        "claim": "Position interpolation scales positions by T_train / T_long",
        "file": NB,
        "old": "scale = T_train / T_long                          # 0.25, the PI factor",
        "new": "scale = T_long / T_train                          # 0.25, the PI factor",
        "caught_by": [NB],
    },
    {
        "id": "ntk-base-without-exponent",
        "claim": "NTK-aware scaling: the slowest pair's wavelength grows by exactly alpha",
        "file": NB,
        "old": "ntk_base = 10000.0 * alpha ** (d_head / (d_head - 2))",
        "new": "ntk_base = 10000.0 * alpha",
        "caught_by": [NB],
    },
    {
        "id": "values-rotated",
        "claim": "RoPE leaves the input and the values alone and rotates only queries and keys",
        "file": NB,
        "old": "    v = rotary_embedding(v_s, where) if rotate_values else v_s",
        "new": "    v = v_s",
        "caught_by": [NB],
    },
    {
        "id": "exercise-1-half-frequency",
        "claim": "check_rotary_embedding names a frequency without the factor 2",
        "file": NB,
        "old": "theta = base ** (-torch.arange(0, d, 2, dtype=f64) / d)  # (d/2,)",
        "new": "theta = base ** (-torch.arange(0, d // 2, dtype=f64) / d)  # (d/2,)",
        "caught_by": [NB],
    },
    {
        "id": "exercise-1-clockwise",
        "claim": "check_rotary_embedding names a rotation the wrong way",
        "file": NB,
        "old": "turn = torch.polar(torch.ones_like(angles), angles)  # (T, d/2)",
        "new": "turn = torch.polar(torch.ones_like(angles), -angles)  # (T, d/2)",
        "caught_by": [NB],
    },
    {
        "id": "figure-arcs-other-pair",
        "claim": "the angle between query and key (the arcs, 1.16 radians each)",
        "file": NB,
        "old": 'pairs_shown = [((3, 1), "C0"), ((6, 4), "C1")]',
        "new": 'pairs_shown = [((3, 1), "C0"), ((6, 3), "C1")]',
        "caught_by": [NB],
    },
    {
        "id": "figure-bound-with-the-average",
        "claim": "stays below a twentieth of its bound (grey)",
        "file": NB,
        "old": "bound_line = largest_step * C.abs().sum(dim=1)",
        "new": "bound_line = largest_step * C.abs().mean(dim=1)",
        "caught_by": [NB],
    },
]
