"""Run a ``MultiHeadAttention`` over a paged cache: a ragged batch of sequences (chapter 18).

:func:`paged_forward` uses the module's own projections and rotary setting,
so the same weights decode either with one :class:`~selfattention.KVCache`
per sequence or with one :class:`~selfattention.PagedKVCache` for the whole
batch, and give the same outputs. It lives outside the module's ``forward``
because a paged batch is a different call: a list of sequence ids instead
of a padded tensor of equal lengths.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .._checks import check_finite, check_flag, describe
from .attention_torch import _check_output_finite, check_model_input
from .multi_head import MultiHeadAttention
from .paged_cache import PagedKVCache, _check_batch, _paged_attend
from .rotary import _rotate


def paged_forward(
    attention: MultiHeadAttention,
    x: torch.Tensor,
    cache: PagedKVCache,
    seqs: Sequence[int],
    reserve: bool = True,
) -> torch.Tensor:
    """Causal self-attention of ``T`` new tokens in each of ``B`` sequences, over a paged cache.

    ``x[i]`` ``(T, d_model)`` holds the next ``T`` tokens of sequence
    ``seqs[i]``: ``T = 1`` is one decoding step for a ragged batch, ``B = 1``
    the prefill of one prompt. Their keys and values are written into the
    pool, then each query attends to its sequence's keys up to its own
    position (bottom-right causal) through the block table. With
    ``rope=True`` the new tokens of a sequence holding ``L`` positions take
    positions ``L .. L + T - 1``, so each sequence keeps its own positions.

    The result equals ``attention(x[i:i+1], causal=True, cache=kv_caches[i])``
    with one :class:`~selfattention.KVCache` per sequence.

    Everything is checked, and the new keys and values are computed and
    found finite, before the pool is touched; then the positions are reserved
    for the whole batch at once (all or nothing) and written. Unlike
    ``MultiHeadAttention.forward``, the output is computed after the write
    (it is read through the tables): if it overflows, the new positions stay
    in the cache.

    Parameters
    ----------
    attention : MultiHeadAttention
        The layer; its ``num_kv_heads`` and ``head_dim`` must match the
        cache, and its parameters the cache's dtype and device. Sliding
        windows are not supported (the paged cache keeps every position).
    x : torch.Tensor, shape ``(B, T, d_model)``
        The new tokens' inputs.
    cache : PagedKVCache
        This layer's pool.
    seqs : list of int
        ``B`` distinct live sequences.
    reserve : bool, default True
        Reserve the ``T`` new positions of each sequence in
        ``cache.allocator`` first. Pass False in the second and later layers
        of a model whose caches share one allocator: the first layer has
        reserved them, and this layer writes its own keys into the same slots.

    Returns
    -------
    torch.Tensor, shape ``(B, T, d_model)``

    Raises
    ------
    OutOfBlocksError
        If the pool cannot take the new positions; nothing has changed then.
    TypeError, ValueError
        For a wrong type, shape, dtype or device, NaN or inf in ``x``, a
        sequence that is not alive or repeated, a module with a ``window``
        or with dropout in training mode, or (``reserve=False``) a sequence
        holding fewer than ``T`` positions. Nothing has changed then.

    Examples
    --------
    >>> import torch
    >>> from selfattention import KVCache, MultiHeadAttention, PagedKVCache
    >>> _ = torch.manual_seed(0)
    >>> layer = MultiHeadAttention(d_model=8, num_heads=2, rope=True).eval()
    >>> cache = PagedKVCache(num_blocks=8, block_size=2, num_kv_heads=2, head_dim=4)
    >>> a, b = cache.new_sequence(), cache.new_sequence()
    >>> prompt_a, prompt_b = torch.randn(1, 3, 8), torch.randn(1, 5, 8)  # (1, T, d_model)
    >>> with torch.no_grad():
    ...     _ = paged_forward(layer, prompt_a, cache, [a])  # prefill, one prompt at a time
    ...     _ = paged_forward(layer, prompt_b, cache, [b])
    ...     step = torch.randn(2, 1, 8)  # (B, 1, d_model): one new token each
    ...     paged = paged_forward(layer, step, cache, [a, b])  # (B, 1, d_model)
    ...     kv = KVCache()
    ...     _ = layer(prompt_b, causal=True, cache=kv)
    ...     alone, _ = layer(step[1:], causal=True, cache=kv)  # sequence b by itself
    >>> cache.length(a), cache.length(b), torch.allclose(paged[1], alone[0], atol=1e-6)
    (4, 6, True)
    """
    # 1. Check everything; nothing has changed yet.
    if not isinstance(attention, MultiHeadAttention):
        raise TypeError(f"attention must be a MultiHeadAttention, got {describe(attention)}")
    if not isinstance(cache, PagedKVCache):
        raise TypeError(f"cache must be a PagedKVCache, got {describe(cache)}")
    reserve = check_flag(reserve, "reserve")
    if attention.window is not None:
        raise ValueError(
            f"attention has window={attention.window}; paged_forward keeps every position "
            "and does not support sliding windows"
        )
    if attention.training and attention.dropout > 0:
        raise ValueError(
            f"attention is in training mode with dropout={attention.dropout}; decode in "
            "eval mode (attention.eval())"
        )
    if (cache.num_kv_heads, cache.head_dim) != (attention.num_kv_heads, attention.head_dim):
        raise ValueError(
            f"cache has num_kv_heads={cache.num_kv_heads}, head_dim={cache.head_dim}; the "
            f"module needs {attention.num_kv_heads}, {attention.head_dim}"
        )
    weight = attention.q_proj.weight
    if (cache.key.dtype, cache.key.device) != (weight.dtype, weight.device):
        raise TypeError(
            f"cache holds {cache.key.dtype} on {cache.key.device}, the module's parameters "
            f"{weight.dtype} on {weight.device}; build the cache with the module's dtype"
        )
    check_model_input(x, "x", attention.d_model, like=weight)
    check_finite(x, "x")
    batch, t_new, _ = x.shape
    seqs = _check_batch(cache, seqs, batch)
    lengths = [cache.allocator.length(seq) for seq in seqs]
    if not reserve:
        for seq, length in zip(seqs, lengths, strict=True):
            if length < t_new:
                raise ValueError(
                    f"reserve=False but sequence {seq} holds {length} positions, fewer than "
                    f"the T={t_new} new tokens; reserve them first (the first layer does)"
                )
    starts = [length - t_new if not reserve else length for length in lengths]

    # 2. Project, split into heads and rotate.
    q = attention.split_heads(attention.q_proj(x))  # (B, h, T, head_dim)
    k = attention.split_heads(attention.k_proj(x), attention.num_kv_heads)  # (B, h_kv, T, d)
    v = attention.split_heads(attention.v_proj(x), attention.num_kv_heads)  # (B, h_kv, T, d)
    if attention.rope:
        where = torch.tensor(starts, device=x.device)[:, None] + torch.arange(
            t_new, device=x.device
        )  # (B, T): each sequence continues from its own length
        q = _rotate(q, where[:, None], attention.rope_base, "half")  # (B, h, T, head_dim)
        k = _rotate(k, where[:, None], attention.rope_base, "half")
    _check_output_finite(k, attention, "x", "keys")
    _check_output_finite(v, attention, "x", "values")

    # 3. Reserve (all or nothing), write, attend through the block tables.
    if reserve:
        cache.allocator.reserve(seqs, t_new)
    for i, seq in enumerate(seqs):
        cache._write_last(seq, k[i], v[i])  # (h_kv, T, d)
    context = _paged_attend(q, cache, seqs, 1 / math.sqrt(attention.head_dim))  # (B, h, T, d)
    output = attention.out_proj(attention.merge_heads(context))  # (B, T, d_model)
    _check_output_finite(output, attention, "x", "output")
    return output
