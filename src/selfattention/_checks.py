"""Input validation shared by the numpy functions and the torch modules.

Every check works on shapes and dtypes only, so the same messages appear
whether the caller passed a numpy array or a torch tensor. Each message names
the argument and the shape (or dtype) it got.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

Shape = tuple[int, ...]


def as_float_array(value: Any, name: str) -> np.ndarray:
    """Return ``value`` as a floating numpy array.

    Integer inputs are promoted to float64; float16, float32 and float64 are
    kept as they are. Booleans are refused: a mask passed as data is a bug.

    Parameters
    ----------
    value : array_like
        Real numbers of any shape.
    name : str
        The argument's name, used in error messages.

    Returns
    -------
    numpy.ndarray
        A floating-point array (a view of ``value`` when no conversion is needed).

    Raises
    ------
    TypeError
        If ``value`` is not array-like or does not hold real, non-boolean numbers.
    ValueError
        If ``value`` contains NaN.

    Examples
    --------
    >>> as_float_array([1, 2], "x").dtype
    dtype('float64')
    >>> as_float_array([True], "x")
    Traceback (most recent call last):
        ...
    TypeError: x must hold real numbers, got dtype bool
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
    """Return ``mask`` as a boolean numpy array (True = may attend).

    Parameters
    ----------
    mask : array_like of bool
        The mask; 0/1 or additive (``-inf``) masks are refused.
    name : str, default "mask"
        The argument's name, used in error messages.

    Returns
    -------
    numpy.ndarray
        Boolean array of the same shape.

    Raises
    ------
    TypeError
        If ``mask`` is not boolean.

    Examples
    --------
    >>> as_bool_mask([True, False]).tolist()
    [True, False]
    >>> as_bool_mask([1, 0])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    TypeError: mask must be boolean (True = may attend), got dtype int64; ...
    """
    array = np.asarray(mask)
    if array.dtype != np.bool_:
        raise TypeError(
            f"{name} must be boolean (True = may attend), got dtype {array.dtype}; "
            "convert an additive or 0/1 mask first"
        )
    return array


def check_rank(shape: Sequence[int], name: str, minimum: int = 2) -> None:
    """Raise ``ValueError`` unless ``shape`` has at least ``minimum`` dimensions.

    Parameters
    ----------
    shape : sequence of int
        The shape to check.
    name : str
        The argument's name, used in the error message.
    minimum : int, default 2
        The smallest allowed number of dimensions.

    Raises
    ------
    ValueError
        If ``len(shape) < minimum``.

    Examples
    --------
    >>> check_rank((3, 4), "query")
    >>> check_rank((4,), "query")
    Traceback (most recent call last):
        ...
    ValueError: query must have at least 2 dimensions, got shape (4,)
    """
    if len(shape) < minimum:
        raise ValueError(
            f"{name} must have at least {minimum} dimensions, got shape {tuple(shape)}"
        )


def broadcast_shapes(*named: tuple[str, Sequence[int]]) -> Shape:
    """Broadcast several ``(name, shape)`` pairs, naming them all on failure.

    Parameters
    ----------
    *named : tuple of (str, sequence of int)
        The shapes to broadcast, each with the name of its argument.

    Returns
    -------
    tuple of int
        The broadcast shape.

    Raises
    ------
    ValueError
        If the shapes do not broadcast; the message lists every pair.

    Examples
    --------
    >>> broadcast_shapes(("a", (2, 1)), ("b", (3,)))
    (2, 3)
    """
    try:
        return tuple(np.broadcast_shapes(*(tuple(shape) for _, shape in named)))
    except ValueError:
        listing = ", ".join(f"{name} {tuple(shape)}" for name, shape in named)
        raise ValueError(f"shapes do not broadcast: {listing}") from None


def check_mask_shape(mask_shape: Sequence[int], target: Sequence[int], name: str = "mask") -> None:
    """Raise ``ValueError`` unless ``mask_shape`` broadcasts to exactly ``target``.

    A mask may have fewer or size-1 dimensions, but it may not enlarge the
    scores it masks.

    Parameters
    ----------
    mask_shape : sequence of int
        The shape of the mask.
    target : sequence of int
        The shape of the scores, ``(..., T_q, T_k)``.
    name : str, default "mask"
        The argument's name, used in the error message.

    Raises
    ------
    ValueError
        If ``mask_shape`` does not broadcast to ``target``.

    Examples
    --------
    >>> check_mask_shape((1, 3), (2, 3))
    >>> check_mask_shape((2, 2, 3), (2, 3))
    Traceback (most recent call last):
        ...
    ValueError: mask of shape (2, 2, 3) does not broadcast to the score shape (2, 3)
    """
    target = tuple(target)
    try:
        result = tuple(np.broadcast_shapes(tuple(mask_shape), target))
    except ValueError:
        result = None
    if result != target:
        raise ValueError(
            f"{name} of shape {tuple(mask_shape)} does not broadcast to the score shape {target}"
        )


def check_attention_shapes(
    query: Sequence[int], key: Sequence[int], value: Sequence[int]
) -> Shape:
    """Validate query/key/value shapes; return the broadcast leading shape.

    Parameters
    ----------
    query : sequence of int
        Shape ``(..., T_q, d_k)``.
    key : sequence of int
        Shape ``(..., T_k, d_k)``.
    value : sequence of int
        Shape ``(..., T_k, d_v)``.

    Returns
    -------
    tuple of int
        The broadcast batch dimensions ``...``.

    Raises
    ------
    ValueError
        If a shape has fewer than 2 dimensions, ``d_k`` or ``T_k`` differ, or
        the batch dimensions do not broadcast.

    Examples
    --------
    >>> check_attention_shapes((5, 2, 4), (1, 3, 4), (3, 6))
    (5,)
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
    """Return ``value`` as an int after checking its type and sign.

    Parameters
    ----------
    value : int
        The number to check (a Python or numpy integer, not a bool).
    name : str
        The argument's name, used in error messages.
    allow_zero : bool, default False
        Whether 0 is allowed.

    Returns
    -------
    int
        ``value`` as a Python int.

    Raises
    ------
    TypeError
        If ``value`` is not an integer, or is a bool.
    ValueError
        If ``value`` is negative, or 0 when ``allow_zero`` is False.

    Examples
    --------
    >>> check_positive_int(3, "d_model")
    3
    >>> check_positive_int(0, "d_model")
    Traceback (most recent call last):
        ...
    ValueError: d_model must be positive, got 0
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return int(value)
