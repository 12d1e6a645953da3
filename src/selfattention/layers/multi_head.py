"""Multi-head and grouped-query attention as a torch module.

Chapter 9 builds it; chapter 10 adds masks and the key/value cache.
"""

from __future__ import annotations

import torch
from torch import nn

from .._checks import check_finite, check_flag, check_positive_int, check_real
from .attention_torch import (
    _check_output_finite,
    _expand_kv_heads,
    _merge_heads,
    _split_heads,
    attend,
    check_model_input,
    combine_masks,
)
from .kv_cache import KVCache
from .rotary import _check_base, _rotate


class MultiHeadAttention(nn.Module):
    """``num_heads`` attention heads of size ``head_dim = d_model // num_heads`` in parallel.

    ``q_proj`` and ``out_proj`` map ``d_model -> d_model``; ``k_proj`` and
    ``v_proj`` map ``d_model -> num_kv_heads * head_dim``. With
    ``num_kv_heads < num_heads`` (grouped-query attention; 1 is multi-query
    attention) each key/value head serves ``num_heads // num_kv_heads``
    consecutive query heads: query head ``r`` reads key/value head
    ``g = r // (num_heads // num_kv_heads)``, the layout of
    ``F.scaled_dot_product_attention(..., enable_gqa=True)``. Inputs are
    batch-first, ``(B, T, d_model)``.

    Parameters
    ----------
    d_model : int
        Model width; divisible by ``num_heads``.
    num_heads : int
        Number of query heads ``h``.
    bias : bool
        Whether the four linear layers have biases.
    dropout : float
        Dropout on the attention weights, in training mode only, in [0, 1).
    num_kv_heads : int, optional
        Number of key/value heads; defaults to ``num_heads`` and must divide it.
    rope : bool, default False
        Rotate queries and keys with rotary position embeddings (chapter 13)
        after the split into heads, in the ``"half"`` layout of
        :func:`selfattention.rotary_embedding`; values are not rotated.
        Queries and keys count positions from 0, or, with a ``cache``, from
        ``cache.position``, the number of positions the cache has seen, so
        cached decoding equals one causal pass. ``head_dim`` must be even.
        Weights trained in the interleaved layout need
        :func:`selfattention.permute_rotary_rows` first.
    rope_base : float, default 10000.0
        The rotary wavelength base; finite and above 0.
    window : int, optional
        Sliding-window attention (chapter 14): query ``i`` sees key ``j`` only
        when ``0 <= i - j < window``, the current token and the ``window - 1``
        before it (:func:`selfattention.masks.causal_mask` with ``window``). The
        window is causal: ``forward`` then needs ``causal=True``. With a
        ``cache``, the layer keeps only the last ``window`` positions in it,
        so the cache stops growing; ``cache.position`` keeps counting, so
        RoPE still gets absolute positions.

    Raises
    ------
    TypeError
        If ``d_model``, ``num_heads``, ``num_kv_heads`` or ``window`` is not
        an int, ``bias`` or ``rope`` is not a bool, or ``dropout`` or
        ``rope_base`` is not a real number.
    ValueError
        If one of them is not positive, ``num_heads`` does not divide
        ``d_model``, ``num_kv_heads`` does not divide ``num_heads``,
        ``dropout`` is outside [0, 1), ``rope_base`` is not above 0, or
        ``rope=True`` with an odd ``head_dim``.

    Examples
    --------
    >>> import torch
    >>> _ = torch.manual_seed(0)
    >>> attention = MultiHeadAttention(d_model=8, num_heads=4, num_kv_heads=2)
    >>> output, weights = attention(torch.randn(2, 5, 8))
    >>> tuple(output.shape), tuple(weights.shape), attention.k_proj.out_features
    ((2, 5, 8), (2, 4, 5, 5), 4)

    With ``rope=True``, decoding token by token with a cache continues the
    positions (``cache.position``) and equals one causal pass:

    >>> from selfattention import KVCache
    >>> rotary = MultiHeadAttention(d_model=8, num_heads=2, rope=True).eval()
    >>> x = torch.randn(1, 5, 8)  # (B, T, d_model)
    >>> full, _ = rotary(x, causal=True)
    >>> cache = KVCache()
    >>> with torch.no_grad():
    ...     steps = [rotary(x[:, t : t + 1], causal=True, cache=cache)[0] for t in range(5)]
    >>> cache.position, torch.allclose(torch.cat(steps, dim=1), full, atol=1e-6)
    (5, True)

    With ``window=3``, each query sees itself and the 2 tokens before it, and
    the cache never holds more than 3 positions:

    >>> windowed = MultiHeadAttention(d_model=8, num_heads=2, rope=True, window=3).eval()
    >>> full, weights = windowed(x, causal=True)
    >>> (weights[0, 0] > 0).int().tolist()
    [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [0, 1, 1, 1, 0], [0, 0, 1, 1, 1]]
    >>> cache = KVCache()
    >>> with torch.no_grad():
    ...     steps = [windowed(x[:, t : t + 1], causal=True, cache=cache)[0] for t in range(5)]
    >>> len(cache), cache.position, torch.allclose(torch.cat(steps, dim=1), full, atol=1e-6)
    (3, 5, True)
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        bias: bool = True,
        dropout: float = 0.0,
        num_kv_heads: int | None = None,
        rope: bool = False,
        rope_base: float = 10000.0,
        window: int | None = None,
    ) -> None:
        super().__init__()
        d_model = check_positive_int(d_model, "d_model")
        num_heads = check_positive_int(num_heads, "num_heads")
        if d_model % num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        num_kv_heads = check_positive_int(
            num_heads if num_kv_heads is None else num_kv_heads, "num_kv_heads"
        )
        if num_heads % num_kv_heads:
            raise ValueError(f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads}")
        bias = check_flag(bias, "bias")
        dropout = check_real(dropout, "dropout", low=0.0, high=1.0, high_open=True)
        rope = check_flag(rope, "rope")
        rope_base = _check_base(rope_base, "rope_base")
        if window is not None:
            window = check_positive_int(window, "window")
        if rope and (d_model // num_heads) % 2:
            raise ValueError(
                f"rope=True needs an even head_dim = d_model // num_heads (pairs of "
                f"features), got {d_model} // {num_heads} = {d_model // num_heads}"
            )
        self.d_model, self.num_heads, self.num_kv_heads = d_model, num_heads, num_kv_heads
        self.head_dim = d_model // num_heads
        self.dropout = dropout
        self.rope, self.rope_base = rope, rope_base
        self.window = window
        kv_width = self.num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, kv_width, bias=bias)
        self.v_proj = nn.Linear(d_model, kv_width, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x: torch.Tensor, num_heads: int | None = None) -> torch.Tensor:
        """``(B, T, num_heads * head_dim) -> (B, num_heads, T, head_dim)`` with view + transpose.

        ``num_heads`` defaults to the module's query heads; pass
        ``self.num_kv_heads`` for keys and values. A bare
        ``view(B, num_heads, T, head_dim)`` would run too, but would mix
        positions and features; the transpose keeps each token's features
        together.

        Examples
        --------
        >>> import torch
        >>> from selfattention import MultiHeadAttention
        >>> attention = MultiHeadAttention(d_model=8, num_heads=2)
        >>> heads = attention.split_heads(torch.randn(3, 5, 8))  # (B, T, d_model)
        >>> tuple(heads.shape)  # (B, num_heads, T, head_dim)
        (3, 2, 5, 4)
        """
        heads = self.num_heads if num_heads is None else check_positive_int(num_heads, "num_heads")
        check_model_input(x, "x", heads * self.head_dim)
        return _split_heads(x, heads)

    def merge_heads(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, num_heads, T, head_dim) -> (B, T, d_model)``, the inverse of ``split_heads``.

        Examples
        --------
        >>> import torch
        >>> from selfattention import MultiHeadAttention
        >>> attention = MultiHeadAttention(d_model=8, num_heads=2)
        >>> x = torch.randn(3, 5, 8)  # (B, T, d_model)
        >>> torch.equal(attention.merge_heads(attention.split_heads(x)), x)
        True
        """
        expected = (self.num_heads, self.head_dim)
        if not isinstance(x, torch.Tensor) or x.dim() != 4 or tuple(x.shape[1::2]) != expected:
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(
                f"x must have shape (B, num_heads, T, head_dim) = (B, {self.num_heads}, T, "
                f"{self.head_dim}), got {got}"
            )
        return _merge_heads(x)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        causal: bool = False,
        cache: KVCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Attend from ``query (B, T_q, d_model)`` to ``key``/``value (B, T_k, d_model)``.

        ``key`` defaults to ``query`` (self-attention) and ``value`` to
        ``key``. ``mask`` is boolean, broadcastable to ``(B, num_heads, T_q,
        T_k)``, True = may attend; a key padding mask ``(B, T_k)`` goes in as
        ``mask[:, None, None, :]``. ``causal=True`` adds the causal triangle.

        With a ``cache`` (a :class:`selfattention.KVCache`), this call's keys
        and values are appended to it and the queries attend to everything
        cached, so ``T_k`` is the cached length; ``causal=True`` then aligns
        the queries with the *end* of the keys (bottom-right), as decoding
        needs. Without a cache the causal triangle is top-left aligned, like
        PyTorch's ``is_causal``.

        With ``rope=True`` the queries take positions ``start .. start + T_q
        - 1`` and the new keys ``start .. start + T - 1``, where ``start`` is
        ``cache.position`` with a cache and 0 without; keys are rotated
        before they are cached.

        With a ``window`` (set when the module was built) each query sees
        only the last ``window`` keys up to its own position, and ``causal``
        must be True. With a cache, only the last ``window`` positions stay
        in it after the call: ``len(cache) <= window``, while
        ``cache.position`` counts every position seen.

        Returns ``output (B, T_q, d_model)`` and per-head ``weights
        (B, num_heads, T_q, T_k)``. In training mode with dropout the weights
        are the dropped-out ones, and their rows no longer sum to 1.

        Every input is checked before anything changes: a call that raises
        leaves the ``cache`` (length, contents, dtype) and the module as they
        were. The cache is written only once the output has been computed.
        ``mask`` may also be a numpy boolean array (``padding_mask`` of a
        list returns one); it is converted with ``torch.from_numpy``.

        Raises
        ------
        TypeError
            If an input is not a floating-point tensor or its dtype is not the
            module's, ``mask`` is not boolean, ``causal`` is not a bool, or
            ``cache`` is not a ``KVCache`` or holds another dtype.
        ValueError
            If an input is not ``(B, T, d_model)``, holds NaN or inf, or is on
            another device than the module; the batch sizes or the key and
            value lengths differ; ``mask`` does not broadcast to the scores;
            the cache holds another batch size, head count, head size or
            device; the module has a ``window`` and ``causal`` is False; or
            the output would not be finite (a parameter holds NaN or inf, or
            the scores overflow the dtype).

        Examples
        --------
        Decoding one token at a time with a cache gives the same outputs as
        causal attention over the whole sequence at once:

        >>> import torch
        >>> from selfattention import KVCache, MultiHeadAttention
        >>> _ = torch.manual_seed(0)
        >>> attention = MultiHeadAttention(d_model=8, num_heads=2).eval()
        >>> x = torch.randn(1, 4, 8)  # (B, T, d_model)
        >>> full, _ = attention(x, causal=True)
        >>> cache = KVCache()
        >>> with torch.no_grad():
        ...     steps = [attention(x[:, t : t + 1], causal=True, cache=cache)[0]
        ...              for t in range(4)]
        >>> len(cache), torch.allclose(torch.cat(steps, dim=1), full, atol=1e-6)
        (4, True)
        """
        # 1. Check every input; nothing has changed yet.
        key = query if key is None else key
        value = key if value is None else value
        weight = self.q_proj.weight  # the module's dtype and device
        inputs = {"query": query, "key": key, "value": value}
        for name, tensor in inputs.items():
            check_model_input(tensor, name, self.d_model, like=weight)
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(
                f"key and value must have the same batch size and length: key has shape "
                f"{tuple(key.shape)}, value has shape {tuple(value.shape)}"
            )
        if query.shape[0] != key.shape[0]:
            raise ValueError(
                f"query and key must have the same batch size: query has shape "
                f"{tuple(query.shape)}, key has shape {tuple(key.shape)}"
            )
        checked: list[torch.Tensor] = []
        for name, tensor in inputs.items():
            if not any(tensor is done for done in checked):  # self-attention: check x once
                check_finite(tensor, name)
                checked.append(tensor)
        causal = check_flag(causal, "causal")
        if self.window is not None and not causal:
            raise ValueError(
                f"this module has window={self.window}, a sliding window over earlier "
                "tokens: call it with causal=True"
            )
        batch, t_q, _ = query.shape
        t_cached = 0
        if cache is not None:
            if not isinstance(cache, KVCache):
                raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}")
            t_cached = self._check_cache(cache, batch)
        t_k = t_cached + key.shape[1]
        align = "bottom-right" if cache is not None else "top-left"
        # With a window, the causal part is the band: the triangle cut to the window.
        keep = combine_masks(
            mask, causal, (batch, self.num_heads, t_q, t_k), query.device, align, self.window
        )

        # 2. Compute; the cache is still untouched.
        q = self.split_heads(self.q_proj(query))  # (B, h, T_q, head_dim)
        k = self.split_heads(self.k_proj(key), self.num_kv_heads)  # (B, h_kv, T, head_dim)
        v = self.split_heads(self.v_proj(value), self.num_kv_heads)  # (B, h_kv, T, head_dim)
        if self.rope:
            # New tokens continue from the positions the cache has seen, never from 0.
            start = 0 if cache is None else cache.position
            where = torch.arange(start, start + max(t_q, key.shape[1]), device=query.device)
            q = _rotate(q, where[:t_q], self.rope_base, "half")  # (B, h, T_q, head_dim)
            k = _rotate(k, where[: key.shape[1]], self.rope_base, "half")  # values: not rotated
        if cache is not None:
            # Keys and values that are not finite must not reach the cache; say why.
            _check_output_finite(k, self, "query, key and value", "keys")
            _check_output_finite(v, self, "query, key and value", "values")
            k, v = cache._extended(k, v)  # (B, h_kv, T_k, head_dim), T_k = cached + new
        k_heads = _expand_kv_heads(k, self.num_heads)  # (B, h, T_k, head_dim)
        v_heads = _expand_kv_heads(v, self.num_heads)  # (B, h, T_k, head_dim)
        context, weights = attend(q, k_heads, v_heads, keep, self.dropout, self.training)
        output = self.out_proj(self.merge_heads(context))  # (B, T_q, d_model)
        _check_output_finite(output, self, "query, key and value", "output")

        # 3. Everything succeeded: only now store the new keys and values
        # (with a window, only the last `window` positions: later queries need no more).
        if cache is not None:
            cache._store(k, v, key.shape[1], keep_last=self.window)
        return output, weights

    def _check_cache(self, cache: KVCache, batch: int) -> int:
        """Raise unless ``cache`` can take this module's keys for a batch of ``batch``.

        Returns the cached length. The messages name ``cache``: one cache
        serves one layer (its head count, head size, dtype and device) and
        one batch of sequences.
        """
        heads, width = self.num_kv_heads, self.head_dim
        layout = (
            ("keys", heads, "num_kv_heads", width, "head_dim"),
            ("values", heads, "num_kv_heads", width, "head_dim"),
        )
        return cache._check_fits(batch, layout, self.k_proj.weight)

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy the weights of a ``torch.nn.MultiheadAttention`` into a new module.

        PyTorch packs the three input projections into one ``in_proj_weight``
        of shape ``(3 * d_model, d_model)``; it is split into ``q_proj``,
        ``k_proj`` and ``v_proj`` in that order. The copy gives the same
        outputs, and the same per-head weights as PyTorch's
        ``need_weights=True, average_attn_weights=False``. Note that
        ``nn.MultiheadAttention`` masks with True = blocked, the opposite of
        this module.

        Raises
        ------
        TypeError
            If ``module`` is not an ``nn.MultiheadAttention``.
        ValueError
            For a configuration this module cannot mirror: ``batch_first=False``
            (PyTorch's default, sequence-first), ``kdim``/``vdim`` different
            from ``embed_dim``, ``add_bias_kv=True`` or ``add_zero_attn=True``.

        Examples
        --------
        >>> from torch import nn
        >>> reference = nn.MultiheadAttention(8, 2, batch_first=True)
        >>> MultiHeadAttention.from_torch(reference).num_heads
        2
        """
        if not isinstance(module, nn.MultiheadAttention):
            raise TypeError(
                f"module must be a torch.nn.MultiheadAttention, got {type(module).__name__}"
            )
        if not module._qkv_same_embed_dim:
            raise ValueError(
                f"module has kdim={module.kdim}, vdim={module.vdim} different from "
                f"embed_dim={module.embed_dim}; not supported"
            )
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("module uses add_bias_kv or add_zero_attn; not supported")
        if not module.batch_first:
            raise ValueError(
                "module has batch_first=False: it reads (T, B, d_model) while this "
                "module reads (B, T, d_model); build it with batch_first=True"
            )
        has_bias = module.in_proj_bias is not None
        copy = cls(module.embed_dim, module.num_heads, bias=has_bias, dropout=module.dropout)
        weight = module.in_proj_weight
        copy = copy.to(device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            for proj, w_part in zip(
                (copy.q_proj, copy.k_proj, copy.v_proj), weight.chunk(3, dim=0), strict=True
            ):
                proj.weight.copy_(w_part)
            copy.out_proj.weight.copy_(module.out_proj.weight)
            if has_bias:
                for proj, b_part in zip(
                    (copy.q_proj, copy.k_proj, copy.v_proj),
                    module.in_proj_bias.chunk(3, dim=0),
                    strict=True,
                ):
                    proj.bias.copy_(b_part)
                copy.out_proj.bias.copy_(module.out_proj.bias)
        copy.train(module.training)
        return copy
