"""Chapter 4: the positional-encoding checker passes right answers and names wrong ones."""

import numpy as np
import pytest
import torch

from selfattention import exercises, sinusoidal_positional_encoding


def right_numpy(length, d_model):
    positions = np.arange(length)[:, None]  # (length, 1)
    rates = 1.0 / 10000 ** (np.arange(0, d_model, 2) / d_model)  # (d_model/2,)
    encoding = np.zeros((length, d_model))
    encoding[:, 0::2] = np.sin(positions * rates)
    encoding[:, 1::2] = np.cos(positions * rates)
    return encoding


def right_torch_float32(length, d_model):
    positions = torch.arange(length, dtype=torch.float32)[:, None]  # (length, 1)
    rates = torch.exp(
        -torch.arange(0, d_model, 2, dtype=torch.float32) / d_model * np.log(10000.0)
    )
    angles = positions * rates  # (length, d_model/2)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(length, d_model)


def concatenated(length, d_model):
    angles = np.arange(length)[:, None] / 10000 ** (np.arange(0, d_model, 2) / d_model)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def swapped(length, d_model):
    return right_numpy(length, d_model)[:, np.arange(d_model) ^ 1]


def own_index_exponent(length, d_model):
    angles = np.arange(length)[:, None] / 10000 ** (np.arange(d_model) / d_model)
    return np.where(np.arange(d_model) % 2 == 0, np.sin(angles), np.cos(angles))


@pytest.mark.parametrize("fn", [right_numpy, right_torch_float32, sinusoidal_positional_encoding])
def test_accepts_right_answers(fn, capsys):
    assert exercises.check_positional_encoding(fn) is True
    assert capsys.readouterr().out == "✓ check_positional_encoding: all 5 cases pass\n"


def test_concatenated_layout_fails_and_is_named(capsys):
    assert exercises.check_positional_encoding(concatenated) is False
    out = capsys.readouterr().out
    assert "case 2 (4 positions, d_model = 4: columns alternate sin, cos)\n  values differ" in out
    assert "expected:" in out and "got:" in out
    assert "hint: the columns are all sines, then all cosines" in out


def test_swapped_sin_cos_fails_with_hint(capsys):
    assert exercises.check_positional_encoding(swapped) is False
    out = capsys.readouterr().out
    assert "case 1 (one position, d_model = 2)" in out
    assert "hint: sine and cosine are swapped" in out


def test_own_index_exponent_fails_with_hint(capsys):
    assert exercises.check_positional_encoding(own_index_exponent) is False
    out = capsys.readouterr().out
    assert "case 2 (" in out
    assert "hint: the odd columns use their own index" in out


def test_wrong_base_fails_without_a_misleading_hint(capsys):
    def base_100(length, d_model):
        return sinusoidal_positional_encoding(length, d_model, base=100.0)

    assert exercises.check_positional_encoding(base_100) is False
    out = capsys.readouterr().out
    assert "case 2 (" in out and "values differ" in out
    assert "hint:" not in out


def test_transposed_output_reports_the_shape(capsys):
    assert (
        exercises.check_positional_encoding(lambda length, d_model: right_numpy(length, d_model).T)
        is False
    )
    out = capsys.readouterr().out
    assert "case 1 (one position, d_model = 2)\n  shape (2, 1) instead of (1, 2)" in out


def test_crash_is_reported_with_the_case(capsys):
    def crashes(length, d_model):
        raise ValueError("no idea")

    assert exercises.check_positional_encoding(crashes) is False
    out = capsys.readouterr().out
    assert "case 1 (one position, d_model = 2) raised ValueError: no idea" in out
    assert "hint:" not in out


def test_needs_a_function():
    with pytest.raises(TypeError, match="check_positional_encoding needs a function"):
        exercises.check_positional_encoding(np.zeros((4, 4)))
