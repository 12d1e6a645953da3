"""Input validation shared by the numpy functions and the torch modules.

Every check works on shapes and dtypes only, so the same messages appear
whether the caller passed a numpy array or a torch tensor. Each message names
the argument and the shape (or dtype) it got.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

Shape = tuple[int, ...]


def as_float_array(value: Any, name: str) -> np.ndarray:
    """Return ``value`` as a floating numpy array, or raise ``TypeError``.

    Integer and boolean-free real inputs are promoted to float64; float16,
    float32 and float64 are kept as they are.
    """
    try:
        array = np.asarray(value)
    except Exception as exc:  # pragma: no cover - numpy raises many kinds
        raise TypeError(f"{name} must be array-like, got {type(value).__name__}") from exc
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)
    ):
        raise TypeError(f"{name} must hold real numbers, got dtype {array.dtype}")
    if np.issubdtype(array.dtype, np.integer):
        array = array.astype(np.float64)
    if np.isnan(array).any():
        raise ValueError(f"{name} contains NaN (shape {array.shape})")
    return array


def as_bool_mask(mask: Any, name: str = "mask") -> np.ndarray:
    """Return ``mask`` as a boolean numpy array, or raise ``TypeError``."""
    array = np.asarray(mask)
    if array.dtype != np.bool_:
        raise TypeError(
            f"{name} must be boolean (True = may attend), got dtype {array.dtype}; "
            "convert an additive or 0/1 mask first"
        )
    return array


def check_rank(shape: Sequence[int], name: str, minimum: int = 2) -> None:
    """Raise ``ValueError`` unless ``shape`` has at least ``minimum`` dimensions."""
    if len(shape) < minimum:
        raise ValueError(
            f"{name} must have at least {minimum} dimensions, got shape {tuple(shape)}"
        )


def broadcast_shapes(*named: tuple[str, Sequence[int]]) -> Shape:
    """Broadcast several ``(name, shape)`` pairs, naming them all on failure."""
    try:
        return tuple(np.broadcast_shapes(*(tuple(shape) for _, shape in named)))
    except ValueError:
        listing = ", ".join(f"{name} {tuple(shape)}" for name, shape in named)
        raise ValueError(f"shapes do not broadcast: {listing}") from None


def check_mask_shape(mask_shape: Sequence[int], target: Sequence[int], name: str = "mask") -> None:
    """Raise ``ValueError`` unless ``mask_shape`` broadcasts to exactly ``target``."""
    target = tuple(target)
    try:
        result = tuple(np.broadcast_shapes(tuple(mask_shape), target))
    except ValueError:
        result = None
    if result != target:
        raise ValueError(
            f"{name} of shape {tuple(mask_shape)} does not broadcast to the "
            f"score shape {target}"
        )


def check_attention_shapes(
    query: Sequence[int], key: Sequence[int], value: Sequence[int]
) -> Shape:
    """Validate query/key/value shapes; return the broadcast leading shape.

    ``query`` is ``(..., Tq, d_k)``, ``key`` is ``(..., Tk, d_k)`` and ``value``
    is ``(..., Tk, d_v)``.
    """
    for name, shape in (("query", query), ("key", key), ("value", value)):
        check_rank(shape, name)
    if query[-1] != key[-1]:
        raise ValueError(
            f"query and key must share the feature size d_k: query has shape "
            f"{tuple(query)}, key has shape {tuple(key)}"
        )
    if key[-2] != value[-2]:
        raise ValueError(
            f"key and value must have the same length Tk: key has shape "
            f"{tuple(key)}, value has shape {tuple(value)}"
        )
    return broadcast_shapes(
        ("query batch dims of", query[:-2]),
        ("key batch dims of", key[:-2]),
        ("value batch dims of", value[:-2]),
    )


def check_positive_int(value: Any, name: str, allow_zero: bool = False) -> int:
    """Return ``value`` as an int after checking its type and sign."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return int(value)
