"""selfattention.layers: behaviour that mutmut showed no other unit test pins down.

Each test fails on mutants that survived the layers' own tests
(docs/mutation-score.md): MultiHeadAttention.from_torch keeps the module's
dropout and dtype and says why it refuses a module; KVCache's repr and reset;
permute_rotary_rows refuses zero rows; MultiHeadLatentAttention's cache
checks name what is wrong. Public behaviour only, so refactors keep them.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from selfattention import KVCache, MultiHeadAttention, MultiHeadLatentAttention
from selfattention.layers.rotary import permute_rotary_rows


def test_from_torch_keeps_the_modules_dropout():
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True)
    copy = MultiHeadAttention.from_torch(reference).train()
    x = torch.randn(1, 5, 8)  # (B, T, d_model)
    first, second = copy(x)[0], copy(x)[0]
    assert not torch.equal(first, second)  # two dropout draws differ
    copy.eval()
    assert torch.equal(copy(x)[0], copy(x)[0])


def test_from_torch_keeps_the_modules_dtype():
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64).eval()
    copy = MultiHeadAttention.from_torch(reference)
    assert {p.dtype for p in copy.parameters()} == {torch.float64}
    x = torch.randn(2, 4, 8, dtype=torch.float64)  # (B, T, d_model)
    ours = copy(x)[0]
    theirs = reference(x, x, x, need_weights=False)[0]
    assert ours.dtype == torch.float64
    assert torch.allclose(ours, theirs, atol=1e-12)


def test_from_torch_says_why_it_refuses_a_module():
    with pytest.raises(
        TypeError, match=r"module must be a torch\.nn\.MultiheadAttention, got Linear$"
    ):
        MultiHeadAttention.from_torch(nn.Linear(2, 2))
    with pytest.raises(
        ValueError, match=r"^module uses add_bias_kv or add_zero_attn; not supported$"
    ):
        MultiHeadAttention.from_torch(
            nn.MultiheadAttention(8, 2, add_bias_kv=True, batch_first=True)
        )
    with pytest.raises(
        ValueError,
        match=r"^module has batch_first=False: it reads \(T, B, d_model\) while this "
        r"module reads \(B, T, d_model\); build it with batch_first=True$",
    ):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2))


def test_kv_cache_repr_and_reset():
    cache = KVCache()
    assert repr(cache) == "KVCache(length=0, key shape=None)"
    cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    assert repr(cache) == "KVCache(length=3, key shape=(1, 2, 3, 4))"
    cache.reset()
    assert cache.key is None and cache.value is None and len(cache) == 0
    assert repr(cache) == "KVCache(length=0, key shape=None)"


def test_permute_rotary_rows_refuses_zero_rows():
    with pytest.raises(ValueError):
        permute_rotary_rows(torch.zeros(0, 4), 1, "half", "interleaved")


def test_latent_cache_checks_name_what_is_wrong():
    torch.manual_seed(0)
    mla = MultiHeadLatentAttention(12, 4, latent_dim=3, rope_dim=2).eval()
    cache = KVCache()
    with torch.no_grad():
        mla(torch.randn(2, 3, 12), causal=True, cache=cache)  # a batch of 2 cached
        with pytest.raises(
            ValueError,
            match=r"^cache holds latents of shape \(2, 1, 3, 3\), but this call needs "
            r"\(B, 1, T, latent_dim\) = \(1, 1, T, 3\); use one KVCache per layer and per batch$",
        ):
            mla(torch.randn(1, 1, 12), causal=True, cache=cache)
    other = KVCache()
    other.append(torch.zeros(1, 1, 2, 3), torch.zeros(1, 1, 2, 5))  # rotary keys 5 wide, not 2
    with pytest.raises(
        ValueError, match=r"^cache holds rotary keys of shape .*\(B, 1, T, rope_dim\)"
    ):
        mla(torch.randn(1, 1, 12), causal=True, cache=other)
    with pytest.raises(TypeError, match=r"^cache must be a KVCache, got dict$"):
        mla(torch.randn(1, 1, 12), cache={})
