"""Chapter 2: the toy video catalogue and the soft-lookup checker."""

import numpy as np
import pytest

from selfattention import Catalogue, softmax, video_catalogue
from selfattention.exercises import check_soft_lookup

# --- the catalogue -------------------------------------------------------------------


def test_catalogue_shapes_and_axes():
    catalogue = video_catalogue()
    assert catalogue.n_items == len(catalogue.titles) == 6
    assert catalogue.keys.shape == (catalogue.n_items, catalogue.d_k) == (6, 4)
    assert catalogue.values.shape == (catalogue.n_items, catalogue.d_v) == (6, 3)
    assert catalogue.key_axes == ("fantasy", "crime", "comedy", "nature")
    assert catalogue.value_axes == ("hours", "episodes", "stars")
    assert len(set(catalogue.titles)) == catalogue.n_items
    assert catalogue.keys.dtype == catalogue.values.dtype == np.float64
    assert ((catalogue.keys >= 0) & (catalogue.keys <= 1)).all()


def test_catalogue_is_read_only_and_fresh_each_call():
    catalogue = video_catalogue()
    with pytest.raises(ValueError):
        catalogue.keys[0, 0] = 5.0
    with pytest.raises(ValueError):
        catalogue.values[0, 0] = 5.0
    with pytest.raises(AttributeError):
        catalogue.titles = ("x",)
    assert video_catalogue() is not catalogue
    np.testing.assert_array_equal(video_catalogue().keys, catalogue.keys)


def test_every_item_is_the_unique_best_match_of_some_query():
    """The catalogue is usable for argmax demos: each item wins for its own key."""
    catalogue = video_catalogue()
    scores = catalogue.keys @ catalogue.keys.T  # (n_items, n_items)
    for row, title in enumerate(catalogue.titles):
        best = np.flatnonzero(scores[row] == scores[row].max())
        assert list(best) == [row], title


def test_query_builds_a_vector_from_axis_names():
    catalogue = video_catalogue()
    np.testing.assert_array_equal(catalogue.query(crime=1, comedy=0.5), [0.0, 1.0, 0.5, 0.0])
    assert catalogue.query(nature=2).shape == (catalogue.d_k,)


def test_as_dict_is_the_hard_lookup_table():
    catalogue = video_catalogue()
    table = catalogue.as_dict()
    assert list(table) == list(catalogue.titles)
    np.testing.assert_array_equal(table["The Last Heist"], catalogue.values[1])


@pytest.mark.parametrize(
    "kwargs,error,pattern",
    [
        ({}, ValueError, r"name at least one key axis"),
        ({"horror": 1.0}, ValueError, r"unknown key axis 'horror'; the axes are \('fantasy'"),
        ({"crime": "a lot"}, TypeError, r"crime must be a real number, got str"),
        ({"crime": True}, TypeError, r"crime must be a real number, got bool"),
        ({"crime": float("nan")}, ValueError, r"crime must be finite, got nan"),
    ],
)
def test_query_bad_inputs(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        video_catalogue().query(**kwargs)


@pytest.mark.parametrize(
    "args,error,pattern",
    [
        (
            (("a", "b"), np.zeros((3, 2)), np.zeros((2, 1)), ("x", "y"), ("v",)),
            ValueError,
            r"one row per title: 2 titles, keys has shape \(3, 2\), values has shape \(2, 1\)",
        ),
        (
            (("a", "b"), np.zeros((2, 2)), np.zeros((2, 1)), ("x",), ("v",)),
            ValueError,
            r"key_axes names 1 axes but keys has shape \(2, 2\)",
        ),
        (
            (("a", "b"), np.zeros((2, 2)), np.zeros((2, 1)), ("x", "y"), ("v", "w")),
            ValueError,
            r"value_axes names 2 axes but values has shape \(2, 1\)",
        ),
        (
            (("a", "a"), np.zeros((2, 2)), np.zeros((2, 1)), ("x", "y"), ("v",)),
            ValueError,
            r"titles must be distinct",
        ),
        (
            (("a",), np.zeros(2), np.zeros((1, 1)), ("x", "y"), ("v",)),
            ValueError,
            r"keys must be 2-D \(n_items, d\), got shape \(2,\)",
        ),
        (
            (("a",), np.full((1, 2), np.nan), np.zeros((1, 1)), ("x", "y"), ("v",)),
            ValueError,
            r"keys contains NaN \(shape \(1, 2\)\)",
        ),
        (
            (("a",), np.zeros((1, 2)), np.full((1, 1), np.inf), ("x", "y"), ("v",)),
            ValueError,
            r"values must be finite \(shape \(1, 1\)\)",
        ),
        (
            (("a",), np.array([["p", "q"]]), np.zeros((1, 1)), ("x", "y"), ("v",)),
            TypeError,
            r"keys must hold real numbers",
        ),
        (
            ("ab", np.zeros((2, 2)), np.zeros((2, 1)), ("x", "y"), ("v",)),
            TypeError,
            r"titles must be a sequence of strings",
        ),
    ],
)
def test_catalogue_bad_inputs(args, error, pattern):
    with pytest.raises(error, match=pattern):
        Catalogue(*args)


# --- the checker ---------------------------------------------------------------------


def right_soft_lookup(query, keys, values, temperature):
    weights = softmax(keys @ query / temperature)  # (T_k,)
    return weights @ values  # (d_v,)


def test_soft_lookup_checker_accepts_right_answer(capsys):
    assert check_soft_lookup(right_soft_lookup) is True
    assert capsys.readouterr().out.startswith("✓ check_soft_lookup: all 6 cases pass")


def test_soft_lookup_checker_rejects_multiplying_by_temperature(capsys):
    def multiplies(query, keys, values, temperature):
        return softmax(keys @ query * temperature) @ values

    assert check_soft_lookup(multiplies) is False
    out = capsys.readouterr().out
    assert "case 3 (the catalogue, query crime + comedy, temperature 2)\n  values differ" in out
    assert "expected:" in out and "got:" in out


def test_soft_lookup_checker_rejects_hard_lookup(capsys):
    def hard(query, keys, values, temperature):
        return values[np.argmax(keys @ query)]

    assert check_soft_lookup(hard) is False
    assert "case 1 (one key matches, temperature 1)\n  values differ" in capsys.readouterr().out


def test_soft_lookup_checker_rejects_unnormalised_weights(capsys):
    def raw_scores(query, keys, values, temperature):
        return (keys @ query / temperature) @ values

    assert check_soft_lookup(raw_scores) is False
    assert "case 1 (one key matches, temperature 1)" in capsys.readouterr().out


def test_soft_lookup_checker_catches_overflowing_exp(capsys):
    def bare_exp(query, keys, values, temperature):
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(keys @ query / temperature)
            return (e / e.sum()) @ values

    assert check_soft_lookup(bare_exp) is False
    out = capsys.readouterr().out
    assert "case 6 (large scores (900 and 870), where a bare exp overflows)\n  contains NaN" in out


def test_soft_lookup_checker_reports_wrong_shape(capsys):
    def keeps_rows(query, keys, values, temperature):
        return softmax(keys @ query / temperature)[:, None] * values  # (T_k, d_v), no sum

    assert check_soft_lookup(keeps_rows) is False
    assert "shape (2, 1) instead of (1,)" in capsys.readouterr().out
