"""selfattention.masks: the edges and messages that mutmut showed no other test pins down.

Each test here fails on mutants that survived tests/test_mask_converters.py and
tests/test_bad_inputs.py (docs/mutation-score.md): error messages must name
the argument (and give a hint where the function has one), zero sizes are
allowed where the docstring allows them, float lengths are refused, and the
result stays on the input's device.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from selfattention.masks import (
    causal_mask,
    from_additive,
    from_attention_mask,
    padding_mask,
    to_additive,
    to_key_padding_mask,
    to_mha_attn_mask,
)


@pytest.mark.parametrize(
    "args, kwargs, error, name",
    [
        ((-1,), {}, ValueError, "length"),
        ((-1, 2), {}, ValueError, "t_q"),
        ((2, -1), {}, ValueError, "t_k"),
        ((2, 2.0), {}, TypeError, "t_k"),
        ((3,), {"window": 0}, ValueError, "window"),
        ((3,), {"window": 1.5}, TypeError, "window"),
    ],
)
def test_causal_mask_errors_name_the_argument(args, kwargs, error, name):
    with pytest.raises(error, match=rf"\b{name}\b"):
        causal_mask(*args, **kwargs)


def test_causal_mask_align_errors_say_what_was_given():
    with pytest.raises(TypeError, match=r"align must be one of .*got int 5"):
        causal_mask(2, align=5)
    with pytest.raises(ValueError, match=r"align must be one of .*got 'middle'"):
        causal_mask(2, align="middle")


def test_causal_mask_allows_zero_keys_and_queries():
    assert causal_mask(2, 0).shape == (2, 0)
    assert causal_mask(0, 3).shape == (0, 3)
    assert causal_mask(2, 0, align="bottom-right").shape == (2, 0)


def test_padding_mask_allows_zero_lengths_and_empty_batches():
    assert padding_mask([0, 2]).tolist() == [[False, False], [True, True]]
    assert padding_mask([0]).shape == (1, 0)
    assert padding_mask([0], max_len=0).shape == (1, 0)
    empty = padding_mask([])
    assert empty.shape == (0, 0) and empty.dtype == np.bool_
    assert padding_mask([], max_len=3).shape == (0, 3)


@pytest.mark.parametrize("lengths", [[1.5, 2.0], [2.0], np.array([1.0], dtype=np.float32)])
def test_padding_mask_refuses_float_lengths(lengths):
    with pytest.raises(TypeError, match=r"lengths must hold integers, got dtype float"):
        padding_mask(lengths)


def test_padding_mask_refuses_an_empty_float32_array():
    with pytest.raises(TypeError, match=r"lengths must hold integers"):
        padding_mask(np.array([], dtype=np.float32))


@pytest.mark.parametrize(
    "call, error, pattern",
    [
        (lambda: padding_mask([[1, 2]]), ValueError, r"lengths must be 1-D \(B,\), got shape"),
        (
            lambda: padding_mask([2, -1]),
            ValueError,
            r"lengths must be non-negative, got \[2, -1\]",
        ),
        (lambda: padding_mask([3], max_len=2), ValueError, r"max_len=2 is shorter"),
        (lambda: padding_mask([1], max_len=-1), ValueError, r"\bmax_len\b"),
        (lambda: padding_mask([1], max_len=1.0), TypeError, r"\bmax_len\b"),
        (
            lambda: padding_mask([[1], [1, 2]]),
            TypeError,
            r"^lengths must be an array or tensor, got list that numpy",
        ),
        (
            lambda: padding_mask(torch.Size([2, 1])),
            TypeError,
            r"^lengths must be a tensor or array, got Size$",
        ),
        (
            lambda: padding_mask(torch.ones(2, dtype=torch.int64, device="meta")),
            ValueError,
            r"^lengths is on the meta device, which holds no values \(Tensor of shape",
        ),
    ],
)
def test_padding_mask_errors_name_the_argument(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_padding_mask_of_a_list_of_lengths_in_a_tensor_too():
    mask = padding_mask(torch.tensor([1, 3]))
    assert isinstance(mask, torch.Tensor) and mask.device.type == "cpu"
    assert mask.tolist() == [[True, False, False], [True, True, True]]


def test_to_additive_stays_on_the_inputs_device_whatever_the_default():
    keep = torch.tensor([True, False])
    with torch.device("meta"):
        additive = to_additive(keep)
    assert additive.device.type == "cpu"
    assert additive.tolist() == [0.0, float("-inf")]


def test_to_additive_errors_name_the_argument_and_hint():
    with pytest.raises(TypeError, match=r"\bkeep\b.*\bto_additive converts a boolean mask\b"):
        to_additive(np.array([0.0, 1.0]))
    with pytest.raises(TypeError, match=r"dtype must be a floating numpy dtype, got 'no such'"):
        to_additive(np.array([True]), dtype="no such")
    with pytest.raises(TypeError, match=r"dtype must be a floating torch dtype"):
        to_additive(torch.tensor([True]), dtype=torch.int64)


def test_from_additive_thresholds():
    additive = np.array([0.0, -np.inf, -1e9])
    with pytest.raises(ValueError, match=r"neither 0"):
        from_additive(additive, threshold=-np.inf)  # -1e9 is above -inf: a bias, refused
    assert from_additive(np.array([0.0, -np.inf]), threshold=-np.inf).tolist() == [True, False]
    with pytest.raises(ValueError, match=r"\bthreshold\b"):
        from_additive(additive, threshold=np.inf)


def test_from_additive_errors_say_what_was_given():
    with pytest.raises(TypeError, match=r"got dtype torch\.int64 with shape \(2,\)"):
        from_additive(torch.tensor([0, 1]))
    with pytest.raises(TypeError, match=r"got dtype int64 with shape \(1, 2\)"):
        from_additive([[0, 1]])
    with pytest.raises(ValueError, match=r"holds 0\.5, which is neither 0"):
        from_additive(np.array([0.0, 0.5]))
    with pytest.raises(ValueError, match=r"^additive is on the meta device"):
        from_additive(torch.zeros(2, device="meta"))


def test_from_additive_reads_bfloat16():
    additive = torch.tensor([0.0, float("-inf")], dtype=torch.bfloat16)
    assert from_additive(additive).tolist() == [True, False]


def test_to_mha_attn_mask_says_why_num_heads_is_needed():
    with pytest.raises(
        ValueError, match=r": nn\.MultiheadAttention wants \(B \* num_heads, T_q, T_k\)$"
    ):
        to_mha_attn_mask(np.ones((2, 3, 3), dtype=bool))


def test_to_key_padding_mask_shapes_and_messages():
    with pytest.raises(ValueError, match=r"\(B, 1, 1, T_k\), got \(2, 2, 1, 3\)"):
        to_key_padding_mask(np.ones((2, 2, 1, 3), dtype=bool))
    with pytest.raises(
        TypeError, match=r"\bkeep\b.*\bfor a tokenizer's 1/0 mask use from_attention_mask first\b"
    ):
        to_key_padding_mask(np.ones((2, 3), dtype=np.int64))


def test_from_attention_mask_messages():
    with pytest.raises(ValueError, match=r"^attention_mask .*use from_additive$"):
        from_attention_mask(np.array([[0, 2]]))
    with pytest.raises(TypeError, match=r"^attention_mask must be an array or tensor"):
        from_attention_mask([[1], [1, 0]])
