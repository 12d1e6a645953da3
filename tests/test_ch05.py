"""Chapter 5: the check_qkv_scores checker and the toy_text module (tokens and toy embeddings)."""

import numpy as np
import pytest

from selfattention import (
    VOCABULARY,
    embedding_table,
    exercises,
    position_aware_embeddings,
    sinusoidal_positional_encoding,
    softmax,
    token_ids,
    tokenize,
    toy_embeddings,
)
from selfattention.toys.toy_text import PAD, running_example

# --- the checker --------------------------------------------------------------------------


def test_qkv_scores_checker_accepts_right_answer(capsys):
    def right(x, w_q, w_k):
        return (x @ w_q) @ (x @ w_k).T

    assert exercises.check_qkv_scores(right) is True
    assert capsys.readouterr().out.startswith("✓ check_qkv_scores: all 5 cases pass")


def test_qkv_scores_checker_rejects_the_transpose(capsys):
    def transposed(x, w_q, w_k):
        return (x @ w_k) @ (x @ w_q).T  # K Q^T: rows are keys, not queries

    assert exercises.check_qkv_scores(transposed) is False
    out = capsys.readouterr().out
    # Case 1 has one token, where K Q^T = Q K^T; the transpose shows from case 2 on.
    assert "case 2 ('Hi, how are you?': T = 6, d_model = 4, d_k = 3)\n  values differ" in out
    assert "expected:" in out and "got:" in out


def test_qkv_scores_checker_rejects_a_missing_projection(capsys):
    def no_projection(x, w_q, w_k):
        return x @ x.T

    assert exercises.check_qkv_scores(no_projection) is False
    assert "case 1 (one token, d_model = 2, d_k = 2)\n  values differ" in capsys.readouterr().out


def test_qkv_scores_checker_reports_wrong_shapes_and_exceptions(capsys):
    def wrong_order(x, w_q, w_k):
        return (x @ w_q).T @ (x @ w_k)  # (d_k, d_k) instead of (T, T)

    assert exercises.check_qkv_scores(wrong_order) is False
    assert "case 1 (one token, d_model = 2, d_k = 2)\n  shape (2, 2) instead of (1, 1)" in (
        capsys.readouterr().out
    )

    def forgot_transpose(x, w_q, w_k):
        return (x @ w_q) @ (x @ w_k)  # (T, d_k) @ (T, d_k) does not multiply

    assert exercises.check_qkv_scores(forgot_transpose) is False
    assert "case 1 (one token, d_model = 2, d_k = 2) raised ValueError" in capsys.readouterr().out


# --- toy_text -------------------------------------------------------------------------------


def test_tokenize_splits_words_and_punctuation():
    assert tokenize("Hi, how are you?") == ["hi", ",", "how", "are", "you", "?"]
    assert tokenize("I am fine") == ["i", "am", "fine"]
    assert tokenize("The animal didn't cross the street because it was too tired.") == [
        "the",
        "animal",
        "didn't",
        "cross",
        "the",
        "street",
        "because",
        "it",
        "was",
        "too",
        "tired",
        ".",
    ]
    assert tokenize("  HI   how!") == ["hi", "how", "!"]


def test_every_token_of_the_book_sentences_is_in_the_vocabulary():
    assert len(set(VOCABULARY)) == len(VOCABULARY)
    assert VOCABULARY[0] == PAD
    for word in ["hi", "how", "are", "you", "i", "am", "fine", "it", "animal"]:
        assert word in VOCABULARY


@pytest.mark.parametrize(
    "text,pattern",
    [
        ("Hi, how are you doing?", r"unknown token 'doing'"),
        ("Hi; how", r"unknown token ';'"),
        ("Hi 2", r"unknown token '2'"),
        ("", r"text has no tokens, got ''"),
        ("   ", r"text has no tokens"),
    ],
)
def test_tokenize_rejects_unknown_tokens_and_empty_text(text, pattern):
    with pytest.raises(ValueError, match=pattern):
        tokenize(text)


def test_tokenize_rejects_non_strings():
    with pytest.raises(TypeError, match=r"text must be a str, got list"):
        tokenize(["hi"])


def test_token_ids_are_positions_in_the_vocabulary():
    tokens = tokenize("Hi, how are you?")
    ids = token_ids(tokens)
    assert ids.shape == (6,) and ids.dtype == np.int64
    assert [VOCABULARY[i] for i in ids] == tokens
    assert token_ids([PAD])[0] == 0


@pytest.mark.parametrize(
    "tokens,error,pattern",
    [
        (
            "hi how",
            TypeError,
            r"tokens must be a list of str, got the str 'hi how'; call tokenize",
        ),
        (["hi", "doing"], ValueError, r"unknown token 'doing'"),
        (["Hi"], ValueError, r"unknown token 'Hi'"),
        ([], ValueError, r"tokens is empty"),
        (["hi", 3], TypeError, r"tokens\[1\] must be a str, got int"),
        (5, TypeError, r"tokens must be a list of str, got int"),
    ],
)
def test_token_ids_bad_inputs(tokens, error, pattern):
    with pytest.raises(error, match=pattern):
        token_ids(tokens)


def test_embedding_table_is_fixed_rounded_and_pads_with_zero():
    table = embedding_table(4, seed=0)
    assert table.shape == (len(VOCABULARY), 4)
    np.testing.assert_array_equal(table, embedding_table(4, seed=0))
    np.testing.assert_array_equal(table, np.round(table, 1))
    np.testing.assert_array_equal(table[0], np.zeros(4))
    assert not np.signbit(table[table == 0]).any(), "no -0.0 entries"
    assert not np.array_equal(table, embedding_table(4, seed=1))
    # The numbers chapter 5 prints: a regression guard on the stored notebook outputs.
    np.testing.assert_array_equal(table[VOCABULARY.index("hi")], [-0.5, 0.4, 1.3, 0.9])


@pytest.mark.parametrize(
    "kwargs,error,pattern",
    [
        (dict(d_model=0), ValueError, r"d_model must be positive, got 0"),
        (dict(d_model=4.0), TypeError, r"d_model must be an int, got float"),
        (dict(seed=-1), ValueError, r"seed must be non-negative, got -1"),
        (dict(seed="0"), TypeError, r"seed must be an int, got str"),
    ],
)
def test_embedding_table_bad_inputs(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        embedding_table(**kwargs)


def test_toy_embeddings_are_a_table_lookup_independent_of_position():
    tokens = tokenize("The animal didn't cross the street because it was too tired.")
    embeddings = toy_embeddings(tokens, d_model=6, seed=2)
    assert embeddings.shape == (12, 6)
    np.testing.assert_array_equal(embeddings, embedding_table(6, seed=2)[token_ids(tokens)])
    np.testing.assert_array_equal(embeddings[0], embeddings[4])  # "the" twice, same row


def test_position_aware_embeddings_add_the_sinusoidal_encoding():
    tokens = tokenize("Hi, how are you?")
    x = position_aware_embeddings(tokens, d_model=4)
    assert x.shape == (6, 4)
    np.testing.assert_allclose(
        x, toy_embeddings(tokens, d_model=4) + sinusoidal_positional_encoding(6, 4)
    )
    repeated = position_aware_embeddings(["the", "the"], d_model=4)
    assert not np.allclose(repeated[0], repeated[1]), "the same word at two positions differs"


def test_position_aware_embeddings_bad_inputs():
    with pytest.raises(ValueError, match=r"d_model must be even"):
        position_aware_embeddings(["hi"], d_model=3)
    with pytest.raises(TypeError, match=r"call tokenize\(text\) first"):
        position_aware_embeddings("Hi, how are you?")
    with pytest.raises(ValueError, match=r"unknown token 'doing'"):
        position_aware_embeddings(["how", "doing"])


# --- the running example of chapters 5 to 8 -------------------------------------------------


def test_running_example_is_the_sentence_of_chapter_5_with_fixed_weights():
    example = running_example()
    assert example.sentence == "Hi, how are you?"
    assert example.tokens == ("hi", ",", "how", "are", "you", "?")
    assert (example.T, example.d_model, example.d_k, example.d_v) == (6, 4, 3, 2)
    np.testing.assert_array_equal(example.X, position_aware_embeddings(example.tokens, 4))
    # The weights never drift: chapters 5 to 8 print and assert numbers made from them.
    np.testing.assert_array_equal(
        example.W_Q, [[1.0, -1.3, 0.2], [-0.3, -0.2, -0.1], [-1.0, -0.1, -0.4], [1.7, 0.1, -0.2]]
    )
    np.testing.assert_array_equal(
        example.W_K, [[-0.1, -0.3, -0.5], [-0.2, 0.2, -0.1], [0.5, -0.1, 0.0], [0.8, 0.3, -0.3]]
    )
    np.testing.assert_array_equal(
        example.W_V, [[-0.1, 0.3], [1.0, -0.1], [-0.1, 0.5], [-0.4, -0.1]]
    )
    np.testing.assert_array_equal(example.W_O, [[0.4, 0.3, 0.0, 0.3], [-1.4, 0.5, -0.5, -0.8]])
    for matrix in (example.X, example.W_Q, example.W_K, example.W_V, example.W_O):
        assert matrix.dtype == np.float64
        assert not np.signbit(matrix[matrix == 0]).any(), "no -0.0 entries"


def test_running_example_numbers_that_the_chapters_follow():
    """One score, S[4, 0] (query "you", key "hi"), from Q K^T to the output row."""
    example = running_example()
    Q, K, V = example.X @ example.W_Q, example.X @ example.W_K, example.X @ example.W_V
    S = Q @ K.T  # (T, T)
    scaled = S / np.sqrt(example.d_k)  # (T, T)
    A = softmax(scaled)  # (T, T)
    output = A @ V  # (T, d_v), O in the book
    Y = output @ example.W_O  # (T, d_model)
    assert round(float(S[4, 0]), 3) == 5.916  # chapter 5, by hand
    assert round(float(scaled[4, 0]), 3) == 3.416  # chapter 6
    assert round(float(A[4, 0]), 3) == 0.490  # chapter 7
    assert int(A[4].argmax()) == 0  # "you" attends most to "hi"
    np.testing.assert_allclose(output[4], [-0.538, -0.040], atol=5e-4)  # chapter 8
    np.testing.assert_allclose(Y[4], [-0.159, -0.182, 0.020, -0.129], atol=5e-4)
    assert not np.allclose(S, S.T)
    assert np.linalg.matrix_rank(example.W_Q @ example.W_K.T) == example.d_k
    assert np.linalg.matrix_rank(example.W_V @ example.W_O) == example.d_v


def test_running_example_builds_new_arrays_on_every_call():
    first = running_example()
    first.X[0, 0] = 100.0
    first.W_Q[:] = 0.0
    second = running_example()
    assert second.X[0, 0] != 100.0 and second.W_Q.any()


def test_draws_that_round_to_minus_zero_come_out_as_zero(monkeypatch):
    """``+ 0.0`` after ``np.round`` turns every -0.0 into 0.0, so printed tables show no "-0.".

    The fixed seeds happen to draw no number of the running example's weights
    that rounds to -0.0, so the value checks above cannot see the ``+ 0.0``.
    Here every draw is -0.01, which rounds to -0.0: without the ``+ 0.0`` in
    running_example() or embedding_table(), the sign bits below are set.
    """

    class DrawsJustBelowZero:
        def normal(self, loc=0.0, scale=1.0, size=None):
            return np.full(size, -0.01)

    monkeypatch.setattr(np.random, "default_rng", lambda seed=None: DrawsJustBelowZero())
    example = running_example()
    for matrix in (example.W_Q, example.W_K, example.W_V, example.W_O):
        assert np.all(matrix == 0.0) and not np.signbit(matrix).any()
    table = embedding_table(4)
    assert np.all(table == 0.0) and not np.signbit(table).any()
