"""flash_attention's refusals say exactly what is wrong (chapter 16).

Written against the survivors of `make mutate-package TARGET=kernels`
(docs/mutation-score.md): messages that lost the layout or the shapes they
state, the argument they name, or the reason they give.
"""

from __future__ import annotations

import re

import pytest
import torch

from selfattention.kernels import flash_attention


def qkv(query=(1, 2, 16, 8), key=(1, 2, 16, 8), value=(1, 2, 16, 8), dtype=torch.float32):
    return tuple(torch.zeros(shape, dtype=dtype) for shape in (query, key, value))


@pytest.mark.parametrize(
    ("which", "layout"),
    [
        ("query", "(B, h, T_q, d_k)"),
        ("key", "(B, h_kv, T_k, d_k)"),
        ("value", "(B, h_kv, T_k, d_v)"),
    ],
)
def test_a_tensor_of_the_wrong_rank_is_told_its_layout(which, layout):
    shapes = {"query": (1, 2, 16, 8), "key": (1, 2, 16, 8), "value": (1, 2, 16, 8)}
    shapes[which] = (2, 16, 8)
    message = f"{which} must have 4 dimensions {layout}, got shape (2, 16, 8)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        flash_attention(*qkv(**shapes))


def test_a_shape_mismatch_states_all_three_shapes():
    message = (
        "query, key and value must share the batch size B, got "
        "query (1, 2, 16, 8), key (2, 2, 16, 8), value (2, 2, 16, 8)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        flash_attention(*qkv(key=(2, 2, 16, 8), value=(2, 2, 16, 8)))


def test_a_value_of_another_dtype_is_named():
    query, key, value = qkv()
    with pytest.raises(TypeError, match=r"^value has dtype torch\.float64"):
        flash_attention(query, key, value.double())


@pytest.mark.parametrize("name", ["block_m", "block_n"])
def test_a_block_that_is_not_a_power_of_two_is_told_why(name):
    message = (
        f"{name} must be a power of two of at least 16, got 24: block shapes "
        "are powers of two (tl.arange), and on a GPU the inner dimension of each "
        "tl.dot must be at least 16 for 16-bit inputs (b_k in the forward's P V and "
        "the backward's dS K, b_q in the backward's P^T dO and dS^T Q)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        flash_attention(*qkv(), **{name: 24})
