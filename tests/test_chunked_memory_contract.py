"""chunked_attention's memory and peak_tensor_bytes' accounting (chapter 12).

Written against the survivors of `make mutate-package` in `layers/chunked.py`
(docs/mutation-score.md) that change memory, not values: the in-place path
(one reused tile of scores, the mask applied in place), the condition that
chooses it, and how `peak_tensor_bytes` counts tensors that are freed and
results that hold more than tensors.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from selfattention.layers.chunked import chunked_attention, peak_tensor_bytes

BLOCK = 64
TILE_BYTES = 4 * BLOCK * BLOCK  # one float32 (b_q, b_k) tile of scores: 16 KiB


def inputs(t_q: int, t_k: int, width: int = 1) -> tuple[torch.Tensor, ...]:
    """Seeded float32 query, key and value, ``(T, width)`` each."""
    torch.manual_seed(0)
    return torch.randn(t_q, width), torch.randn(t_k, width), torch.randn(t_k, width)


def with_grad_mode(*args: torch.Tensor, **options: object) -> torch.Tensor:
    """chunked_attention with autograd recording on (peak_tensor_bytes turns it off)."""
    with torch.enable_grad():
        return chunked_attention(*args, **options)


@pytest.mark.parametrize("causal", [False, True])
def test_chunked_attention_holds_one_tile_of_scores_at_a_time(causal: bool) -> None:
    """Four full tiles, one float32 buffer: never a second (b_q, b_k) tile alive."""
    query, key, value = inputs(2 * BLOCK, 2 * BLOCK)
    peak = peak_tensor_bytes(chunked_attention, query, key, value, causal, block_size=BLOCK)
    mask_bytes = BLOCK * BLOCK if causal else 0  # a diagonal tile's boolean mask
    assert TILE_BYTES + mask_bytes <= peak < 2 * TILE_BYTES, peak


def test_the_reused_tile_holds_every_batch_element() -> None:
    """Batch 3: the one buffer is (N, b_q, b_k), three tiles' bytes, allocated once."""
    torch.manual_seed(0)
    batch = 3
    query, key, value = (torch.randn(batch, 2 * BLOCK, 1) for _ in range(3))
    peak = peak_tensor_bytes(chunked_attention, query, key, value, block_size=BLOCK)
    assert batch * TILE_BYTES <= peak < (batch + 1) * TILE_BYTES, peak


def test_each_key_tile_costs_only_its_rows_of_the_values_with_ones() -> None:
    """Two more key tiles add their [V | 1] rows, 2 b (d_v + 1) floats, and no scores."""
    query, key, value = inputs(BLOCK, 4 * BLOCK)
    two_tiles = peak_tensor_bytes(
        chunked_attention, query, key[: 2 * BLOCK], value[: 2 * BLOCK], block_size=BLOCK
    )
    four_tiles = peak_tensor_bytes(chunked_attention, query, key, value, block_size=BLOCK)
    assert four_tiles - two_tiles == 4 * (2 * BLOCK) * (1 + 1)


@pytest.mark.parametrize("causal", [False, True])
def test_grad_mode_without_a_tensor_that_requires_grad_takes_the_in_place_path(
    causal: bool,
) -> None:
    """Recording on but nothing to record: the same peak as under no_grad."""
    query, key, value = inputs(2 * BLOCK, 2 * BLOCK)
    options = {"causal": causal, "block_size": BLOCK}
    without = peak_tensor_bytes(chunked_attention, query, key, value, **options)
    recording = peak_tensor_bytes(with_grad_mode, query, key, value, **options)
    assert recording == without


@pytest.mark.parametrize("which", ["query", "key", "value"])
def test_the_gradient_of_one_input_alone_matches_torch(which: str) -> None:
    """Only one of query, key and value requires grad: full tiles, causal, like SDPA."""
    torch.manual_seed(0)
    tensors = {name: torch.randn(1, 8, 4, dtype=torch.float64) for name in ("q", "k", "v")}
    chosen = {"query": "q", "key": "k", "value": "v"}[which]
    ours = tensors[chosen].clone().requires_grad_()
    theirs = tensors[chosen].clone().requires_grad_()
    args_ours = [ours if name == chosen else tensors[name] for name in ("q", "k", "v")]
    args_theirs = [theirs if name == chosen else tensors[name] for name in ("q", "k", "v")]
    chunked_attention(*args_ours, causal=True, block_size=4).square().sum().backward()
    F.scaled_dot_product_attention(*args_theirs, is_causal=True).square().sum().backward()
    assert ours.grad is not None and theirs.grad is not None
    assert torch.allclose(ours.grad, theirs.grad, atol=1e-12)


def test_peak_tensor_bytes_counts_a_tensor_made_after_others_were_freed() -> None:
    """Two 4000-byte temporaries, each freed, then an 8000-byte result: the peak is 8000."""

    def temporaries_then_a_larger_result(x: torch.Tensor) -> torch.Tensor:
        first = x * 2
        del first
        second = x * 2
        del second
        return torch.cat([x, x])

    assert peak_tensor_bytes(temporaries_then_a_larger_result, torch.ones(1000)) == 8000


def test_peak_tensor_bytes_counts_gradients_from_an_operation_that_also_returns_none() -> None:
    """A backward pass: convolution_backward returns (None, grad_weight, None) here."""
    torch.manual_seed(0)
    weight = torch.randn(64, 64, 1, requires_grad=True)  # 16 KiB of float32

    def training_step(x: torch.Tensor) -> None:
        with torch.enable_grad():
            F.conv1d(x, weight).sum().backward()  # x needs no gradient: (None, dW, None)

    peak = peak_tensor_bytes(training_step, torch.randn(1, 64, 1))
    assert weight.grad is not None
    # The gradient, 16 KiB, plus the loss and its seed gradient (4 bytes each).
    assert weight.grad.nbytes <= peak < weight.grad.nbytes + 1024, peak
