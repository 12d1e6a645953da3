"""The exercise checkers pass a right answer and catch a wrong one, naming the case."""

import numpy as np

from selfattention import exercises


def test_weighted_average_checker_accepts_right_answer(capsys):
    def right(importance, vectors):
        return (importance / importance.sum()) @ vectors

    assert exercises.check_weighted_average(right) is True
    assert capsys.readouterr().out.startswith("✓ check_weighted_average: all 4 cases pass")


def test_weighted_average_checker_rejects_unnormalised_answer(capsys):
    def forgot_to_normalise(importance, vectors):
        return importance @ vectors

    assert exercises.check_weighted_average(forgot_to_normalise) is False
    out = capsys.readouterr().out
    assert "case 2 (equal importance gives the plain mean)" in out
    assert "expected:" in out and "got:" in out


def test_checker_reports_exceptions_and_wrong_shapes(capsys):
    def crashes(importance, vectors):
        raise RuntimeError("boom")

    assert exercises.check_weighted_average(crashes) is False
    assert "case 1 (one important token) raised RuntimeError: boom" in capsys.readouterr().out

    def wrong_shape(importance, vectors):
        return np.zeros((1, vectors.shape[1]))

    assert exercises.check_weighted_average(wrong_shape) is False
    assert "shape (1, 3) instead of (3,)" in capsys.readouterr().out


def test_weighted_average_checker_accepts_equivalent_variants(capsys):
    def with_np_average(importance, vectors):
        return np.average(vectors, axis=0, weights=importance)

    def with_a_loop(importance, vectors):
        total = sum(importance)
        return sum(weight / total * row for weight, row in zip(importance, vectors, strict=True))

    assert exercises.check_weighted_average(with_np_average) is True
    assert exercises.check_weighted_average(with_a_loop) is True
    capsys.readouterr()


def test_weighted_average_checker_rejects_softmax_instead_of_division(capsys):
    def uses_softmax(importance, vectors):
        weights = np.exp(importance) / np.exp(importance).sum()
        return weights @ vectors

    assert exercises.check_weighted_average(uses_softmax) is False
    assert "case 1 (one important token)\n  values differ" in capsys.readouterr().out


def test_run_checks_gives_the_reader_copies_and_silences_numpy_warnings(capsys):
    importance = np.array([1.0, 3.0])
    vectors = np.eye(2)
    cases = [exercises.Case("in-place edits and an overflow", (importance, vectors))]

    def edits_in_place_and_overflows(weights, rows):
        weights *= 1e308
        weights *= 10.0  # overflows to inf: a RuntimeWarning unless silenced
        return weights @ rows

    def reference(weights, rows):
        return (weights / weights.sum()) @ rows

    # pytest turns RuntimeWarning into an error here, so a leak would raise.
    assert exercises.run_checks("demo", edits_in_place_and_overflows, reference, cases) is False
    assert "case 1 (in-place edits and an overflow)\n  contains NaN" in capsys.readouterr().out
    np.testing.assert_array_equal(importance, [1.0, 3.0])  # the case's own input is untouched


def test_failure_report_lines_up_expected_and_got(capsys):
    """A 4-D result prints as named 2-D slices, expected above got, column by column
    (issue 25: chapter 10's report was ragged, with blank lines between blocks)."""
    allowed = np.tril(np.ones((2, 1, 3, 3), dtype=bool))  # (B, h, T_q, T_k)

    def reference(mask):
        return np.where(mask, 0.0, -np.inf)

    def finite_fill(mask):
        return np.where(mask, 0.0, -1e9)

    cases = [exercises.Case("a causal mask", (allowed,))]
    assert exercises.run_checks("check_fill", finite_fill, reference, cases) is False
    lines = capsys.readouterr().out.splitlines()
    assert all(line.strip() for line in lines), "no blank lines"
    assert all(len(line) <= 79 for line in lines), "each line fits a notebook's output"
    expected = lines[lines.index("  expected: shape (2, 1, 3, 3)") + 1 :][:6]
    got = lines[lines.index("  got:      shape (2, 1, 3, 3)") + 1 :][:6]
    assert expected[0].startswith("    [0, 0, :, :] [[") and got[3].startswith("    [1, 0, :, :]")
    for want, have in zip(expected, got, strict=True):
        assert len(want) == len(have), f"{want!r} and {have!r} do not line up"
        assert [i for i, c in enumerate(want) if c in "[]"] == [
            i for i, c in enumerate(have) if c in "[]"
        ]
    assert "-inf" in expected[0] and "-1e+09" in got[0]


def test_failure_report_shows_the_slices_that_differ_first(capsys):
    zeros = np.zeros((3, 4, 2, 2))  # twelve 2-D slices

    def one_slice_wrong(x):
        x = x.copy()
        x[2, 3] = 1.0
        return x

    cases = [exercises.Case("twelve slices", (zeros,))]
    assert exercises.run_checks("check_copy", one_slice_wrong, np.copy, cases) is False
    out = capsys.readouterr().out
    assert "    [2, 3, :, :] [[1. 1.]" in out and "[0, 0, :, :]" not in out
    assert out.count("(11 more slices equal)") == 2
