"""Chapter 6: the scaled-scores checker passes a right answer and names a wrong one's case."""

import math

import numpy as np
import pytest

from selfattention import exercises
from selfattention.exercises.ch06 import check_scaled_scores, reference_scaled_scores


def right(query, keys):
    return query @ np.swapaxes(keys, -1, -2) / math.sqrt(query.shape[-1])


def test_exported_from_exercises():
    assert exercises.check_scaled_scores is check_scaled_scores


def test_accepts_right_answer(capsys):
    assert check_scaled_scores(right) is True
    assert capsys.readouterr().out.startswith("✓ check_scaled_scores: all 5 cases pass")


def test_accepts_torch_answer(capsys):
    torch = pytest.importorskip("torch")

    def with_torch(query, keys):
        q, k = torch.from_numpy(query), torch.from_numpy(keys)
        return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])

    assert check_scaled_scores(with_torch) is True


def test_reference_matches_the_formula():
    rng = np.random.default_rng(0)
    query, keys = rng.normal(size=(2, 3, 36)), rng.normal(size=(2, 4, 36))
    expected = np.einsum("hqd,hkd->hqk", query, keys) / 6.0
    assert np.allclose(reference_scaled_scores(query, keys), expected)


def test_rejects_dividing_by_d_k(capsys):
    def by_d_k(query, keys):
        return query @ keys.T / query.shape[-1]

    assert check_scaled_scores(by_d_k) is False
    out = capsys.readouterr().out
    assert "case 1 (d_k = 4, one query, three keys: divide by sqrt(4) = 2)\n  values differ" in out
    assert "expected:" in out and "got:" in out


def test_rejects_dividing_by_sqrt_d_model(capsys):
    def by_sqrt_d_model(query, keys):
        return query @ keys.T / math.sqrt(288)

    assert check_scaled_scores(by_sqrt_d_model) is False
    assert "✗ check_scaled_scores: case 1 " in capsys.readouterr().out


def test_rejects_unscaled_scores(capsys):
    def unscaled(query, keys):
        return query @ np.swapaxes(keys, -1, -2)

    assert check_scaled_scores(unscaled) is False
    assert "case 1 " in capsys.readouterr().out


def test_names_the_batched_case_when_transpose_is_a_bare_T(capsys):
    def bare_transpose(query, keys):
        return query @ keys.T / math.sqrt(query.shape[-1])

    assert check_scaled_scores(bare_transpose) is False
    out = capsys.readouterr().out
    assert "case 5 (batched: 8 heads, query (8, 3, 36), keys (8, 4, 36)) raised ValueError" in out


def test_rejects_swapped_arguments_by_shape(capsys):
    def swapped(query, keys):
        return keys @ np.swapaxes(query, -1, -2) / math.sqrt(query.shape[-1])

    assert check_scaled_scores(swapped) is False
    assert "shape (3, 1) instead of (1, 3)" in capsys.readouterr().out


def test_rejects_a_non_function():
    with pytest.raises(TypeError, match="check_scaled_scores needs a function"):
        check_scaled_scores(np.zeros((2, 2)))
