"""How many bytes a key/value cache holds, from a model's configuration.

One helper for every chapter that sizes a cache: multi-head, grouped-query
and multi-query attention (chapters 9 and 10), the cost per token
(chapter 12), sliding windows, mixes of local and global layers and
multi-head latent attention (chapter 14).

Per token and per layer a cache stores

- ``2 * num_kv_heads * head_dim`` numbers (a key and a value of width
  ``head_dim`` = d_k per key/value head) for multi-head (``num_kv_heads`` =
  h), grouped-query and multi-query (``num_kv_heads = 1``) attention;
- ``latent_dim + rope_dim`` numbers (the latent c_i of width d_c and the
  decoupled rotary key of width d_R, shared by all heads) for multi-head
  latent attention.

A layer with a sliding window of ``window`` = W tokens keeps at most W
positions; a global layer keeps all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._checks import check_positive_int


@dataclass(frozen=True)
class CacheConfig:
    """The part of a model's configuration that sets its key/value cache size.

    Parameters
    ----------
    num_layers : int
        Number of attention layers, each with its own cache.
    num_kv_heads : int
        Key/value heads per layer, h_kv: equal to the query heads h for
        multi-head attention, 1 for multi-query attention.
    head_dim : int
        Width of one key (and one value), d_k.
    window : int, optional
        Sliding-window size W: a windowed layer caches at most the last W
        positions. None (the default) means no layer is windowed.
    num_local_layers : int, optional
        How many of the ``num_layers`` layers are windowed (local); the rest
        are global. Needs ``window``. None (the default) with a ``window``
        means every layer is windowed.
    latent_dim : int, optional
        Multi-head latent attention: the latent width d_c cached per token
        and layer instead of keys and values. ``num_kv_heads`` and
        ``head_dim`` then describe the heads the latent is expanded to and do
        not enter the size.
    rope_dim : int, default 0
        Multi-head latent attention: the width d_R of the decoupled rotary
        key, cached beside the latent. Needs ``latent_dim``.

    Raises
    ------
    TypeError
        If a size is not an int (or is a bool).
    ValueError
        If a size is not positive (``num_local_layers`` and ``rope_dim`` may
        be 0), ``num_local_layers`` exceeds ``num_layers`` or comes without
        ``window``, or ``rope_dim`` comes without ``latent_dim``.

    Examples
    --------
    A 7B-size model with 32 layers and 32 heads of width 128, and its
    grouped-query version with 8 key/value heads, in bfloat16 (2 bytes):

    >>> mha = CacheConfig(num_layers=32, num_kv_heads=32, head_dim=128)
    >>> mha.bytes_per_token(element_size=2)  # 0.5 MiB per token
    524288
    >>> gqa = CacheConfig(num_layers=32, num_kv_heads=8, head_dim=128)
    >>> gqa.cache_bytes(4096, element_size=2) / 2**30  # GiB for 4096 tokens
    0.5

    A window of 4096 tokens on every layer stops the cache growing:

    >>> windowed = CacheConfig(32, 8, 128, window=4096)
    >>> windowed.cache_bytes(32768, 2) == gqa.cache_bytes(4096, 2)
    True
    """

    num_layers: int
    num_kv_heads: int
    head_dim: int
    window: int | None = None
    num_local_layers: int | None = None
    latent_dim: int | None = None
    rope_dim: int = 0

    def __post_init__(self) -> None:
        def store(name: str, value: int) -> None:
            object.__setattr__(self, name, value)  # frozen: normalise once

        store("num_layers", check_positive_int(self.num_layers, "num_layers"))
        store("num_kv_heads", check_positive_int(self.num_kv_heads, "num_kv_heads"))
        store("head_dim", check_positive_int(self.head_dim, "head_dim"))
        if self.window is not None:
            store("window", check_positive_int(self.window, "window"))
        if self.num_local_layers is not None:
            local = check_positive_int(self.num_local_layers, "num_local_layers", allow_zero=True)
            if self.window is None:
                raise ValueError(
                    f"num_local_layers={local} needs a window: local layers are the windowed ones"
                )
            if local > self.num_layers:
                raise ValueError(f"num_local_layers={local} exceeds num_layers={self.num_layers}")
            store("num_local_layers", local)
        if self.latent_dim is not None:
            store("latent_dim", check_positive_int(self.latent_dim, "latent_dim"))
        store("rope_dim", check_positive_int(self.rope_dim, "rope_dim", allow_zero=True))
        if self.rope_dim and self.latent_dim is None:
            raise ValueError(
                f"rope_dim={self.rope_dim} is the decoupled rotary key of latent "
                "attention and needs latent_dim"
            )

    @property
    def numbers_per_token_per_layer(self) -> int:
        """The numbers one layer caches per token, ``2 h_kv d_k`` (``d_c + d_R`` with a latent).

        Examples
        --------
        >>> CacheConfig(1, num_kv_heads=2, head_dim=4).numbers_per_token_per_layer
        16
        >>> CacheConfig(1, 128, 128, latent_dim=512, rope_dim=64).numbers_per_token_per_layer
        576
        """
        if self.latent_dim is not None:
            return self.latent_dim + self.rope_dim
        return 2 * self.num_kv_heads * self.head_dim

    @property
    def local_layers(self) -> int:
        """How many layers are windowed.

        ``num_local_layers`` when given; every layer with a ``window`` alone;
        0 without a window.

        Examples
        --------
        >>> CacheConfig(26, 4, 256, window=4096, num_local_layers=13).local_layers
        13
        >>> CacheConfig(32, 8, 128, window=4096).local_layers
        32
        """
        if self.window is None:
            return 0
        return self.num_layers if self.num_local_layers is None else self.num_local_layers

    def bytes_per_token(self, element_size: int) -> int:
        """Bytes one cached position takes over all layers, for one sequence.

        This is what each new token adds while no window is full; once a
        windowed layer holds ``window`` positions, only the global layers
        grow (use :meth:`cache_bytes` for a given length).

        Parameters
        ----------
        element_size : int
            Bytes per number, e: 2 for float16 and bfloat16, 4 for float32
            (``tensor.element_size()`` or ``dtype.itemsize``).

        Returns
        -------
        int
            ``num_layers * numbers_per_token_per_layer * element_size``.

        Raises
        ------
        TypeError
            If ``element_size`` is not an int.
        ValueError
            If ``element_size`` is not positive.

        Examples
        --------
        >>> CacheConfig(num_layers=2, num_kv_heads=2, head_dim=4).bytes_per_token(4)
        128
        """
        element_size = check_positive_int(element_size, "element_size")
        return self.num_layers * self.numbers_per_token_per_layer * element_size

    def cache_bytes(self, tokens: int, element_size: int, batch: int = 1) -> int:
        """Bytes of the whole cache after ``tokens`` positions, for ``batch`` sequences.

        A global layer holds all ``tokens`` positions, a windowed layer at
        most ``window`` of them.

        Parameters
        ----------
        tokens : int
            Positions seen so far (prompt and generated tokens), T >= 0.
        element_size : int
            Bytes per number, e.
        batch : int, default 1
            Sequences decoded together, B; each has its own cache.

        Returns
        -------
        int
            ``B * e * numbers_per_token_per_layer * (global layers * T
            + local layers * min(T, W))``.

        Raises
        ------
        TypeError
            If an argument is not an int.
        ValueError
            If ``tokens`` is negative, or ``element_size`` or ``batch`` is not
            positive.

        Examples
        --------
        Gemma-2-style: half the layers local with a window of 4096:

        >>> mixed = CacheConfig(26, 4, 256, window=4096, num_local_layers=13)
        >>> mixed.cache_bytes(8192, 2) / CacheConfig(26, 4, 256).cache_bytes(8192, 2)
        0.75
        >>> CacheConfig(2, 1, 4).cache_bytes(10, element_size=4, batch=3)
        1920
        """
        tokens = check_positive_int(tokens, "tokens", allow_zero=True)
        element_size = check_positive_int(element_size, "element_size")
        batch = check_positive_int(batch, "batch")
        local = self.local_layers
        held = (self.num_layers - local) * tokens
        if local:
            held += local * min(tokens, self.window)  # type: ignore[type-var]
        return batch * element_size * self.numbers_per_token_per_layer * held
