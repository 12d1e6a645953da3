"""Mutations of chapter 1: each breaks one claim; the named checks must catch it."""

# ruff: noqa: E501  (each entry quotes whole lines of code)

CHAPTER = "chapters/01_why_attention.ipynb"

MUTATIONS = [
    {
        "id": "weights-divided-by-max",
        "claim": "attention weights are non-negative and sum to 1",
        "file": CHAPTER,
        "old": "weights = importance / importance.sum()                # (T,) the a_j",
        "new": "weights = importance / importance.max()                # (T,) the a_j",
        "caught_by": [CHAPTER],
        "sample": True,
    },
    {
        "id": "weights-through-exp",
        "claim": "dividing every score by the same total keeps their ratios",
        "file": CHAPTER,
        "old": "weights = importance / importance.sum()                # (T,) the a_j",
        "new": "weights = np.exp(importance) / np.exp(importance).sum()  # (T,)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "summary-ignores-weights",
        "claim": "the same vectors give a useful or a useless summary depending only on the weights",
        "file": CHAPTER,
        "old": "attended = weights @ token_vectors  # (d,) the summary o = a X",
        "new": "attended = token_vectors.mean(axis=0)  # (d,) the summary o = a X",
        "caught_by": [CHAPTER],
    },
    {
        "id": "rnn-does-not-contract",
        "claim": "a recurrent net passes information step by step, so an early token's signal fades",
        "file": CHAPTER,
        "old": "state = np.tanh(state @ W_h + x_t @ W_x)  # (d_h,)",
        "new": "state = state @ W_h / 0.9 + x_t @ W_x    # (d_h,)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "attention-recency-bias",
        "claim": "attention's influence does not depend on distance",
        "file": CHAPTER,
        "old": "scores = tokens_x @ probe / np.sqrt(d)  # (T,) the s_j",
        "new": "scores = tokens_x @ probe / np.sqrt(d) - 0.05 * np.arange(len(tokens_x))[::-1]",
        "caught_by": [CHAPTER],
    },
    {
        "id": "nudge-the-wrong-token",
        "claim": "fix T, move the token: the RNN's influence grows towards the end, attention's stays",
        "file": CHAPTER,
        "old": "    nudged[position] += nudge\n",
        "new": "    nudged[0] += nudge\n",
        "caught_by": [CHAPTER],
    },
    {
        "id": "sharper-probe",
        "claim": "the first token's weight is 286 / (286 + T - 1): it dilutes roughly as 1/T",
        "file": CHAPTER,
        "old": "probe[0] = 16.0          # a sharp question: large along feature 0",
        "new": "probe[0] = 24.0          # a sharp question: large along feature 0",
        "caught_by": [CHAPTER],
    },
    {
        "id": "one-query-only",
        "claim": "memory grows with the square of the context length",
        "file": CHAPTER,
        "old": "output, attention_weights = scaled_dot_product_attention(x, x, x)",
        "new": "output, attention_weights = scaled_dot_product_attention(x[:1], x, x)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "checker-divides-by-count",
        "claim": "check_weighted_average rejects weights that do not come from the scores",
        "file": CHAPTER,
        "old": "weights = importance / importance.sum()      # (T,)",
        "new": "weights = importance / len(importance)      # (T,)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "checker-unnormalised",
        "claim": "check_weighted_average rejects scores used as weights without normalising",
        "file": CHAPTER,
        "old": "return weights @ vectors                     # (d,)",
        "new": "return importance @ vectors                  # (d,)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "checker-plain-mean",
        "claim": "check_weighted_average rejects an unweighted average",
        "file": CHAPTER,
        "old": "return weights @ vectors                     # (d,)",
        "new": "return vectors.mean(axis=0)                  # (d,)",
        "caught_by": [CHAPTER],
    },
]
