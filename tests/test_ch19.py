"""Chapter 19's exercise checkers: right answers pass, the usual mistakes fail."""

import numpy as np

from selfattention.distributed import ring_tiles
from selfattention.exercises import check_causal_scores, check_ring_bytes, check_ring_step
from selfattention.exercises.ch19 import reference_causal_scores, reference_ring_step


def test_causal_scores_reference_counts_the_masked_score_matrix():
    # Count, position by position, the scores of the tiles a rank computes.
    for world, layout, t in [(1, "zigzag", 8), (2, "contiguous", 8), (4, "zigzag", 16)]:
        chunks = world if layout == "contiguous" else 2 * world
        chunk = t // chunks
        for rank in range(world):
            tiles = ring_tiles(world, rank, layout)
            visible = sum(
                (q_chunk * chunk + i) >= (k_chunk * chunk + j)
                for q_chunk, k_chunk in tiles
                for i in range(chunk)
                for j in range(chunk)
            )
            assert reference_causal_scores(world, rank, layout, t) == len(tiles) * chunk**2
            assert visible <= len(tiles) * chunk**2


def test_causal_scores_checker(capsys):
    def right(world_size, rank, layout, seq_len):
        if layout == "contiguous":
            return (rank + 1) * (seq_len // world_size) ** 2
        return (2 * world_size + 1) * (seq_len // (2 * world_size)) ** 2

    assert check_causal_scores(right) is True
    assert capsys.readouterr().out.startswith("✓ check_causal_scores: all 8 cases pass")

    def visible_only(world_size, rank, layout, seq_len):  # counts only the unmasked half
        chunk = seq_len // world_size
        return rank * chunk**2 + chunk * (chunk + 1) // 2

    assert check_causal_scores(visible_only) is False
    assert "case 1 (one rank, contiguous" in capsys.readouterr().out

    def zigzag_like_contiguous(world_size, rank, layout, seq_len):
        return (rank + 1) * (seq_len // world_size) ** 2

    assert check_causal_scores(zigzag_like_contiguous) is False
    assert "case 2 (one rank, zigzag" in capsys.readouterr().out


def test_ring_bytes_checker(capsys):
    def right(world_size, batch, num_kv_heads, seq_len, d_k, d_v, element_size):
        return (
            (world_size - 1)
            * batch
            * num_kv_heads
            * seq_len
            // world_size
            * (d_k + d_v)
            * element_size
        )

    assert check_ring_bytes(right) is True
    assert capsys.readouterr().out.startswith("✓ check_ring_bytes: all 5 cases pass")

    def every_block(
        world_size, batch, num_kv_heads, seq_len, d_k, d_v, element_size
    ):  # P, not P - 1
        return batch * num_kv_heads * seq_len * (d_k + d_v) * element_size

    assert check_ring_bytes(every_block) is False
    assert "case 1 (one rank" in capsys.readouterr().out

    def keys_twice(world_size, batch, num_kv_heads, seq_len, d_k, d_v, element_size):
        return (
            (world_size - 1)
            * batch
            * num_kv_heads
            * seq_len
            // world_size
            * 2
            * d_k
            * element_size
        )

    assert check_ring_bytes(keys_twice) is False
    assert "case 4 (values wider than keys" in capsys.readouterr().out


def test_ring_step_reference_equals_softmax_over_the_visible_keys():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(4, 3)), rng.normal(size=(8, 3)), rng.normal(size=(8, 2))
    q_pos, k_pos = np.array([0, 1, 6, 7]), np.arange(8)
    state = (np.full(4, -np.inf), np.zeros(4), np.zeros((4, 2)))
    for block in (slice(0, 2), slice(6, 8), slice(2, 6)):  # zigzag arrival order
        state = reference_ring_step(*state, q, k[block], v[block], q_pos, k_pos[block], 0.5)
    m, z, o = state
    scores = np.where(k_pos[None] <= q_pos[:, None], q @ k.T * 0.5, -np.inf)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    expected = weights / weights.sum(axis=1, keepdims=True) @ v
    assert np.allclose(o / z[:, None], expected, atol=1e-12)


def test_ring_step_checker(capsys):
    assert check_ring_step(reference_ring_step) is True
    assert capsys.readouterr().out.startswith("✓ check_ring_step: all 6 cases pass")

    def naive(m, z, o, q, k, v, q_pos, k_pos, scale):  # -inf - -inf on a row that sees nothing
        s = np.where(k_pos[None] <= q_pos[:, None], q @ k.T * scale, -np.inf)
        m_new = np.maximum(m, s.max(axis=1))
        alpha, p = np.exp(m - m_new), np.exp(s - m_new[:, None])
        return m_new, z * alpha + p.sum(axis=1), o * alpha[:, None] + p @ v

    assert check_ring_step(naive) is False
    assert "case 4 (zigzag: keys 2-5 arrive" in capsys.readouterr().out

    def local_positions(m, z, o, q, k, v, q_pos, k_pos, scale):  # a mask by index, not position
        n_q, n_k = len(q_pos), len(k_pos)
        return reference_ring_step(m, z, o, q, k, v, np.arange(n_q), np.arange(n_k), scale)

    assert check_ring_step(local_positions) is False
    assert "case 1 (a block wholly in the past" in capsys.readouterr().out
