"""Mutations of chapter 5: each breaks one claim; the named checks must catch it."""

# ruff: noqa: E501  (each entry quotes whole lines of code)

CHAPTER = "chapters/05_query_key_value.ipynb"

MUTATIONS = [
    {
        "id": "full-width-svd-split",
        "claim": "W_Q = U Sigma and W_K = V, each with d_k columns, give W_Q W_K^T = M",
        "file": CHAPTER,
        "old": "W_q, W_k = U[:, :rank] * sigma[:rank], Vt[:rank].T",
        "new": "W_q, W_k = U * sigma, Vt.T",
        "caught_by": [CHAPTER],
    },
    {
        "id": "positions-not-added",
        "claim": "self-attention feeds the same position-aware embeddings X into three linear layers",
        "file": CHAPTER,
        "old": "X = looked_up + PE  # (T, d_model) = (6, 4), position-aware embeddings",
        "new": "X = looked_up  # (T, d_model) = (6, 4), position-aware embeddings",
        "caught_by": [CHAPTER],
        "sample": True,
    },
    {
        "id": "linear-weight-not-transposed",
        "claim": "nn.Linear stores its weight as (d_k, d_model); W_Q is q_proj.weight.T",
        "file": CHAPTER,
        "old": "k_proj.weight.copy_(torch.from_numpy(W_K.T))  # (d_k, d_model) = (3, 4)",
        "new": "k_proj.weight.copy_(torch.from_numpy(W_Q.T))  # (d_k, d_model) = (3, 4)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "scores-transposed",
        "claim": "S_ij = q_i . k_j: queries down, keys across",
        "file": CHAPTER,
        "old": "S = Q @ K.T  # (T, T) = (6, 6), the raw scores of the next section",
        "new": "S = K @ Q.T  # (T, T) = (6, 6), the raw scores of the next section",
        "caught_by": [CHAPTER],
    },
    {
        "id": "key-from-the-query-row",
        "claim": "'you' scores 'hi' highest, S[4, 0] = 5.916, checked by hand",
        "file": CHAPTER,
        "old": "k_j = [sum(x_j[f] * W_K[f, l] for f in range(d_model)) for l in range(d_k)]",
        "new": "k_j = [sum(x_i[f] * W_K[f, l] for f in range(d_model)) for l in range(d_k)]",
        "caught_by": [CHAPTER],
    },
    {
        "id": "shared-projection-for-keys",
        "claim": "separate query and key projections let attention be one-sided",
        "file": CHAPTER,
        "old": "S_2 = Q_2 @ K_2.T  # (11, 11)",
        "new": "S_2 = Q_2 @ Q_2.T  # (11, 11)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "shared-projection-not-shared",
        "claim": "a shared projection makes S symmetric for every input",
        "file": CHAPTER,
        "old": "K_shared = q_proj(x)  # (T, d_k): ...and keys",
        "new": "K_shared = k_proj(x)  # (T, d_k): ...and keys",
        "caught_by": [CHAPTER],
    },
    {
        "id": "pronoun-key-looks-back",
        "claim": "'animal' does not look back at 'it'",
        "file": CHAPTER,
        "old": "                 [0.0, 0.0],   # pronoun\n                 [0.0, 0.5]])  # other word          (4, d_k) = (4, 2)",
        "new": "                 [0.0, 1.0],   # pronoun\n                 [0.0, 0.5]])  # other word          (4, d_k) = (4, 2)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "symmetric-part-not-symmetric",
        "claim": "a symmetric W_QK gives symmetric scores for any input",
        "file": CHAPTER,
        "old": "M_sym = W_a @ W_a.T - W_b @ W_b.T  # (d, d)",
        "new": "M_sym = W_a @ W_b.T - W_b @ W_b.T  # (d, d)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "checker-keys-as-queries",
        "claim": "check_qkv_scores rejects S^T (K Q^T)",
        "file": CHAPTER,
        "old": "return queries @ keys.T  # (T, T)",
        "new": "return keys @ queries.T  # (T, T)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "checker-keys-for-queries",
        "claim": "check_qkv_scores rejects queries made with the key projection",
        "file": CHAPTER,
        "old": "queries = x @ w_q  # (T, d_k)",
        "new": "queries = x @ w_k  # (T, d_k)",
        "caught_by": [CHAPTER],
    },
]
