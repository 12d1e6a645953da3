"""Chapter 9: the split-heads and key/value-expansion checkers, and their references."""

import doctest

import pytest
import torch
import torch.nn.functional as F

from selfattention import MultiHeadAttention
from selfattention.exercises import ch09, check_expand_kv_heads, check_split_heads
from selfattention.exercises.ch09 import reference_expand_kv_heads, reference_split_heads

# --- the references against the package and PyTorch ---------------------------------


def test_doctests_of_the_chapter_9_checkers():
    result = doctest.testmod(ch09)
    assert result.attempted >= 2 and result.failed == 0


def test_reference_split_matches_the_module_and_slices_features():
    torch.manual_seed(0)
    module = MultiHeadAttention(12, 3)
    x = torch.randn(2, 5, 12)  # (B, T, d_model)
    heads = reference_split_heads(x, 3)  # (B, h, T, d_head)
    torch.testing.assert_close(heads, module.split_heads(x), rtol=0, atol=0)
    for r in range(3):  # head r
        torch.testing.assert_close(heads[:, r], x[..., 4 * r : 4 * (r + 1)], rtol=0, atol=0)
    torch.testing.assert_close(module.merge_heads(heads), x, rtol=0, atol=0)


@pytest.mark.parametrize("num_heads,num_kv_heads", [(4, 2), (6, 3), (4, 1), (3, 3)])
def test_reference_expansion_matches_sdpa_enable_gqa(num_heads, num_kv_heads):
    generator = torch.Generator().manual_seed(1)
    q = torch.randn(2, num_heads, 5, 4, generator=generator, dtype=torch.float64)
    k = torch.randn(2, num_kv_heads, 7, 4, generator=generator, dtype=torch.float64)
    v = torch.randn(2, num_kv_heads, 7, 3, generator=generator, dtype=torch.float64)
    expected = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # (B, h, T_q, d_v)
    got = F.scaled_dot_product_attention(
        q, reference_expand_kv_heads(k, num_heads), reference_expand_kv_heads(v, num_heads)
    )
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def test_reference_expansion_matches_the_gqa_module():
    torch.manual_seed(0)
    module = MultiHeadAttention(16, 4, num_kv_heads=2).double()
    x = torch.randn(2, 6, 16, dtype=torch.float64)  # (B, T, d_model)
    output, _ = module(x)
    q = module.split_heads(module.q_proj(x))  # (B, 4, T, 4)
    k = reference_expand_kv_heads(module.split_heads(module.k_proj(x), 2), 4)  # (B, 4, T, 4)
    v = reference_expand_kv_heads(module.split_heads(module.v_proj(x), 2), 4)  # (B, 4, T, 4)
    context = F.scaled_dot_product_attention(q, k, v)  # (B, 4, T, 4)
    torch.testing.assert_close(module.out_proj(module.merge_heads(context)), output)


# --- check_split_heads ---------------------------------------------------------------


def view_and_transpose(x, num_heads):
    batch, length, d_model = x.shape
    return x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)


def reshape_and_permute(x, num_heads):
    batch, length, d_model = x.shape
    return x.reshape(batch, length, num_heads, -1).permute(0, 2, 1, 3)


def by_slicing(x, num_heads):
    d_head = x.shape[-1] // num_heads
    return torch.stack([x[..., r * d_head : (r + 1) * d_head] for r in range(num_heads)], dim=1)


@pytest.mark.parametrize("right", [view_and_transpose, reshape_and_permute, by_slicing])
def test_split_checker_accepts_right_answers(right, capsys):
    assert check_split_heads(right) is True
    assert capsys.readouterr().out.startswith("✓ check_split_heads: all 5 cases pass")


def test_split_checker_catches_the_bare_view(capsys):
    def bare_view(x, num_heads):
        batch, length, d_model = x.shape
        return x.view(batch, num_heads, length, d_model // num_heads)

    assert check_split_heads(bare_view) is False
    out = capsys.readouterr().out
    assert "✗ check_split_heads: case 1 (h = 2, T = 3, entries 10 i + l)\n  values differ" in out
    assert "values differ" in out and "expected:" in out and "got:" in out


def test_split_checker_catches_heads_that_take_every_h_th_feature(capsys):
    def interleaved(x, num_heads):
        batch, length, d_model = x.shape
        return x.view(batch, length, d_model // num_heads, num_heads).permute(0, 3, 1, 2)

    assert check_split_heads(interleaved) is False
    assert "case 1 (h = 2, T = 3, entries 10 i + l)\n  values differ" in (capsys.readouterr().out)


def test_split_checker_catches_a_missing_transpose_by_its_shape(capsys):
    def no_transpose(x, num_heads):
        batch, length, d_model = x.shape
        return x.view(batch, length, num_heads, d_model // num_heads)

    assert check_split_heads(no_transpose) is False
    assert (
        "case 1 (h = 2, T = 3, entries 10 i + l)\n  shape (1, 3, 2, 2) instead of (1, 2, 3, 2)"
        in (capsys.readouterr().out)
    )


def test_split_checker_reports_an_exception(capsys):
    def transposed_first(x, num_heads):
        batch, length, d_model = x.shape
        return x.transpose(1, 2).view(batch, num_heads, length, d_model // num_heads)

    assert check_split_heads(transposed_first) is False
    assert "case 1" in capsys.readouterr().out


# --- check_expand_kv_heads -----------------------------------------------------------


def repeat_interleave(kv, num_heads):
    return kv.repeat_interleave(num_heads // kv.shape[1], dim=1)


def expand_and_reshape(kv, num_heads):
    batch, num_kv_heads, length, d_head = kv.shape
    groups = num_heads // num_kv_heads
    return (
        kv[:, :, None]
        .expand(batch, num_kv_heads, groups, length, d_head)
        .reshape(batch, num_heads, length, d_head)
    )


@pytest.mark.parametrize("right", [repeat_interleave, expand_and_reshape])
def test_expand_checker_accepts_right_answers(right, capsys):
    assert check_expand_kv_heads(right) is True
    assert capsys.readouterr().out.startswith("✓ check_expand_kv_heads: all 5 cases pass")


def test_expand_checker_catches_repeat_instead_of_repeat_interleave(capsys):
    def tiled(kv, num_heads):
        return kv.repeat(1, num_heads // kv.shape[1], 1, 1)

    assert check_expand_kv_heads(tiled) is False
    out = capsys.readouterr().out
    assert "✗ check_expand_kv_heads: case 1 (kv heads 0, 1; 4 query heads)\n  values differ" in out
    assert "values differ" in out


def test_expand_checker_catches_the_wrong_axis(capsys):
    def wrong_axis(kv, num_heads):
        return kv.repeat_interleave(num_heads // kv.shape[1], dim=2)

    assert check_expand_kv_heads(wrong_axis) is False
    assert (
        "case 1 (kv heads 0, 1; 4 query heads)\n  shape (1, 2, 4, 3) instead of (1, 4, 2, 3)"
        in (capsys.readouterr().out)
    )


def test_expand_checker_catches_a_forgotten_expansion(capsys):
    def unchanged(kv, num_heads):
        return kv

    assert check_expand_kv_heads(unchanged) is False
    assert "shape (1, 2, 2, 3) instead of (1, 4, 2, 3)" in capsys.readouterr().out


def test_expand_checker_catches_an_expansion_that_only_works_for_multi_query(capsys):
    def only_mqa(kv, num_heads):
        return kv[:, :1].expand(kv.shape[0], num_heads, *kv.shape[2:])

    assert check_expand_kv_heads(only_mqa) is False
    assert "case 1" in capsys.readouterr().out


def test_failure_lines_fit_the_page(capsys):
    def bare_view(x, num_heads):
        batch, length, d_model = x.shape
        return x.view(batch, num_heads, length, d_model // num_heads)

    def tiled(kv, num_heads):
        return kv.repeat(1, num_heads // kv.shape[1], 1, 1)

    assert not check_split_heads(bare_view)
    assert not check_expand_kv_heads(tiled)
    for line in capsys.readouterr().out.splitlines():
        assert len(line) <= 79, line
