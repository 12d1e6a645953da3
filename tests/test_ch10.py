"""Chapter 10: the additive-mask checker, with a right answer and plausible wrong ones."""

import doctest

import torch

from selfattention.exercises import ch10, check_additive_mask


def right_additive_mask(attention_mask):
    blocked = (attention_mask == 0)[:, None, None, :]  # (B, 1, 1, T_k)
    return torch.zeros(blocked.shape).masked_fill(blocked, float("-inf"))


def test_doctests_of_the_chapter_10_checker():
    result = doctest.testmod(ch10)
    assert result.failed == 0 and result.attempted >= 3


def test_checker_accepts_the_right_answer(capsys):
    assert check_additive_mask(right_additive_mask) is True
    assert capsys.readouterr().out.startswith("✓ check_additive_mask: all 4 cases pass")


def test_checker_accepts_other_right_routes(capsys):
    def via_where(attention_mask):
        keep = attention_mask.bool()[:, None, None, :]
        return torch.where(keep, 0.0, float("-inf"))

    def via_float64(attention_mask):
        return right_additive_mask(attention_mask).double()

    assert check_additive_mask(via_where) is True
    assert check_additive_mask(via_float64) is True


def test_checker_catches_the_inverted_mask(capsys):
    def inverted(attention_mask):
        blocked = (attention_mask == 1)[:, None, None, :]
        return torch.zeros(blocked.shape).masked_fill(blocked, float("-inf"))

    assert check_additive_mask(inverted) is False
    out = capsys.readouterr().out
    assert "✗ check_additive_mask: case 1 (lengths 6 and 3, right padding" in out
    assert "values differ" in out and "expected:" in out and "got:" in out


def test_checker_catches_the_missing_broadcast_axes(capsys):
    def no_axes(attention_mask):
        return right_additive_mask(attention_mask)[:, 0, 0, :]  # (B, T_k)

    assert check_additive_mask(no_axes) is False
    assert (
        "case 1 (lengths 6 and 3, right padding)\n  "
        "shape (2, 6) instead of (2, 1, 1, 6)" in capsys.readouterr().out
    )


def test_checker_catches_the_three_dimensional_broadcast(capsys):
    def lines_batch_up_with_heads(attention_mask):
        return right_additive_mask(attention_mask)[:, 0]  # (B, 1, T_k)

    assert check_additive_mask(lines_batch_up_with_heads) is False
    assert "shape (2, 1, 6) instead of (2, 1, 1, 6)" in capsys.readouterr().out


def test_checker_catches_zero_times_minus_infinity(capsys):
    def times_minus_inf(attention_mask):
        return ((1 - attention_mask) * float("-inf"))[:, None, None, :].float()

    assert check_additive_mask(times_minus_inf) is False
    assert "case 1 (lengths 6 and 3, right padding)\n  contains NaN" in capsys.readouterr().out


def test_checker_catches_the_unconverted_ones_and_zeros(capsys):
    def unconverted(attention_mask):
        return attention_mask[:, None, None, :].float()  # 1/0 added to the scores

    assert check_additive_mask(unconverted) is False
    assert "case 1 (lengths 6 and 3, right padding)\n  values differ" in capsys.readouterr().out


def test_checker_catches_a_mask_that_only_handles_right_padding(capsys):
    def from_lengths(attention_mask):
        lengths = attention_mask.sum(dim=-1)  # assumes the 1s come first
        positions = torch.arange(attention_mask.shape[-1])
        blocked = (positions[None, :] >= lengths[:, None])[:, None, None, :]
        return torch.zeros(blocked.shape).masked_fill(blocked, float("-inf"))

    assert check_additive_mask(from_lengths) is False
    assert "case 3 (left padding, as some decoders use" in capsys.readouterr().out


def test_checker_reports_an_exception_by_case(capsys):
    def crashes(attention_mask):
        return attention_mask.masked_fill(attention_mask == 0, float("-inf"))

    assert check_additive_mask(crashes) is False
    assert "case 1" in capsys.readouterr().out
