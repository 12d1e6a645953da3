"""Chapter 11: the masked-mean-pooling checker accepts a right answer, names wrong ones."""

import doctest

import torch

from selfattention.exercises import ch11, check_masked_mean


def test_doctests_of_the_chapter_11_checker():
    result = doctest.testmod(ch11)
    assert result.attempted > 0 and result.failed == 0


def test_accepts_right_answer(capsys):
    def right(values, mask):
        keep = mask.unsqueeze(-1).to(values.dtype)  # (B, T, 1)
        return (values * keep).sum(dim=1) / keep.sum(dim=1)

    assert check_masked_mean(right) is True
    assert capsys.readouterr().out.startswith("✓ check_masked_mean: all 5 cases pass")


def test_accepts_a_loop_over_lines(capsys):
    def loop(values, mask):
        return torch.stack([values[b][mask[b]].mean(dim=0) for b in range(values.shape[0])])

    assert check_masked_mean(loop) is True


def test_rejects_averaging_over_padding_too(capsys):
    def plain_mean(values, mask):
        return values.mean(dim=1)

    assert check_masked_mean(plain_mean) is False
    out = capsys.readouterr().out
    assert "case 2 (two lines, the second padded from position 2" in out
    assert "values differ" in out and "expected:" in out and "got:" in out


def test_rejects_zeroing_padding_but_dividing_by_t(capsys):
    def divides_by_t(values, mask):
        return (values * mask.unsqueeze(-1)).sum(dim=1) / values.shape[1]

    assert check_masked_mean(divides_by_t) is False
    assert "case 2 (two lines" in capsys.readouterr().out


def test_rejects_dividing_by_the_count_but_keeping_padding_values(capsys):
    def keeps_padding(values, mask):
        return values.sum(dim=1) / mask.sum(dim=1, keepdim=True)

    assert check_masked_mean(keeps_padding) is False
    assert "case 2 (two lines" in capsys.readouterr().out


def test_rejects_a_sum_instead_of_a_mean(capsys):
    def masked_sum(values, mask):
        return (values * mask.unsqueeze(-1)).sum(dim=1)

    assert check_masked_mean(masked_sum) is False
    assert "case 1 (one line of 3 real tokens" in capsys.readouterr().out


def test_rejects_cutting_each_line_at_its_length(capsys):
    # Right while padding is at the end, wrong for a word masked in the middle.
    def prefix_only(values, mask):
        lengths = mask.sum(dim=1)
        return torch.stack(
            [values[b, : int(lengths[b])].mean(dim=0) for b in range(values.shape[0])]
        )

    assert check_masked_mean(prefix_only) is False
    assert "case 3 (a masked word in the middle" in capsys.readouterr().out


def test_rejects_counting_non_zero_vectors(capsys):
    def counts_non_zero(values, mask):
        kept = values * mask.unsqueeze(-1)
        count = (kept.abs().sum(dim=-1) > 0).sum(dim=1, keepdim=True)
        return kept.sum(dim=1) / count

    assert check_masked_mean(counts_non_zero) is False
    assert "case 4 (a real token whose vector is all zeros" in capsys.readouterr().out


def test_reports_a_wrong_shape_and_an_exception(capsys):
    def keeps_time_axis(values, mask):
        return values * mask.unsqueeze(-1)

    assert check_masked_mean(keeps_time_axis) is False
    assert "shape (1, 3, 2) instead of (1, 2)" in capsys.readouterr().out

    def crashes(values, mask):
        raise RuntimeError("boom")

    assert check_masked_mean(crashes) is False
    assert "raised RuntimeError: boom" in capsys.readouterr().out
