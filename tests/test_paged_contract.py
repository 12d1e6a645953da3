"""paged_forward's contract (chapter 18): each refusal names what is wrong, and changes nothing.

Written against the survivors of `make mutate-package` in
`paged_forward` (docs/mutation-score.md): messages that lost their
argument's name, and the dropout and dtype checks.
"""

from __future__ import annotations

import pytest
import torch

from selfattention import MultiHeadAttention, PagedKVCache, paged_forward

D_MODEL, HEADS = 8, 2


def layer(**options) -> MultiHeadAttention:
    torch.manual_seed(0)
    return MultiHeadAttention(d_model=D_MODEL, num_heads=HEADS, **options).eval()


def pool(**options) -> tuple[PagedKVCache, int]:
    settings = {"num_blocks": 4, "block_size": 2, "num_kv_heads": HEADS, "head_dim": 4}
    cache = PagedKVCache(**{**settings, **options})
    return cache, cache.new_sequence()


def refuses(error, match, attention, x, cache, seqs, **options) -> None:
    """The call raises `error` matching `match`, and the cache is as it was."""
    before = (repr(cache), cache.key.clone()) if isinstance(cache, PagedKVCache) else None
    with pytest.raises(error, match=match):
        paged_forward(attention, x, cache, seqs, **options)
    if before is not None:
        assert repr(cache) == before[0] and torch.equal(cache.key, before[1])


def test_the_module_and_the_cache_are_named_with_what_came():
    cache, seq = pool()
    x = torch.zeros(1, 1, D_MODEL)
    refuses(
        TypeError,
        r"^attention must be a MultiHeadAttention, got .*Linear",
        torch.nn.Linear(2, 2),
        x,
        cache,
        [seq],
    )
    refuses(TypeError, r"^cache must be a PagedKVCache, got .*dict", layer(), x, {}, [seq])


def test_reserve_must_be_a_bool_and_says_so():
    cache, seq = pool()
    refuses(
        TypeError, r"\breserve\b", layer(), torch.zeros(1, 1, D_MODEL), cache, [seq], reserve=1
    )


def test_a_window_is_refused_with_its_reason():
    cache, seq = pool()
    refuses(
        ValueError,
        r"window=2; paged_forward keeps every position and does not support sliding windows",
        layer(window=2),
        torch.zeros(1, 1, D_MODEL),
        cache,
        [seq],
    )


def test_dropout_is_refused_only_when_training():
    cache, seq = pool()
    x = torch.zeros(1, 1, D_MODEL)
    training = layer(dropout=0.5).train()
    refuses(
        ValueError,
        r"training mode with dropout=0\.5; decode in eval mode \(attention\.eval\(\)\)",
        training,
        x,
        cache,
        [seq],
    )
    with torch.no_grad():
        assert paged_forward(layer(dropout=0.5), x, cache, [seq]).shape == (1, 1, D_MODEL)  # eval
        assert paged_forward(layer().train(), x, cache, [seq]).shape == (1, 1, D_MODEL)  # p = 0
    assert cache.length(seq) == 2


def test_a_cache_of_other_heads_or_another_dtype_is_refused():
    x = torch.zeros(1, 1, D_MODEL)
    cache, seq = pool(head_dim=2)
    refuses(
        ValueError,
        r"cache has num_kv_heads=2, head_dim=2; the module needs 2, 4",
        layer(),
        x,
        cache,
        [seq],
    )
    cache, seq = pool(dtype=torch.float64)
    refuses(
        TypeError,
        r"cache holds torch\.float64 on cpu, the module's parameters torch\.float32 on cpu",
        layer(),
        x,
        cache,
        [seq],
    )


def test_x_is_checked_against_the_module():
    cache, seq = pool()
    refuses(
        ValueError,
        r"^x has feature size 9 but the module has d_model=8",
        layer(),
        torch.zeros(1, 1, D_MODEL + 1),
        cache,
        [seq],
    )
    refuses(
        TypeError,
        r"\bx\b.*float64|float64.*\bx\b",
        layer(),
        torch.zeros(1, 1, D_MODEL, dtype=torch.float64),
        cache,
        [seq],
    )
    refuses(ValueError, r"\bx\b", layer(), torch.full((1, 1, D_MODEL), float("nan")), cache, [seq])


def test_reserve_false_needs_the_positions_already_reserved():
    cache, seq = pool()
    refuses(
        ValueError,
        rf"reserve=False but sequence {seq} holds 0 positions, fewer than the T=1 new tokens",
        layer(),
        torch.zeros(1, 1, D_MODEL),
        cache,
        [seq],
        reserve=False,
    )


def test_nan_in_x_is_named_before_anything_is_projected():
    cache, seq = pool()
    x = torch.zeros(1, 1, D_MODEL)
    x[0, 0, 3] = float("nan")
    refuses(ValueError, r"^x contains NaN", layer(), x, cache, [seq])


@pytest.mark.parametrize(("projection", "what"), [("k_proj", "keys"), ("v_proj", "values")])
def test_keys_or_values_that_overflow_are_named(projection, what):
    """Finite inputs whose keys or values overflow float32: the message says which, and why."""
    attention = layer()
    with torch.no_grad():
        getattr(attention, projection).weight.fill_(1e30)
    cache, seq = pool()
    refuses(
        ValueError,
        rf"^the attention's {what} overflows torch\.float32 although x are finite",
        attention,
        torch.full((1, 1, D_MODEL), 1e20),
        cache,
        [seq],
    )


def test_a_parameter_that_is_not_finite_is_named():
    attention = layer()
    with torch.no_grad():
        attention.k_proj.weight[0, 0] = float("inf")
    cache, seq = pool()
    refuses(
        ValueError,
        r"^the module's parameter k_proj\.weight \(shape \(8, 8\)\) holds NaN or inf, "
        r"so the attention's keys",
        attention,
        torch.ones(1, 1, D_MODEL),
        cache,
        [seq],
    )


def test_an_output_that_overflows_is_named_and_its_positions_stay():
    """The output is computed after the write (read through the tables), as documented."""
    attention = layer()
    with torch.no_grad():
        attention.out_proj.weight.fill_(3e38)  # the sum over d_model overflows
    cache, seq = pool()
    with pytest.raises(
        ValueError, match=r"^the attention's output overflows torch\.float32 although x are finite"
    ):
        paged_forward(attention, torch.ones(1, 1, D_MODEL), cache, [seq])
    assert cache.length(seq) == 1
