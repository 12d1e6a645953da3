"""Mutations of chapter 9: each breaks one claim; the named checks must catch it."""

# ruff: noqa: E501  (each entry quotes whole lines of code)

CHAPTER = "chapters/09_multi_head_attention.ipynb"
CH10 = "chapters/10_masked_and_cross_attention.ipynb"
MULTI_HEAD = "src/selfattention/layers/multi_head.py"
ATTENTION = "src/selfattention/layers/attention_torch.py"
BIAS_TEST = "tests/test_torch_modules.py::test_mha_from_torch_maps_random_biases_in_order"

MUTATIONS = [
    {
        "id": "split-heads-bare-view",
        "claim": "Split with view(B, T, h, d_k).transpose(1, 2); a bare view(B, h, T, d_k) runs but each head holds a run of the token stream",
        "file": ATTENTION,
        "old": "return x.view(batch, length, num_heads, width // num_heads).transpose(1, 2)",
        "new": "return x.view(batch, num_heads, length, width // num_heads)",
        "caught_by": [
            "tests/test_part2_package.py::test_head_helpers_are_the_ones_the_modules_and_checkers_use"
        ],
        "sample": True,
    },
    {
        "id": "package-split-bare-view-in-chapter",
        "claim": "head r = columns r*d_k .. (r+1)*d_k - 1 of every token (the package's split_heads)",
        "file": ATTENTION,
        "old": "return x.view(batch, length, num_heads, width // num_heads).transpose(1, 2)",
        "new": "return x.view(batch, num_heads, length, width // num_heads)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "your-split-bare-view",
        "claim": "MyMultiHeadAttention, split by view then transpose, equals the package and nn.MultiheadAttention",
        "file": CHAPTER,
        "old": "return t.view(batch, length, self.h, self.d_k).transpose(1, 2)",
        "new": "return t.view(batch, self.h, length, self.d_k)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "your-merge-without-transpose",
        "claim": "the merge is the split backwards: transpose(1, 2), then reshape, is the concatenation [head_0, ..., head_{h-1}]",
        "file": CHAPTER,
        "old": "concat = heads_out.transpose(1, 2).reshape(\n            batch, length, self.h * self.d_k)",
        "new": "concat = heads_out.reshape(\n            batch, length, self.h * self.d_k)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "scale-by-d-model",
        "claim": "each head divides its scores by sqrt(d_k), its own width, not sqrt(d_model)",
        "file": CHAPTER,
        "old": "    weights = torch.softmax(scores / math.sqrt(d_k), dim=-1)  # (B, h, T, T)",
        "new": "    weights = torch.softmax(scores / math.sqrt(d_model), dim=-1)  # (B, h, T, T)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "flops-not-halved",
        "claim": "h heads cost the same multiply-adds as one wide head, 4 T d_model^2 + 2 T^2 d_model (counted)",
        "file": "src/selfattention/book/measure.py",
        "old": "return int(counter.get_total_flops()) // 2",
        "new": "return int(counter.get_total_flops())",
        "caught_by": [CHAPTER],
    },
    {
        "id": "projections-ignore-bias-flag",
        "claim": "the 4096-wide layer without biases has 4 d_model^2 parameters; eight key/value heads save 37.5%",
        "file": MULTI_HEAD,
        "old": "self.q_proj = nn.Linear(d_model, d_model, bias=bias)",
        "new": "self.q_proj = nn.Linear(d_model, d_model, bias=True)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "from-torch-bias-chunks-reversed",
        "claim": "from_torch gives nn.MultiheadAttention's outputs and per-head weights (random biases: q, k, v chunks in order)",
        "file": MULTI_HEAD,
        "old": "module.in_proj_bias.chunk(3, dim=0),",
        "new": "module.in_proj_bias.chunk(3, dim=0)[::-1],",
        "caught_by": [CHAPTER, CH10, BIAS_TEST],
    },
    {
        "id": "from-torch-out-proj-bias-dropped",
        "claim": "from_torch copies every parameter, out_proj's bias included (random biases)",
        "file": MULTI_HEAD,
        "old": "copy.out_proj.bias.copy_(module.out_proj.bias)",
        "new": "copy.out_proj.bias.zero_()",
        "caught_by": [CHAPTER, BIAS_TEST],
    },
    {
        "id": "from-torch-accepts-sequence-first",
        "claim": "layers that cannot be mirrored (batch_first=False) are refused with a ValueError",
        "file": MULTI_HEAD,
        "old": "if not module.batch_first:",
        "new": "if False and not module.batch_first:",
        "caught_by": [CHAPTER],
    },
    {
        "id": "default-weights-per-head",
        "claim": "PyTorch's default average_attn_weights=True returns the mean over heads",
        "file": CHAPTER,
        "old": "_, w_default = torch_mha(x, x, x)  # default: averaged, (B, T, T)",
        "new": "_, w_default = torch_mha(x, x, x, average_attn_weights=False)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "gqa-tiled-not-interleaved",
        "claim": "key/value heads are shared out as repeat_interleave and match SDPA's enable_gqa=True",
        "file": ATTENTION,
        "old": "return kv if groups == 1 else kv.repeat_interleave(groups, dim=1)",
        "new": "return kv if groups == 1 else kv.repeat(1, groups, 1, 1)",
        "caught_by": [CHAPTER, "tests/test_part2_package.py::test_gqa_matches_sdpa_enable_gqa"],
    },
    {
        "id": "every-head-reads-key-head-0",
        "claim": "h_kv = h is plain multi-head attention: query head r reads its own key head r (checked by behaviour)",
        "file": MULTI_HEAD,
        "old": "k_heads = _expand_kv_heads(k, self.num_heads)  # (B, h, T_k, head_dim)",
        "new": "k_heads = _expand_kv_heads(k[:, :1], self.num_heads)  # (B, h, T_k, head_dim)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "interactive-heads-transposed",
        "claim": "the interactive figure shows each head's weights, query rows over keys (the exported data checked)",
        "file": CHAPTER,
        "old": '"tokens": tokens, "heads": weights64[0],     # (h, T, T)',
        "new": '"tokens": tokens, "heads": weights64[0].mT,  # (h, T, T)',
        "caught_by": [CHAPTER],
    },
    {
        "id": "cache-in-float32",
        "claim": "bfloat16, 2 bytes per number: the cache of h_kv heads holds 2 B h_kv T d_k e bytes",
        "file": CHAPTER,
        "old": "half = torch.bfloat16                             # 16 bits a number",
        "new": "half = torch.float32                              # 16 bits a number",
        "caught_by": [CHAPTER],
    },
    {
        "id": "cache-counts-keys-only",
        "claim": "cache bytes = 2 L B h_kv T d_k e (CacheConfig): a key and a value per token and key/value head",
        "file": "src/selfattention/layers/cache_sizes.py",
        "old": "return 2 * self.num_kv_heads * self.head_dim",
        "new": "return self.num_kv_heads * self.head_dim",
        "caught_by": [CHAPTER, "tests/test_cache_sizes.py"],
    },
    {
        "id": "exercise-split-heads-bare-view",
        "claim": "exercise 1: check_split_heads rejects a bare view (the reference solution made wrong)",
        "file": CHAPTER,
        "old": "    return x.view(batch, length, num_heads, d_k).transpose(1, 2)",
        "new": "    return x.view(batch, num_heads, length, d_k)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "exercise-expand-kv-heads-tiled",
        "claim": "exercise 2: check_expand_kv_heads rejects kv.repeat (the reference solution made wrong)",
        "file": CHAPTER,
        "old": "    return kv.repeat_interleave(groups, dim=1)   # (B, num_heads, T, d_k)",
        "new": "    return kv.repeat(1, groups, 1, 1)   # (B, num_heads, T, d_k)",
        "caught_by": [CHAPTER],
    },
]
