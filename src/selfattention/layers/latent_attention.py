"""Multi-head latent attention (MLA; DeepSeek-V2), chapter 14.

Multi-head latent attention shrinks the key/value cache by caching one small
*latent* vector per token instead of every head's key and value:

- the input ``x_i`` (``d_model``) is down-projected to a latent
  ``c_i = x_i W_DKV`` of width ``d_c`` (``latent_dim``);
- each head ``r`` rebuilds its key and value from the latent,
  ``k_i^r = c_i W_UK^r`` and ``v_i^r = c_i W_UV^r`` (width ``d_k`` each);
- RoPE (chapter 13) cannot act on those keys without breaking the trick
  below, so a separate *decoupled* rotary part of width ``d_R``
  (``rope_dim``) is added: a rotated query part per head and one rotated
  key part ``k_i^R`` shared by all heads. The scores are
  ``(q_i^r . k_j^r + q_i^{R,r} . k_j^R) / sqrt(d_k + d_R)``.

Under a :class:`~selfattention.KVCache`, only ``c_i`` and ``k_i^R`` are
stored: ``d_c + d_R`` numbers per token and layer, whatever the number of
heads. Because ``q . (c W_UK)`` equals ``(q W_UK^T) . c``, the key
up-projection can be moved onto the query and the value up-projection
after the weighted sum ("absorbed"): the per-head keys and values are then
never built. The rotary part cannot be moved that way, because a rotation
that depends on the key's position would sit between the query and
``W_UK``.

Reference: DeepSeek-AI, "DeepSeek-V2: A Strong, Economical, and Efficient
Mixture-of-Experts Language Model" (2024), section 2.1. DeepSeek-V2 also
compresses the queries through a second latent and normalises the latent
(RMSNorm); neither changes what is cached, and both are left out here.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .._checks import check_finite, check_flag, check_positive_int
from .attention_torch import (
    _check_output_finite,
    _merge_heads,
    _split_heads,
    attend,
    check_model_input,
    combine_masks,
    masked_softmax,
)
from .kv_cache import KVCache
from .rotary import _check_base, _rotate


class MultiHeadLatentAttention(nn.Module):
    """Multi-head latent attention: cache a latent of width d_c, rebuild keys and values from it.

    The layers, with ``h = num_heads``, ``d_k = head_dim``, ``d_c =
    latent_dim`` and ``d_R = rope_dim`` (each ``nn.Linear`` acts on row
    vectors, ``y = x W^T + b`` in PyTorch's convention):

    - ``kv_down``: ``d_model -> d_c``, the latent ``c_i`` (``W_DKV``);
    - ``k_up`` and ``v_up``: ``d_c -> h d_k``, the per-head keys and values
      (``W_UK``, ``W_UV``);
    - ``q_proj``: ``d_model -> h d_k``, the per-head queries;
    - with ``rope_dim > 0``, ``q_rope``: ``d_model -> h d_R`` and ``k_rope``:
      ``d_model -> d_R``, the decoupled rotary query (per head) and key
      (shared by all heads), rotated by RoPE in the ``"half"`` layout;
      None when ``rope_dim == 0``;
    - ``out_proj``: ``h d_k -> d_model``.

    Inputs are batch-first, ``(B, T, d_model)``. This is self-attention
    only (no separate key and value inputs), without dropout.

    Parameters
    ----------
    d_model : int
        Model width.
    num_heads : int
        Number of heads ``h``.
    latent_dim : int
        The latent width ``d_c``: what the cache stores per token, besides
        the rotary key.
    rope_dim : int, default 0
        The width ``d_R`` of the decoupled rotary query and key; even, 0 for
        no rotary part (and no positions at all).
    head_dim : int, optional
        The per-head width ``d_k`` of the rebuilt keys, values and queries;
        defaults to ``d_model // num_heads`` (``num_heads`` must then divide
        ``d_model``). DeepSeek-V2 uses ``h d_k != d_model``.
    bias : bool, default False
        Whether every linear layer has a bias (DeepSeek's have none).
    rope_base : float, default 10000.0
        The rotary wavelength base; finite and above 0.

    Raises
    ------
    TypeError
        If a size is not an int, ``bias`` is not a bool or ``rope_base`` is
        not a real number.
    ValueError
        If a size is not positive (``rope_dim`` may be 0), ``rope_dim`` is
        odd, ``num_heads`` does not divide ``d_model`` when ``head_dim`` is
        not given, or ``rope_base`` is not above 0.

    Examples
    --------
    Four heads of width 8 rebuilt from a latent of width 6, with a rotary
    part of width 4. The cache holds ``d_c + d_R = 10`` numbers per token
    (float32: 4 bytes each), and the absorbed form gives the same output:

    >>> import torch
    >>> from selfattention import KVCache, MultiHeadLatentAttention
    >>> _ = torch.manual_seed(0)
    >>> mla = MultiHeadLatentAttention(d_model=16, num_heads=4, latent_dim=6,
    ...                                rope_dim=4, head_dim=8).eval()
    >>> x = torch.randn(1, 5, 16)  # (B, T, d_model)
    >>> cache = KVCache()
    >>> with torch.no_grad():
    ...     output, weights = mla(x, causal=True, cache=cache)
    ...     absorbed, _ = mla(x, causal=True, absorbed=True)
    >>> tuple(output.shape), tuple(weights.shape), cache.nbytes == 5 * (6 + 4) * 4
    ((1, 5, 16), (1, 4, 5, 5), True)
    >>> torch.allclose(output, absorbed, atol=1e-5)
    True
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        latent_dim: int,
        rope_dim: int = 0,
        head_dim: int | None = None,
        bias: bool = False,
        rope_base: float = 10000.0,
    ) -> None:
        super().__init__()
        d_model = check_positive_int(d_model, "d_model")
        num_heads = check_positive_int(num_heads, "num_heads")
        latent_dim = check_positive_int(latent_dim, "latent_dim")
        rope_dim = check_positive_int(rope_dim, "rope_dim", allow_zero=True)
        if rope_dim % 2:
            raise ValueError(
                f"rope_dim must be even (RoPE turns pairs of features), got {rope_dim}"
            )
        if head_dim is None:
            if d_model % num_heads:
                raise ValueError(
                    f"d_model={d_model} is not divisible by num_heads={num_heads}; "
                    "pass head_dim to choose the per-head width"
                )
            head_dim = d_model // num_heads
        head_dim = check_positive_int(head_dim, "head_dim")
        bias = check_flag(bias, "bias")
        rope_base = _check_base(rope_base, "rope_base")
        self.d_model, self.num_heads, self.head_dim = d_model, num_heads, head_dim
        self.latent_dim, self.rope_dim, self.rope_base = latent_dim, rope_dim, rope_base
        width = num_heads * head_dim
        self.kv_down = nn.Linear(d_model, latent_dim, bias=bias)  # W_DKV: x -> c
        self.k_up = nn.Linear(latent_dim, width, bias=bias)  # W_UK: c -> h keys
        self.v_up = nn.Linear(latent_dim, width, bias=bias)  # W_UV: c -> h values
        self.q_proj = nn.Linear(d_model, width, bias=bias)
        self.q_rope: nn.Linear | None = None
        self.k_rope: nn.Linear | None = None
        if rope_dim:
            self.q_rope = nn.Linear(d_model, num_heads * rope_dim, bias=bias)
            self.k_rope = nn.Linear(d_model, rope_dim, bias=bias)  # one key for all heads
        self.out_proj = nn.Linear(width, d_model, bias=bias)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        causal: bool = False,
        cache: KVCache | None = None,
        absorbed: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Self-attention over ``x (B, T, d_model)`` through the latent.

        ``mask`` is boolean, broadcastable to ``(B, num_heads, T_q, T_k)``,
        True = may attend; ``causal=True`` adds the causal triangle.

        With a ``cache`` (a :class:`selfattention.KVCache`, one per layer),
        this call's latents ``c`` ``(B, 1, T, d_c)`` go into the cache's key
        slot and its rotary keys ``k^R`` ``(B, 1, T, d_R)`` (already rotated)
        into its value slot; the queries attend to everything cached
        (``T_k`` = cached + new), ``causal=True`` aligns them with the end
        (bottom-right), and positions continue from ``cache.position``.
        ``cache.nbytes`` is therefore ``B * T_k * (d_c + d_R) * e``, with
        ``e`` bytes per number.

        With ``absorbed=False`` every head's keys and values are rebuilt
        from all ``T_k`` latents, as the definition says. With
        ``absorbed=True`` they never are: each query is multiplied by
        ``W_UK^r`` transposed and scored against the latents directly, and
        ``W_UV^r`` is applied after the weighted sum of latents (how
        DeepSeek's inference code runs). Both give the same output and
        weights up to rounding.

        Every input is checked before anything changes: a call that raises
        leaves the ``cache`` and the module as they were.

        Returns
        -------
        output : torch.Tensor
            ``(B, T_q, d_model)``.
        weights : torch.Tensor
            ``(B, num_heads, T_q, T_k)``, rows summing to 1 (0 for a query
            that may attend to nothing).

        Raises
        ------
        TypeError
            If ``x`` is not a floating-point tensor or not of the module's
            dtype, ``mask`` is not boolean, ``causal`` or ``absorbed`` is not a
            bool, or ``cache`` is not a ``KVCache`` or holds another dtype.
        ValueError
            If ``x`` is not ``(B, T, d_model)``, holds NaN or inf, or is on
            another device than the module; ``mask`` does not broadcast to
            the scores; the cache holds another batch size, latent width,
            rotary width or device; or the output would not be finite.

        Examples
        --------
        Decoding token by token with a cache equals one causal pass:

        >>> import torch
        >>> from selfattention import KVCache, MultiHeadLatentAttention
        >>> _ = torch.manual_seed(0)
        >>> mla = MultiHeadLatentAttention(8, 2, latent_dim=4, rope_dim=2).double()
        >>> x = torch.randn(1, 6, 8, dtype=torch.float64)  # (B, T, d_model)
        >>> cache = KVCache()
        >>> with torch.no_grad():
        ...     full, _ = mla(x, causal=True)
        ...     steps = [mla(x[:, t : t + 1], causal=True, cache=cache, absorbed=True)[0]
        ...              for t in range(6)]
        >>> len(cache), cache.position, tuple(cache.key.shape), tuple(cache.value.shape)
        (6, 6, (1, 1, 6, 4), (1, 1, 6, 2))
        >>> bool((torch.cat(steps, dim=1) - full).abs().max() < 1e-12)
        True
        """
        # 1. Check every input; nothing has changed yet.
        weight = self.q_proj.weight  # the module's dtype and device
        check_model_input(x, "x", self.d_model, like=weight)
        check_finite(x, "x")
        causal = check_flag(causal, "causal")
        absorbed = check_flag(absorbed, "absorbed")
        batch, t_new, _ = x.shape
        t_cached = 0
        if cache is not None:
            if not isinstance(cache, KVCache):
                raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}")
            t_cached = self._check_cache(cache, batch)
        t_k = t_cached + t_new
        align = "bottom-right" if cache is not None else "top-left"
        keep = combine_masks(mask, causal, (batch, self.num_heads, t_new, t_k), x.device, align)

        # 2. Compute; the cache is still untouched.
        latent = self.kv_down(x)[:, None]  # (B, 1, T, d_c): c, shared by every head
        q = _split_heads(self.q_proj(x), self.num_heads)  # (B, h, T, d_k)
        start = 0 if cache is None else cache.position  # positions continue, never restart
        where = torch.arange(start, start + t_new, device=x.device)  # (T,)
        if self.q_rope is not None and self.k_rope is not None:
            q_rot = _rotate(
                _split_heads(self.q_rope(x), self.num_heads), where, self.rope_base, "half"
            )
            k_rot = _rotate(self.k_rope(x)[:, None], where, self.rope_base, "half")
        else:  # no rotary part: zero-width tensors keep one code path
            q_rot = q.new_zeros(batch, self.num_heads, t_new, 0)  # (B, h, T, 0)
            k_rot = q.new_zeros(batch, 1, t_new, 0)  # (B, 1, T, 0)
        # q_rot: (B, h, T, d_R); k_rot: (B, 1, T, d_R), one rotary key for all heads
        if cache is not None:
            _check_output_finite(latent, self, "x", "latents")
            _check_output_finite(k_rot, self, "x", "rotary keys")
            latent, k_rot = cache._extended(latent, k_rot)  # (B, 1, T_k, d_c), (B, 1, T_k, d_R)
        if absorbed:
            context, weights = self._attend_absorbed(q, q_rot, latent, k_rot, keep)
        else:
            context, weights = self._attend_expanded(q, q_rot, latent, k_rot, keep)
        # context: (B, h, T_q, d_k)
        output = self.out_proj(_merge_heads(context))  # (B, T_q, d_model)
        _check_output_finite(output, self, "x", "output")

        # 3. Everything succeeded: only now store the latents and rotary keys.
        if cache is not None:
            cache._store(latent, k_rot, t_new)
        return output, weights

    def _attend_expanded(
        self,
        q: torch.Tensor,
        q_rot: torch.Tensor,
        latent: torch.Tensor,
        k_rot: torch.Tensor,
        keep: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The definition: rebuild every head's keys and values from the latents."""
        batch, _, t_k, _ = latent.shape
        k = _split_heads(self.k_up(latent[:, 0]), self.num_heads)  # (B, h, T_k, d_k)
        v = _split_heads(self.v_up(latent[:, 0]), self.num_heads)  # (B, h, T_k, d_v)
        k_rot = k_rot.expand(batch, self.num_heads, t_k, self.rope_dim)  # (B, h, T_k, d_R)
        query = torch.cat([q, q_rot], dim=-1)  # (B, h, T_q, d_k + d_R)
        key = torch.cat([k, k_rot], dim=-1)  # (B, h, T_k, d_k + d_R)
        return attend(query, key, v, keep)  # scaled by 1 / sqrt(d_k + d_R)

    def _attend_absorbed(
        self,
        q: torch.Tensor,
        q_rot: torch.Tensor,
        latent: torch.Tensor,
        k_rot: torch.Tensor,
        keep: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The same scores and output without building any head's keys or values.

        Per head ``r``: ``q . (c W_UK^r + b_UK^r) = (q W_UK^r^T) . c + q . b_UK^r``,
        whose last term is the same for every key and so leaves the softmax
        unchanged; and ``sum_j a_j (c_j W_UV^r + b_UV^r) = (sum_j a_j c_j)
        W_UV^r + (sum_j a_j) b_UV^r``. ``nn.Linear`` stores ``W^T``, ``(h d_k,
        d_c)``.
        """
        h, d_k, d_c = self.num_heads, self.head_dim, self.latent_dim
        w_uk = self.k_up.weight.view(h, d_k, d_c)  # (h, d_k, d_c): W_UK^r transposed
        w_uv = self.v_up.weight.view(h, d_k, d_c)  # (h, d_v, d_c): W_UV^r transposed
        q_latent = q @ w_uk  # (B, h, T_q, d_c): q W_UK^r^T, the absorbed query
        scores = q_latent @ latent.transpose(-2, -1)  # (B, h, T_q, T_k), latent read once
        # k_up's bias adds q . b_UK^r to every score of a query alike: softmax ignores it.
        scores = scores + q_rot @ k_rot.transpose(-2, -1)  # (B, h, T_q, T_k): rotary part
        weights = masked_softmax(scores / math.sqrt(d_k + self.rope_dim), keep)
        latent_context = weights @ latent  # (B, h, T_q, d_c): sum_j a_j c_j
        context = latent_context @ w_uv.transpose(-2, -1)  # (B, h, T_q, d_v)
        if self.v_up.bias is not None:
            rows = weights.sum(dim=-1, keepdim=True)  # (B, h, T_q, 1): 1, or 0 if all masked
            context = context + rows * self.v_up.bias.view(h, 1, d_k)
        return context, weights

    def _check_cache(self, cache: KVCache, batch: int) -> int:
        """Raise unless ``cache`` holds this layer's latents for a batch of ``batch``.

        Returns the cached length.
        """
        layout = (
            ("latents", 1, "1", self.latent_dim, "latent_dim"),
            ("rotary keys", 1, "1", self.rope_dim, "rope_dim"),
        )
        return cache._check_fits(batch, layout, self.kv_down.weight)
