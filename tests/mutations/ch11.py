"""Mutations of chapter 11: each breaks one claim; the named checks must catch it."""

# ruff: noqa: E501  (each entry quotes whole lines of code)

CHAPTER = "chapters/11_training_attention.ipynb"
MODELS = "src/selfattention/toys/models.py"
TRAINING = "src/selfattention/toys/training.py"
SETTINGS_TEST = (
    "tests/test_models.py::test_training_runs_on_one_deterministic_thread_and_leaves_eval_mode"
)

MUTATIONS = [
    {
        "id": "deterministic-setting-removed",
        "claim": "train_classifier sets both (one thread and deterministic algorithms) itself",
        "file": TRAINING,
        "old": "    torch.use_deterministic_algorithms(True)\n    try:",
        "new": "    try:",
        "caught_by": [SETTINGS_TEST],
        "sample": True,
    },
    {
        "id": "deterministic-setting-removed-in-chapter",
        "claim": "train_classifier sets both: called from a caller without them, it trains with them on",
        "file": TRAINING,
        "old": "    torch.use_deterministic_algorithms(True)\n    try:",
        "new": "    try:",
        "caught_by": [CHAPTER],
    },
    {
        "id": "one-thread-setting-removed",
        "claim": "the loop runs on one thread (another thread count can add numbers in another order)",
        "file": TRAINING,
        "old": "    torch.set_num_threads(1)\n    torch.use_deterministic_algorithms(True)",
        "new": "    torch.use_deterministic_algorithms(True)",
        "caught_by": [CHAPTER, SETTINGS_TEST],
    },
    {
        "id": "left-in-train-mode",
        "claim": "when it has finished, train_classifier leaves the model in eval() mode",
        "file": TRAINING,
        "old": "        model.eval()\n        return history",
        "new": "        return history",
        "caught_by": [SETTINGS_TEST],
    },
    {
        "id": "pooled-over-padded-queries",
        "claim": "the pooled vector is sum_j a_j v_j W_O + b_O, a_j averaged over the real queries",
        "file": MODELS,
        "old": "return masked_mean(per_query, mask)  # (B, T_k): averaged over real queries",
        "new": "return per_query.mean(dim=1)  # (B, T_k): averaged over real queries",
        "caught_by": [
            CHAPTER,
            "tests/test_models.py::test_the_pooled_vector_is_the_pooled_attention_times_the_values",
        ],
    },
    {
        "id": "classifier-ignores-padding",
        "claim": "attention with a padding mask: padding gets weight exactly 0 and never changes a prediction",
        "file": MODELS,
        "old": "out, weights = self.attention(x, mask=mask[:, None, None, :])",
        "new": "out, weights = self.attention(x)",
        "caught_by": [CHAPTER, "tests/test_models.py::test_padding_never_changes_a_prediction"],
    },
    {
        "id": "one-epoch-only",
        "claim": "the classifier learns the task: held-out accuracy above 95% (asserted)",
        "file": CHAPTER,
        "old": "history = train_classifier(model, train, heldout, epochs=10,",
        "new": "history = train_classifier(model, train, heldout, epochs=1,",
        "caught_by": [CHAPTER],
    },
    {
        "id": "forgot-zero-grad",
        "claim": "the loop by hand and train_classifier agree to the last bit (zero_grad, backward, step)",
        "file": CHAPTER,
        "old": "optimizer.zero_grad()   # clear the last step's gradients",
        "new": "pass                    # clear the last step's gradients",
        "caught_by": [CHAPTER],
    },
    {
        "id": "accuracy-as-a-count",
        "claim": "the printed held-out accuracy is the fraction of lines whose largest logit is the true series",
        "file": TRAINING,
        "old": "accuracy = (logits.argmax(dim=-1) == batch.labels).double().mean().item()",
        "new": "accuracy = (logits.argmax(dim=-1) == batch.labels).double().sum().item()",
        "caught_by": [CHAPTER],
    },
    {
        "id": "share-at-position-0",
        "claim": "the share on the giveaway starts at about 1/T and ends far above it",
        "file": CHAPTER,
        "old": "share = pooled[rows, batch.giveaway]            # (B,)",
        "new": "share = pooled[rows, 0]                         # (B,)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "learned-table-frozen-too",
        "claim": "with a learned table a bag of words would do; with a frozen table uniform attention fails",
        "file": CHAPTER,
        "old": 'variant = build(freeze_embedding=table == "frozen")',
        "new": "variant = build(freeze_embedding=True)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "stationary-point-with-biases",
        "claim": "zero query and key projections (weights and biases) are a stationary point: their gradients are zero",
        "file": CHAPTER,
        "old": "for layer in (unfrozen.attention.q_proj, unfrozen.attention.k_proj):\n    nn.init.zeros_(layer.weight)\n    nn.init.zeros_(layer.bias)\n",
        "new": "for layer in (unfrozen.attention.q_proj, unfrozen.attention.k_proj):\n    nn.init.zeros_(layer.weight)\n",
        "caught_by": [CHAPTER],
    },
    {
        "id": "ablation-sign-flipped",
        "claim": "attention and word ablation agree on the top word on most lines, and disagree about the fillers",
        "file": CHAPTER,
        "old": "drop[:, j] = full - kept",
        "new": "drop[:, j] = kept - full",
        "caught_by": [CHAPTER],
    },
    {
        "id": "giveaway-not-removed",
        "claim": "Harry Potter is the model's default answer: right without its giveaway, unlike the other two series",
        "file": CHAPTER,
        "old": "guess = model(heldout.ids, no_giveaway)[0].argmax(dim=-1)  # (B,)",
        "new": "guess = model(heldout.ids, heldout.mask)[0].argmax(dim=-1)  # (B,)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "exercise-masked-mean-divides-by-t",
        "claim": "exercise 4: check_masked_mean rejects dividing by T instead of the real tokens (reference solution made wrong)",
        "file": CHAPTER,
        "old": "return (values * keep).sum(dim=1) / keep.sum(dim=1)  # (B, d_model)",
        "new": "return (values * keep).sum(dim=1) / values.shape[1]  # (B, d_model)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "no-saga-line-sigmoid",
        "claim": "a line from no saga still gets a series: a softmax over three classes has no 'none of these', its probabilities sum to 1",
        "file": CHAPTER,
        "old": "p_nowhere = model(nowhere.ids, nowhere.mask)[0].softmax(dim=-1)[0]  # (3,)",
        "new": "p_nowhere = model(nowhere.ids, nowhere.mask)[0].sigmoid()[0]  # (3,)",
        "caught_by": [CHAPTER],
    },
    {
        "id": "interactive-readable-lines-mislabelled",
        "claim": "the interactive figure's readable lines carry their series, and the trained model gets all 21 right",
        "file": CHAPTER,
        "old": "picks.append(Line(words, SERIES.index(series), giveaway[0]))",
        "new": "picks.append(Line(words, (SERIES.index(series) + 1) % 3, giveaway[0]))",
        "caught_by": [CHAPTER],
    },
]
