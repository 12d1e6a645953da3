"""Chapter 16's exercise checkers: right answers pass, the usual mistakes fail."""

import itertools

import torch

from selfattention.exercises import check_causal_key_blocks, check_kv_head_offset
from selfattention.exercises.ch16 import (
    reference_causal_key_blocks,
    reference_kv_head_offset,
)


def test_kv_head_offset_reference_is_the_enable_gqa_layout():
    # Number every element of a contiguous (B, h_kv, T_k, d_k) key tensor,
    # expand it to h query heads as SDPA's enable_gqa does (repeat_interleave),
    # and read the number at the first key of each (b, r).
    for batch, heads, kv_heads, t_k, d_k in [(2, 4, 4, 3, 2), (3, 8, 2, 5, 4), (2, 6, 1, 2, 3)]:
        numbers = torch.arange(batch * kv_heads * t_k * d_k).reshape(batch, kv_heads, t_k, d_k)
        expanded = numbers.repeat_interleave(heads // kv_heads, dim=1)  # (B, h, T_k, d_k)
        for program in range(batch * heads):
            b, r = divmod(program, heads)
            expected = expanded[b, r, 0, 0].item()
            assert reference_kv_head_offset(program, heads, kv_heads, t_k, d_k) == expected


def test_causal_key_blocks_reference_counts_the_blocks_with_a_visible_key():
    for program, block_m, block_n, t_k in itertools.product(
        range(5), (16, 32), (16, 64), (5, 40, 100)
    ):
        last_query = (program + 1) * block_m - 1
        blocks = {j // block_n for j in range(t_k) if j <= last_query}
        assert reference_causal_key_blocks(program, block_m, block_n, t_k) == len(blocks)


def test_kv_head_offset_checker(capsys):
    def right(program, num_heads, num_kv_heads, t_k, d_k):
        b, r = program // num_heads, program % num_heads
        return (b * num_kv_heads + r * num_kv_heads // num_heads) * t_k * d_k

    assert check_kv_head_offset(right) is True
    assert capsys.readouterr().out.startswith("✓ check_kv_head_offset: all 8 cases pass")

    def modulo(program, num_heads, num_kv_heads, t_k, d_k):  # the layout of .repeat
        b, r = divmod(program, num_heads)
        return (b * num_kv_heads + r % num_kv_heads) * t_k * d_k

    assert check_kv_head_offset(modulo) is False
    assert "case 3 (grouped: h = 8, h_kv = 4, program 3" in capsys.readouterr().out

    def no_batch(program, num_heads, num_kv_heads, t_k, d_k):
        r = program % num_heads
        return r // (num_heads // num_kv_heads) * t_k * d_k

    assert check_kv_head_offset(no_batch) is False
    assert "case 7 (batch entry 1" in capsys.readouterr().out

    def query_head_count(program, num_heads, num_kv_heads, t_k, d_k):  # b h instead of b h_kv
        b, r = divmod(program, num_heads)
        return (b * num_heads + r // (num_heads // num_kv_heads)) * t_k * d_k

    assert check_kv_head_offset(query_head_count) is False
    assert "case 7" in capsys.readouterr().out


def test_causal_key_blocks_checker(capsys):
    def right(program, block_m, block_n, t_k):
        end = min((program + 1) * block_m, t_k)
        return (end + block_n - 1) // block_n

    assert check_causal_key_blocks(right) is True
    assert capsys.readouterr().out.startswith("✓ check_causal_key_blocks: all 7 cases pass")

    def no_cap(program, block_m, block_n, t_k):  # forgets that there are only t_k keys
        return ((program + 1) * block_m + block_n - 1) // block_n

    assert check_causal_key_blocks(no_cap) is False
    assert "case 6 (T_q > T_k" in capsys.readouterr().out

    def floor(program, block_m, block_n, t_k):  # drops the last, partial block
        return min((program + 1) * block_m, t_k) // block_n

    assert check_causal_key_blocks(floor) is False
    assert "case 4 (block_m = 16, block_n = 64" in capsys.readouterr().out

    def from_first_query(program, block_m, block_n, t_k):  # the first query's keys only
        return min(program * block_m + 1, t_k) // block_n + 1

    assert check_causal_key_blocks(from_first_query) is False
    assert "case 3 (block_m = 64, block_n = 16" in capsys.readouterr().out
