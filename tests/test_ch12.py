"""Chapter 12: the online-softmax exercise checker, right and wrong answers."""

import numpy as np

from selfattention import softmax
from selfattention.exercises import check_online_softmax_update
from selfattention.exercises.ch12 import reference_online_softmax_update


def right_update(m, z, o, scores, values):
    m_new = np.maximum(m, scores.max(axis=-1))  # (T_q,)
    alpha = np.exp(m - m_new)  # (T_q,)
    p = np.exp(scores - m_new[:, None])  # (T_q, b_k)
    return m_new, alpha * z + p.sum(axis=-1), alpha[:, None] * o + p @ values


def test_reference_folded_over_blocks_is_attention():
    rng = np.random.default_rng(0)
    scores, values = rng.normal(size=(4, 11)) * 3, rng.normal(size=(11, 2))
    m, z, o = np.full(4, -np.inf), np.zeros(4), np.zeros((4, 2))
    for start in range(0, 11, 3):
        m, z, o = reference_online_softmax_update(
            m, z, o, scores[:, start : start + 3], values[start : start + 3]
        )
    np.testing.assert_allclose(o / z[:, None], softmax(scores, axis=-1) @ values, atol=1e-12)
    np.testing.assert_allclose(m, scores.max(axis=-1))


def test_accepts_the_right_answer(capsys):
    assert check_online_softmax_update(right_update) is True
    assert capsys.readouterr().out.startswith("✓ check_online_softmax_update: all 5 cases pass")


def test_rejects_forgetting_to_rescale_the_running_sum(capsys):
    def no_rescale_sum(m, z, o, scores, values):
        m_new = np.maximum(m, scores.max(axis=-1))
        alpha = np.exp(m - m_new)
        p = np.exp(scores - m_new[:, None])
        return m_new, z + p.sum(axis=-1), alpha[:, None] * o + p @ values

    assert check_online_softmax_update(no_rescale_sum) is False
    out = capsys.readouterr().out
    assert "case 3 (a second block with higher scores" in out and "item 1: values differ" in out


def test_rejects_forgetting_to_rescale_the_output(capsys):
    def no_rescale_acc(m, z, o, scores, values):
        m_new = np.maximum(m, scores.max(axis=-1))
        alpha = np.exp(m - m_new)
        p = np.exp(scores - m_new[:, None])
        return m_new, alpha * z + p.sum(axis=-1), o + p @ values

    assert check_online_softmax_update(no_rescale_acc) is False
    assert "case 3 (a second block with higher scores" in capsys.readouterr().out


def test_rejects_keeping_the_old_max(capsys):
    def stale_max(m, z, o, scores, values):
        m_new = np.maximum(m, scores.max(axis=-1))
        alpha = np.exp(m - m_new)
        p = np.exp(scores - m_new[:, None])
        return m, alpha * z + p.sum(axis=-1), alpha[:, None] * o + p @ values

    assert check_online_softmax_update(stale_max) is False
    assert "case 1 (the first block" in capsys.readouterr().out


def test_rejects_exp_without_the_max(capsys):
    def no_max(m, z, o, scores, values):
        p = np.exp(scores)
        return np.maximum(m, scores.max(axis=-1)), z + p.sum(axis=-1), o + p @ values

    assert check_online_softmax_update(no_max) is False
    assert "case 1 (the first block" in capsys.readouterr().out


def test_rejects_the_max_over_the_wrong_axis(capsys):
    def wrong_axis(m, z, o, scores, values):
        m_new = np.maximum(m, scores.max())  # one max for every query: still exact maths,
        alpha = np.exp(m - m_new)  # but the returned m is not each query's max
        p = np.exp(scores - m_new[:, None])
        return m_new, alpha * z + p.sum(axis=-1), alpha[:, None] * o + p @ values

    assert check_online_softmax_update(wrong_axis) is False
    assert "item 0: values differ" in capsys.readouterr().out


def test_reports_a_crash_by_case(capsys):
    def crashes(m, z, o, scores, values):
        return m, z, o @ values  # shapes do not fit

    assert check_online_softmax_update(crashes) is False
    assert (
        "case 1 (the first block, from the empty state m = -inf, z = 0, o = 0) raised ValueError"
        in (capsys.readouterr().out)
    )
