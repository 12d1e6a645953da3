"""A key/value cache for decoding one token at a time (chapter 10 builds it)."""

from __future__ import annotations

import torch

from .._checks import check_finite, check_float_tensor, check_same_dtype_device


class KVCache:
    """The keys and values one attention layer has seen so far.

    A decoder that generates token ``t`` needs the keys and values of tokens
    ``0 .. t``. Those of the earlier tokens do not change, so instead of
    recomputing them at every step the layer stores them here and appends the
    new token's. Pass one ``KVCache()`` per attention layer as the ``cache``
    argument of :class:`selfattention.MultiHeadAttention`.

    Tensors are stored per key/value head, ``(B, num_kv_heads, T_cached,
    head_dim)``, before any sharing across query heads, so grouped-query and
    multi-query attention cache less. The cache keeps whatever it is given
    (including its autograd history); decode under ``torch.no_grad()``.

    A :class:`~selfattention.MultiHeadAttention` built with ``window=W``
    keeps only the last ``W`` positions here after each call (chapter 14):
    ``len(cache) <= W`` and ``nbytes`` stops growing, while ``position``
    keeps counting. :class:`~selfattention.MultiHeadLatentAttention` stores
    its latents in ``key`` and its rotary keys in ``value``.

    Attributes
    ----------
    key, value : torch.Tensor or None
        Everything cached so far, ``(B, num_kv_heads, T_cached, head_dim)``;
        None before the first ``append``.
    position : int
        How many positions the cache has seen: the position of the next
        token. ``append`` advances it by the number of new tokens and
        ``reset`` sets it back to 0. Without trimming it equals
        ``len(cache)``; a cache that drops old keys (a sliding window) keeps
        counting, so rotary embeddings (chapter 13) still get the absolute
        position of every new token.

    Examples
    --------
    >>> import torch
    >>> cache = KVCache()
    >>> keys, values = cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    >>> keys, values = cache.append(torch.ones(1, 2, 1, 4), torch.ones(1, 2, 1, 4))
    >>> len(cache), tuple(keys.shape), cache.nbytes, cache.position
    (4, (1, 2, 4, 4), 256, 4)
    """

    def __init__(self) -> None:
        self.key: torch.Tensor | None = None
        self.value: torch.Tensor | None = None
        self.position: int = 0

    def __len__(self) -> int:
        """The number of cached positions, ``T_cached``."""
        return 0 if self.key is None else self.key.shape[-2]

    def __repr__(self) -> str:
        shape = None if self.key is None else tuple(self.key.shape)
        return f"KVCache(length={len(self)}, key shape={shape})"

    @property
    def nbytes(self) -> int:
        """Memory held by the cached keys and values, in bytes."""
        if self.key is None or self.value is None:
            return 0
        return sum(t.numel() * t.element_size() for t in (self.key, self.value))

    def reset(self) -> None:
        """Forget everything (start a new sequence): no keys, and position 0."""
        self.key = None
        self.value = None
        self.position = 0

    def append(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Add ``key`` and ``value`` ``(B, num_kv_heads, T_new, head_dim)`` at the end.

        Everything is checked before anything is stored: a call that raises
        leaves the cache exactly as it was (length, contents, dtype).

        Parameters
        ----------
        key : torch.Tensor, shape ``(B, num_kv_heads, T_new, head_dim)``
            The new keys, floating-point and finite.
        value : torch.Tensor, shape ``(B, num_kv_heads, T_new, d_v)``
            The new values, with the dtype and device of ``key``.

        Returns
        -------
        key, value : torch.Tensor
            All the cached keys and values, ``(B, num_kv_heads,
            T_cached + T_new, head_dim)``.

        Raises
        ------
        TypeError
            If ``key`` or ``value`` is not a floating-point tensor, their
            dtypes differ, or they differ from the cached dtype.
        ValueError
            If a tensor is not 4-D, holds NaN or inf or is on the ``meta``
            device; ``key`` and ``value`` differ in ``(B, num_kv_heads,
            T_new)`` or device; or ``(B, num_kv_heads, head_dim)`` or the
            device differ from what is cached.

        Examples
        --------
        >>> import torch
        >>> cache = KVCache()
        >>> _ = cache.append(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
        >>> cache.append(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1, 4, dtype=torch.float64))
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        TypeError: value has dtype torch.float64, key torch.float32; convert one of them, ...
        >>> len(cache)  # unchanged by the call that raised
        3
        """
        keys, values = self._extended(key, value)
        self._store(keys, values, key.shape[-2])
        return keys, values

    def _check_fits(
        self,
        batch: int,
        layout: tuple[tuple[str, int, str, int, str], ...],
        like: torch.Tensor,
    ) -> int:
        """Raise unless what is cached fits a layer's next call; return ``len(self)``.

        ``layout`` describes, for the key slot and then the value slot, what
        the layer stores there: ``(name, heads, heads_label, width,
        width_label)``, e.g. ``("keys", 2, "num_kv_heads", 4, "head_dim")``.
        ``like`` is a parameter of the layer, whose dtype and device the
        cache must hold. The messages name the cache: one cache serves one
        layer and one batch of sequences. Used by ``MultiHeadAttention`` and
        ``MultiHeadLatentAttention``.
        """
        if self.key is None or self.value is None:
            return 0
        for (name, heads, heads_label, width, width_label), held in zip(
            layout, (self.key, self.value), strict=True
        ):
            if (held.shape[0], held.shape[1], held.shape[3]) != (batch, heads, width):
                raise ValueError(
                    f"cache holds {name} of shape {tuple(held.shape)}, but this call needs "
                    f"(B, {heads_label}, T, {width_label}) = ({batch}, {heads}, T, {width}); "
                    "use one KVCache per layer and per batch"
                )
            if held.dtype != like.dtype:
                raise TypeError(
                    f"cache holds {name} of dtype {held.dtype}, the module's parameters "
                    f"{like.dtype}; use a new KVCache after converting the module"
                )
            if held.device != like.device:
                raise ValueError(
                    f"cache holds {name} on device {held.device}, the module's parameters "
                    f"on {like.device}; use a new KVCache after moving the module"
                )
        return len(self)

    def _store(
        self, keys: torch.Tensor, values: torch.Tensor, new: int, keep_last: int | None = None
    ) -> None:
        """Hold ``keys`` and ``values`` (already checked) and count ``new`` positions.

        With ``keep_last`` (a sliding window), only the last ``keep_last``
        positions are kept, copied so that the dropped ones free their
        memory; ``position`` still advances by ``new``.
        """
        if keep_last is not None and keys.shape[-2] > keep_last:
            keys = keys[..., -keep_last:, :].clone()  # (B, h_kv, keep_last, head_dim)
            values = values[..., -keep_last:, :].clone()  # (B, h_kv, keep_last, d_v)
        self.key, self.value = keys, values
        self.position += new

    def _extended(
        self, key: torch.Tensor, value: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """What ``append`` would store, after checking everything; changes nothing.

        ``MultiHeadAttention`` computes with this and stores the result only
        once the whole forward pass has succeeded.
        """
        self._check_new(key, value)
        if self.key is None or self.value is None:
            return key, value
        return torch.cat([self.key, key], dim=-2), torch.cat([self.value, value], dim=-2)

    def _check_new(self, key: torch.Tensor, value: torch.Tensor) -> None:
        """Raise if ``append(key, value)`` would (types, shapes, dtypes, devices,
        finiteness, and the fit with what is cached); change nothing."""
        check_float_tensor(key, "key")
        check_float_tensor(value, "value")
        for name, tensor in (("key", key), ("value", value)):
            if tensor.dim() != 4:
                raise ValueError(
                    f"{name} must have shape (B, num_kv_heads, T, head_dim), "
                    f"got {tuple(tensor.shape)}"
                )
        check_same_dtype_device(value, "value", key.dtype, key.device, "key")
        if key.shape[:3] != value.shape[:3]:
            raise ValueError(
                f"key and value must agree on (B, num_kv_heads, T): key has shape "
                f"{tuple(key.shape)}, value has shape {tuple(value.shape)}"
            )
        if self.key is not None and self.value is not None:
            for name, new, old in (("key", key, self.key), ("value", value, self.value)):
                if new.shape[:2] != old.shape[:2] or new.shape[-1] != old.shape[-1]:
                    raise ValueError(
                        f"{name} of shape {tuple(new.shape)} does not fit the cache, which "
                        f"holds {tuple(old.shape)}; (B, num_kv_heads, head_dim) must match"
                    )
                check_same_dtype_device(new, name, old.dtype, old.device, "the cache")
        check_finite(key, "key")
        check_finite(value, "value")
