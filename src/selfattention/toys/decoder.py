"""A small decoder-only language model for chapter 15, and greedy generation with a cache.

``TinyDecoder`` embeds token ids, adds learned absolute position
embeddings, runs ``num_layers`` blocks of causal self-attention (the
package's ``MultiHeadAttention``) and maps the result back to one score
(logit) per token id. A block is either attention only, ``x + attn(x)``, as
in the transformer-circuits papers, or a full pre-LayerNorm block with an
MLP. The model returns every layer's per-head attention weights, can
zero-ablate any chosen heads, and decodes with one ``KVCache`` per layer.

``generate`` continues sequences greedily, with or without the cache;
``head_weights`` returns the per-head maps of one sequence as numpy arrays.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch
from torch import nn

from .._checks import (
    check_flag,
    check_int64_tensor,
    check_positive_int,
    check_same_device,
    describe,
)
from ..layers.kv_cache import KVCache
from ..layers.multi_head import MultiHeadAttention


def _gate_heads(
    module: nn.Module, args: tuple[torch.Tensor, ...]
) -> tuple[torch.Tensor, ...] | None:
    """Forward pre-hook of ``out_proj``: multiply each head's slice of the input by its gate.

    ``out_proj`` receives the concatenated heads ``(B, T, h * d_k)``, head
    ``r`` in columns ``r d_k .. (r + 1) d_k - 1``; a gate of 0 removes that
    head's output from the layer (zero ablation), the bias ``b_O`` stays.
    """
    gate = getattr(module, "head_gate", None)  # (h,) or None
    if gate is None:
        return None
    (concatenated,) = args  # (B, T, h * d_k)
    width = concatenated.shape[-1] // gate.shape[0]  # d_k
    gate = gate.to(dtype=concatenated.dtype, device=concatenated.device)  # (h,)
    return (concatenated * gate.repeat_interleave(width),)


class DecoderBlock(nn.Module):
    """One block: causal multi-head self-attention, and an MLP unless attention-only.

    Attention-only: ``x + attn(x)``. Full (pre-LayerNorm):
    ``y = x + attn(LN(x))``, then ``y + MLP(LN(y))`` with a GELU MLP of width
    ``d_mlp``.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> block = DecoderBlock(d_model=8, num_heads=2)
    >>> x = torch.randn(1, 5, 8)  # (B, T, d_model)
    >>> y, weights = block(x)
    >>> tuple(y.shape), tuple(weights.shape)
    ((1, 5, 8), (1, 2, 5, 5))
    """

    def __init__(
        self, d_model: int, num_heads: int, attention_only: bool = True, d_mlp: int | None = None
    ) -> None:
        super().__init__()
        attention_only = check_flag(attention_only, "attention_only")
        if d_mlp is not None:  # checked even where unused: a bad value is a bug either way
            d_mlp = check_positive_int(d_mlp, "d_mlp")
        self.attention = MultiHeadAttention(d_model, num_heads)
        self.attention.out_proj.head_gate = None
        self.attention.out_proj.register_forward_pre_hook(_gate_heads)
        self.attention_only = attention_only
        if not attention_only:
            d_mlp = 4 * d_model if d_mlp is None else d_mlp
            self.norm_attention = nn.LayerNorm(d_model)
            self.norm_mlp = nn.LayerNorm(d_model)
            self.mlp = nn.Sequential(
                nn.Linear(d_model, d_mlp), nn.GELU(), nn.Linear(d_mlp, d_model)
            )

    def forward(
        self,
        x: torch.Tensor,
        cache: KVCache | None = None,
        head_gate: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x (B, T, d_model)`` -> ``(B, T, d_model)`` and weights ``(B, h, T, T_k)``.

        ``head_gate`` ``(h,)`` multiplies each head's output (0 = ablated);
        with a ``cache``, ``T_k`` is the cached length.
        """
        self.attention.out_proj.head_gate = head_gate
        try:
            inner = x if self.attention_only else self.norm_attention(x)
            out, weights = self.attention(inner, causal=True, cache=cache)
        finally:
            self.attention.out_proj.head_gate = None
        x = x + out
        if not self.attention_only:
            x = x + self.mlp(self.norm_mlp(x))
        return x, weights


class TinyDecoder(nn.Module):
    """Token and position embeddings, ``num_layers`` causal blocks, and an unembedding.

    Parameters
    ----------
    num_ids : int
        Number of token ids (for chapter 15's task: the random tokens and BOS).
    d_model : int
        Width of the residual stream.
    num_layers : int
        Number of blocks.
    num_heads : int
        Attention heads per block; must divide ``d_model``.
    max_len : int
        Longest sequence the learned position table covers.
    attention_only : bool
        Blocks without LayerNorm and MLP (True), or full pre-LayerNorm blocks
        with a final LayerNorm (False).
    positional : bool
        Add the learned position embeddings (turn off to see what they do).
    d_mlp : int, optional
        Hidden width of the MLP of full blocks; default ``4 * d_model``.

    Raises
    ------
    TypeError
        If a size is not an int or a flag not a bool.
    ValueError
        If a size is not positive or ``num_heads`` does not divide
        ``d_model``; nothing is built (torch's random state is untouched).
        ``d_mlp`` is checked even for attention-only blocks.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> model = TinyDecoder(num_ids=10, d_model=16, num_layers=2, num_heads=2)
    >>> ids = torch.tensor([[9, 3, 1, 3]])  # (B, T) = (1, 4)
    >>> logits, weights = model(ids)
    >>> tuple(logits.shape), [tuple(w.shape) for w in weights]
    ((1, 4, 10), [(1, 2, 4, 4), (1, 2, 4, 4)])

    Zero-ablating head 1 of layer 0 changes the output; its weights are still
    returned, only its contribution to the layer's output is gone:

    >>> ablated, _ = model(ids, ablate=[(0, 1)])
    >>> torch.allclose(ablated, logits)
    False
    """

    def __init__(
        self,
        num_ids: int,
        d_model: int = 32,
        num_layers: int = 2,
        num_heads: int = 2,
        max_len: int = 64,
        attention_only: bool = True,
        positional: bool = True,
        d_mlp: int | None = None,
    ) -> None:
        super().__init__()
        # Every argument is checked before any layer is built (and draws from torch's RNG).
        self.num_ids = check_positive_int(num_ids, "num_ids")
        d_model = check_positive_int(d_model, "d_model")
        self.num_layers = check_positive_int(num_layers, "num_layers")
        self.num_heads = check_positive_int(num_heads, "num_heads")
        self.max_len = check_positive_int(max_len, "max_len")
        self.attention_only = check_flag(attention_only, "attention_only")
        self.positional = check_flag(positional, "positional")
        if d_mlp is not None:
            d_mlp = check_positive_int(d_mlp, "d_mlp")
        if d_model % self.num_heads:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={self.num_heads}")
        self.embedding = nn.Embedding(num_ids, d_model)
        self.positions = nn.Embedding(self.max_len, d_model)
        self.blocks = nn.ModuleList(
            DecoderBlock(d_model, num_heads, attention_only, d_mlp) for _ in range(num_layers)
        )
        self.final_norm = nn.Identity() if attention_only else nn.LayerNorm(d_model)
        self.unembedding = nn.Linear(d_model, num_ids)

    def _head_gates(self, ablate: Iterable[tuple[int, int]] | None) -> list[torch.Tensor | None]:
        gates: list[torch.Tensor | None] = [None] * self.num_layers
        if ablate is None:
            return gates
        if isinstance(ablate, (str, bytes)) or not isinstance(ablate, Iterable):
            raise TypeError(
                f"ablate must be an iterable of (layer, head) pairs, got {describe(ablate)}"
            )
        for pair in ablate:
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise TypeError(f"ablate must hold (layer, head) pairs, got {pair!r}")
            layer, head = pair
            check_positive_int(layer, "ablate layer", allow_zero=True)
            check_positive_int(head, "ablate head", allow_zero=True)
            if layer >= self.num_layers or head >= self.num_heads:
                raise ValueError(
                    f"ablate pair {(layer, head)} is outside the model's {self.num_layers} "
                    f"layers of {self.num_heads} heads"
                )
            gate = gates[layer]
            if gate is None:
                gate = torch.ones(self.num_heads)
                gates[layer] = gate
            gate[head] = 0.0
        return gates

    def forward(
        self,
        ids: torch.Tensor,
        caches: Sequence[KVCache] | None = None,
        ablate: Iterable[tuple[int, int]] | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """Next-token logits for every position, and every layer's attention weights.

        Parameters
        ----------
        ids : torch.Tensor
            ``(B, T)`` int64 token ids.
        caches : sequence of KVCache, optional
            One cache per layer. The new tokens take positions
            ``len(cache) .. len(cache) + T - 1`` and attend to everything
            cached; pass fresh ``KVCache()`` objects to start a sequence.
        ablate : iterable of (layer, head), optional
            Heads whose output is set to zero (zero ablation).

        Returns
        -------
        logits : torch.Tensor
            ``(B, T, num_ids)``; ``logits[:, i]`` scores the token at ``i + 1``.
        weights : tuple of torch.Tensor
            One ``(B, num_heads, T, T_k)`` tensor per layer, ``T_k`` the
            cached length with caches, else ``T``.

        Raises
        ------
        TypeError
            If ``ids`` is not an int64 tensor, ``caches`` is not a list of
            ``KVCache`` objects, one per layer, or ``ablate`` does not hold
            pairs of ints.
        ValueError
            If ``ids`` is not ``(B, T)``, is on another device than the
            model, holds an id outside ``[0, num_ids)``, the positions exceed
            ``max_len``, the caches differ in length or do not fit their
            layer (batch size, heads, dtype, device), or an ablated head does
            not exist. Every input is checked before anything changes, so a
            call that raises leaves every cache as it was (length, contents,
            position).
        """
        # 1. Check every input; nothing has changed yet.
        check_int64_tensor(ids, "ids")
        if ids.dim() != 2 or ids.shape[1] == 0:
            raise ValueError(f"ids must have shape (B, T) with T >= 1, got {tuple(ids.shape)}")
        check_same_device(ids, "ids", self.embedding.weight.device, "the model's parameters")
        if int(ids.min()) < 0 or int(ids.max()) >= self.num_ids:
            raise ValueError(
                f"ids must lie in [0, {self.num_ids}), got values from {int(ids.min())} "
                f"to {int(ids.max())}"
            )
        start = 0
        if caches is not None:
            caches = self._check_caches(caches, ids.shape[0])
            start = len(caches[0])
        end = start + ids.shape[1]
        if end > self.max_len:
            raise ValueError(
                f"ids at positions {start} .. {end - 1} exceed the position table (max_len="
                f"{self.max_len})"
            )
        gates = self._head_gates(ablate)

        # 2. Compute. Each layer appends to its cache only once its own output is
        # finite; if a later layer still raises, every cache is put back.
        saved = [(c.key, c.value, c.position) for c in caches] if caches is not None else []
        try:
            x = self.embedding(ids)  # (B, T, d_model)
            if self.positional:
                where = torch.arange(start, end, device=ids.device)  # (T,)
                x = x + self.positions(where)  # (T, d_model) broadcast
            weights = []
            for layer, block in enumerate(self.blocks):
                cache = None if caches is None else caches[layer]
                x, layer_weights = block(x, cache=cache, head_gate=gates[layer])
                weights.append(layer_weights)  # (B, h, T, T_k)
            return self.unembedding(self.final_norm(x)), tuple(weights)
        except Exception:
            for cache, (key, value, position) in zip(caches or [], saved, strict=True):
                cache.key, cache.value, cache.position = key, value, position
            raise

    def _check_caches(self, caches: object, batch: int) -> list[KVCache]:
        """Raise unless ``caches`` holds one ``KVCache`` per layer, all of one length,
        each fitting its layer and a batch of ``batch``; return them as a list."""
        if isinstance(caches, (KVCache, str)) or not isinstance(caches, Sequence):
            raise TypeError(
                f"caches must be a list with one KVCache per layer ({self.num_layers}), "
                f"got {describe(caches)}"
            )
        caches = list(caches)
        if len(caches) != self.num_layers or not all(isinstance(c, KVCache) for c in caches):
            raise TypeError(
                f"caches must hold one KVCache per layer ({self.num_layers}), got "
                f"{[type(c).__name__ for c in caches]}"
            )
        lengths = [len(cache) for cache in caches]
        if len(set(lengths)) != 1:
            raise ValueError(f"caches hold different lengths {lengths}, one per layer")
        for layer, (cache, block) in enumerate(zip(caches, self.blocks, strict=True)):
            try:
                block.attention._check_cache(cache, batch)
            except (TypeError, ValueError) as error:
                raise type(error)(f"caches[{layer}] does not fit layer {layer}: {error}") from None
        return caches


def _check_decoder_and_ids(model: object, ids: object) -> None:
    if not isinstance(model, TinyDecoder):
        raise TypeError(f"model must be a TinyDecoder, got {describe(model)}")
    check_int64_tensor(ids, "ids")


def generate(
    model: TinyDecoder, ids: torch.Tensor, steps: int, cache: bool = True
) -> torch.Tensor:
    """Continue ``ids`` by ``steps`` tokens, each the most likely next one (greedy decoding).

    With ``cache=True`` the prompt goes through the model once (the
    prefill, filling one ``KVCache`` per layer) and every later step feeds
    only the newest token. With ``cache=False`` every step reruns the whole
    sequence so far. Both give the same tokens; the cache only saves work.

    Parameters
    ----------
    model : TinyDecoder
        The model; it runs in eval mode without gradients, and is put back
        in the mode it was in.
    ids : torch.Tensor
        ``(B, T)`` int64 prompt.
    steps : int
        Tokens to add, at least 1; ``T + steps`` may not exceed ``max_len``.
    cache : bool
        Decode with a key/value cache.

    Returns
    -------
    torch.Tensor
        ``(B, T + steps)``: the prompt followed by the generated tokens.

    Raises
    ------
    TypeError
        If ``model`` is not a ``TinyDecoder``, ``ids`` not an int64 tensor,
        ``steps`` not an int or ``cache`` not a bool.
    ValueError
        If ``steps`` is not positive, the result would exceed ``max_len``, or
        ``ids`` does not fit the model (not ``(B, T)``, another device, an id
        outside ``[0, num_ids)``). The model is left in the mode it was in.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> model = TinyDecoder(num_ids=10, d_model=16)
    >>> prompt = torch.tensor([[9, 3, 1, 4]])  # (B, T) = (1, 4)
    >>> with_cache = generate(model, prompt, steps=5)
    >>> tuple(with_cache.shape), torch.equal(with_cache[:, :4], prompt)
    ((1, 9), True)
    >>> torch.equal(with_cache, generate(model, prompt, steps=5, cache=False))
    True
    """
    _check_decoder_and_ids(model, ids)
    steps = check_positive_int(steps, "steps")
    cache = check_flag(cache, "cache")
    if ids.dim() != 2 or ids.shape[1] == 0:
        raise ValueError(f"ids must have shape (B, T) with T >= 1, got {tuple(ids.shape)}")
    if ids.shape[1] + steps > model.max_len:
        raise ValueError(
            f"T + steps = {ids.shape[1]} + {steps} exceeds the model's max_len={model.max_len}"
        )
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            sequence = ids
            caches = [KVCache() for _ in model.blocks] if cache else None
            new = ids  # what the model reads next: the prompt, then one token
            for _ in range(steps):
                logits, _ = model(new if cache else sequence, caches=caches)
                token = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
                sequence = torch.cat([sequence, token], dim=1)  # (B, T + k)
                new = token
        return sequence
    finally:
        model.train(was_training)


def head_weights(model: TinyDecoder, ids: torch.Tensor) -> np.ndarray:
    """The attention weights of every layer and head on one sequence, as numpy.

    Meant for figures and for exporting the maps (e.g. to an interactive
    page): entry ``[layer, r, i, j]`` is the weight of query ``i`` on key
    ``j`` in head ``r`` of that layer.

    Parameters
    ----------
    model : TinyDecoder
        The model; it runs without gradients, in eval mode.
    ids : torch.Tensor
        ``(T,)`` int64 token ids of one sequence.

    Returns
    -------
    numpy.ndarray
        ``(num_layers, num_heads, T, T)`` float64; every row sums to 1 and is
        zero right of the diagonal.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> model = TinyDecoder(num_ids=10, d_model=16, num_layers=2, num_heads=2)
    >>> maps = head_weights(model, torch.tensor([9, 3, 1, 3, 1]))
    >>> maps.shape, bool(np.allclose(maps.sum(axis=-1), 1.0))
    ((2, 2, 5, 5), True)
    """
    _check_decoder_and_ids(model, ids)
    if ids.dim() != 1:
        raise ValueError(f"ids must be one sequence of shape (T,), got {tuple(ids.shape)}")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            _, weights = model(ids[None])  # [(1, h, T, T)] per layer
    finally:
        model.train(was_training)
    return torch.stack([w[0] for w in weights]).to(torch.float64).numpy()
