"""Chapter 3: the cosine-similarity checker passes a right answer and names the wrong case."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from selfattention import exercises


def right(a, b):
    a_unit = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-8)
    b_unit = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-8)
    return a_unit @ np.swapaxes(b_unit, -1, -2)


def test_accepts_a_right_answer(capsys):
    assert exercises.check_cosine_similarity(right) is True
    assert capsys.readouterr().out.startswith("✓ check_cosine_similarity: all 6 cases pass")


def test_accepts_a_torch_answer_with_norm_plus_eps(capsys):
    def with_torch(a, b):
        a, b = torch.as_tensor(a), torch.as_tensor(b)
        return F.cosine_similarity(a.unsqueeze(-2), b.unsqueeze(-3), dim=-1)

    assert exercises.check_cosine_similarity(with_torch) is True
    capsys.readouterr()


def test_rejects_the_unnormalised_dot_product(capsys):
    def forgot_to_normalise(a, b):
        return a @ np.swapaxes(b, -1, -2)

    assert exercises.check_cosine_similarity(forgot_to_normalise) is False
    out = capsys.readouterr().out
    assert "case 2 (a long key: its length must not matter)\n  values differ" in out
    assert "expected:" in out and "got:" in out


def test_rejects_nan_on_a_zero_vector_without_a_warning(capsys):
    def divides_by_zero(a, b):
        a_unit = a / np.linalg.norm(a, axis=-1, keepdims=True)
        b_unit = b / np.linalg.norm(b, axis=-1, keepdims=True)
        return a_unit @ np.swapaxes(b_unit, -1, -2)

    # pytest turns RuntimeWarning into an error (pyproject.toml): the checker
    # must silence numpy's 0 / 0 warning and report the NaN instead.
    assert exercises.check_cosine_similarity(divides_by_zero) is False
    out = capsys.readouterr().out
    assert "case 5 (a zero vector gives 0, not NaN)\n  contains NaN" in out


def test_rejects_a_bare_transpose_on_a_batch(capsys):
    def bare_transpose(a, b):
        a_unit = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-8)
        b_unit = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-8)
        return a_unit @ b_unit.T  # right for (T_k, d), wrong for (B, T_k, d): .T reverses all axes

    assert exercises.check_cosine_similarity(bare_transpose) is False
    out = capsys.readouterr().out
    assert "case 6 (a batch: (2, 3, 4) with (2, 5, 4)) raised ValueError" in out


def test_rejects_a_wrong_shape(capsys):
    def transposed_result(a, b):
        return np.swapaxes(right(a, b), -1, -2)

    assert exercises.check_cosine_similarity(transposed_result) is False
    assert "case 2 (a long key: its length must not matter)\n  shape (2, 1) instead of (1, 2)" in (
        capsys.readouterr().out
    )


def test_needs_a_function():
    with pytest.raises(TypeError, match="check_cosine_similarity needs a function, got ndarray"):
        exercises.check_cosine_similarity(np.zeros(3))


def test_reference_matches_a_python_loop():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4))
    got = exercises.ch03.reference_pairwise_cosine(a, b)
    for seq in range(2):
        for i in range(3):
            for j in range(5):
                x, y = a[seq, i], b[seq, j]
                assert got[seq, i, j] == pytest.approx(
                    x @ y / (np.linalg.norm(x) * np.linalg.norm(y))
                )
