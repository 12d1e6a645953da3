"""Chapter 7: the stable-softmax checker passes right answers and names a wrong one's case."""

import warnings

import numpy as np
import pytest
import torch

from selfattention import exercises
from selfattention.exercises.ch07 import _TOLERANCES, _stable_softmax_cases, reference_softmax


def stable(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def via_logsumexp(x):
    m = x.max(axis=-1, keepdims=True)
    return np.exp(x - (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True))))


def naive(x):
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def verdict(fn, capsys):
    ok = exercises.check_stable_softmax(fn)
    captured = capsys.readouterr()
    return ok, captured.out, captured.err


@pytest.mark.parametrize(
    "fn",
    [
        stable,
        via_logsumexp,
        lambda x: torch.softmax(torch.from_numpy(x), dim=-1),  # returns a tensor
        lambda x: stable(x.astype(np.float64)),  # computing in float64 is fine
        lambda x: reference_softmax(x),
    ],
    ids=["max-subtracted", "log-sum-exp", "torch", "float64", "package"],
)
def test_accepts_right_answers(fn, capsys):
    ok, out, _ = verdict(fn, capsys)
    assert ok is True
    assert out == "✓ check_stable_softmax: all 9 cases pass\n"


def shifted_by(centre):
    def fn(x):
        e = np.exp(x - centre(x))
        return e / e.sum(axis=-1, keepdims=True)

    return fn


@pytest.mark.parametrize(
    "centre",
    [
        lambda x: x.mean(axis=-1, keepdims=True),
        lambda x: x.min(axis=-1, keepdims=True),
        lambda x: x[..., :1],
        lambda x: np.median(x, axis=-1, keepdims=True),
    ],
    ids=["mean", "min", "first-entry", "median"],
)
def test_rejects_a_shift_by_anything_but_the_maximum(centre, capsys):
    """Shift invariance holds for any constant; only the maximum keeps exp finite."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok, out, err = verdict(shifted_by(centre), capsys)
    assert ok is False
    assert "spread wider than exp's range" in out or "only the maximum" in out
    assert err == ""


def test_naive_fails_on_the_huge_float32_case_without_warnings(capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy RuntimeWarning would raise here
        ok, out, err = verdict(naive, capsys)
    assert ok is False
    assert "case 4 (float32 scores near 1000)\n  contains NaN" in out
    assert "contains NaN" in out and "expected:" in out and "got:" in out
    assert err == ""


def test_naive_fails_the_float16_case_on_its_own(capsys):
    def naive_only_in_float16(x):
        return naive(x) if x.dtype == np.float16 else stable(x)

    ok, out, _ = verdict(naive_only_in_float16, capsys)
    assert ok is False
    assert "case 5 (float16 scores up to 12" in out


def test_wrong_axis_fails_on_the_matrix_case(capsys):
    def over_queries(x):
        e = np.exp(x - x.max(axis=0, keepdims=True))
        return e / e.sum(axis=0, keepdims=True)

    ok, out, _ = verdict(over_queries, capsys)
    assert ok is False
    assert "case 2 (a (2, 3) score matrix: each row (query) must sum to 1)\n  values differ" in out


def test_normalising_over_everything_fails(capsys):
    def whole_array(x):
        e = np.exp(x - x.max())
        return e / e.sum()

    ok, out, _ = verdict(whole_array, capsys)
    assert ok is False
    assert "case 2 (" in out


def test_global_maximum_fails_on_rows_of_different_scales(capsys):
    def global_max(x):
        e = np.exp(x - x.max())
        return e / e.sum(axis=-1, keepdims=True)

    ok, out, _ = verdict(global_max, capsys)
    assert ok is False
    assert "case 7 (rows on very different scales" in out


def test_adding_the_maximum_instead_of_subtracting_fails(capsys):
    def wrong_sign(x):
        e = np.exp(x + x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    ok, out, _ = verdict(wrong_sign, capsys)
    assert ok is False
    assert "case 4 (float32 scores near 1000" in out


def test_forgetting_to_normalise_fails_on_the_first_case(capsys):
    def unnormalised(x):
        return np.exp(x - x.max(axis=-1, keepdims=True))

    ok, out, _ = verdict(unnormalised, capsys)
    assert ok is False
    assert "case 1 (one row of small scores, shape (3,))\n  values differ" in out


def test_float16_too_imprecise_for_float64_input_fails(capsys):
    def always_half(x):
        return stable(x.astype(np.float16))

    ok, out, _ = verdict(always_half, capsys)
    assert ok is False
    assert "case 1 (" in out


def test_reports_exceptions_and_wrong_shapes(capsys):
    def crashes(x):
        raise RuntimeError("boom")

    ok, out, _ = verdict(crashes, capsys)
    assert ok is False
    assert "case 1 (one row of small scores, shape (3,)) raised RuntimeError: boom" in out

    def keeps_one_column(x):
        return stable(x)[..., :1]

    ok, out, _ = verdict(keeps_one_column, capsys)
    assert ok is False
    assert "shape (1,) instead of (3,)" in out


def test_reader_cannot_spoil_the_cases_by_writing_into_the_input(capsys):
    def in_place(x):
        x -= x.max(axis=-1, keepdims=True)
        np.exp(x, out=x)
        x /= x.sum(axis=-1, keepdims=True)
        return x

    ok, _, _ = verdict(in_place, capsys)
    assert ok is True


def test_tolerances_follow_the_dtype_of_each_case(capsys):
    def off_by_half_a_thousandth_in_float16(x):
        weights = stable(x)
        return weights + np.float16(5e-4) if x.dtype == np.float16 else weights

    ok, out, _ = verdict(off_by_half_a_thousandth_in_float16, capsys)
    assert ok is True, out

    def off_by_1e_7_in_float64(x):
        return stable(x) + 1e-7 if x.dtype == np.float64 else stable(x)

    ok, out, _ = verdict(off_by_1e_7_in_float64, capsys)
    assert ok is False
    assert "case 1 (one row of small scores, shape (3,))\n  values differ" in out


def test_infinite_weights_are_reported_as_a_difference(capsys):
    def with_inf(x):
        weights = stable(x)
        weights[..., 0] = np.inf
        return weights

    ok, out, _ = verdict(with_inf, capsys)
    assert ok is False
    assert "case 1 (one row of small scores, shape (3,))\n  values differ" in out and "inf" in out


def test_rejects_something_that_is_not_a_function():
    with pytest.raises(TypeError, match="check_stable_softmax needs a function, got ndarray"):
        exercises.check_stable_softmax(np.zeros(3))


def test_cases_cover_huge_float32_and_float16_inputs():
    cases = _stable_softmax_cases()
    dtypes = [case.args[0].dtype for case in cases]
    assert np.dtype(np.float16) in dtypes and np.dtype(np.float32) in dtypes
    assert any(case.args[0].dtype == np.float32 and case.args[0].max() >= 1000 for case in cases)
    for case in cases:  # each case's tolerances are those of its dtype
        assert (case.atol, case.rtol) == _TOLERANCES[case.args[0].dtype]
    for case in cases:  # every reference answer is finite and sums to 1 along the last axis
        weights = reference_softmax(case.args[0]).astype(np.float64)
        assert np.isfinite(weights).all()
        assert np.allclose(weights.sum(axis=-1), 1.0, atol=1e-2)
