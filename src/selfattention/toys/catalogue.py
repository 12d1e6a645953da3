"""A toy video catalogue: the search engine of chapter 2, as vectors.

Each of the six videos has a title, a *key* vector that describes what the
title and blurb promise (what a search is matched against) and a *value*
vector that describes the content itself (what a search hands back). Later
chapters reuse it whenever they need a small, readable set of keys and values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._checks import as_float_array

#: What each key axis measures, from 0 (not at all) to 1 (entirely).
KEY_AXES: tuple[str, ...] = ("fantasy", "crime", "comedy", "nature")
#: What each value axis measures, in its own unit.
VALUE_AXES: tuple[str, ...] = ("hours", "episodes", "stars")

_ITEMS: tuple[tuple[str, tuple[float, ...], tuple[float, ...]], ...] = (
    # title                   fantasy crime comedy nature    hours episodes stars
    ("Dragons of the North", (1.0, 0.2, 0.0, 0.1), (9.5, 10.0, 4.6)),
    ("The Last Heist", (0.0, 1.0, 0.1, 0.0), (2.0, 1.0, 4.1)),
    ("Kitchen Chaos", (0.0, 0.0, 1.0, 0.2), (4.0, 8.0, 3.8)),
    ("Deep Blue Ocean", (0.0, 0.0, 0.0, 1.0), (5.5, 6.0, 4.8)),
    ("Murder at the Manor", (0.1, 0.8, 0.6, 0.0), (1.8, 1.0, 3.9)),
    ("Little Dragon", (0.8, 0.0, 0.5, 0.3), (3.5, 20.0, 4.2)),
)


@dataclass(frozen=True, eq=False)
class Catalogue:
    """Titles with one key vector and one value vector each.

    The arguments are stored as read-only attributes of the same names;
    ``keys`` and ``values`` become float64 arrays that cannot be written to.

    Parameters
    ----------
    titles : sequence of str
        ``n_items`` distinct names, one per row of ``keys`` and ``values``.
    keys : array_like, shape ``(n_items, d_k)``
        What a query is compared against.
    values : array_like, shape ``(n_items, d_v)``
        What a lookup returns.
    key_axes : sequence of str
        ``d_k`` names, the meaning of each column of ``keys``.
    value_axes : sequence of str
        ``d_v`` names, the meaning of each column of ``values``.

    Raises
    ------
    TypeError
        If a name list is not a sequence of strings, or ``keys``/``values``
        do not hold real numbers.
    ValueError
        If the titles repeat, ``keys`` or ``values`` is not 2-D or not
        finite, or a row or column count does not match the names.

    Examples
    --------
    >>> from selfattention import Catalogue
    >>> pets = Catalogue(
    ...     titles=("cat", "dog"),
    ...     keys=[[1.0, 0.0], [0.0, 1.0]],
    ...     values=[[4.0], [30.0]],
    ...     key_axes=("purrs", "barks"),
    ...     value_axes=("kilograms",),
    ... )
    >>> pets.n_items, pets.d_k, pets.d_v
    (2, 2, 1)
    >>> pets.keys.flags.writeable
    False
    """

    titles: tuple[str, ...]
    keys: np.ndarray
    values: np.ndarray
    key_axes: tuple[str, ...]
    value_axes: tuple[str, ...]

    def __post_init__(self) -> None:
        for name in ("titles", "key_axes", "value_axes"):
            names = getattr(self, name)
            if isinstance(names, str) or not all(isinstance(item, str) for item in names):
                raise TypeError(f"{name} must be a sequence of strings, got {names!r}")
            object.__setattr__(self, name, tuple(names))
        if len(set(self.titles)) != len(self.titles):
            raise ValueError(f"titles must be distinct, got {self.titles}")
        keys = as_float_array(self.keys, "keys").astype(np.float64)
        values = as_float_array(self.values, "values").astype(np.float64)
        for name, array in (("keys", keys), ("values", values)):
            if array.ndim != 2:
                raise ValueError(f"{name} must be 2-D (n_items, d), got shape {array.shape}")
            if not np.isfinite(array).all():
                raise ValueError(f"{name} must be finite (shape {array.shape})")
        n_items = len(self.titles)
        if keys.shape[0] != n_items or values.shape[0] != n_items:
            raise ValueError(
                f"keys and values need one row per title: {n_items} titles, "
                f"keys has shape {keys.shape}, values has shape {values.shape}"
            )
        if keys.shape[1] != len(self.key_axes):
            raise ValueError(
                f"key_axes names {len(self.key_axes)} axes but keys has shape {keys.shape}"
            )
        if values.shape[1] != len(self.value_axes):
            raise ValueError(
                f"value_axes names {len(self.value_axes)} axes but values has shape {values.shape}"
            )
        keys.setflags(write=False)
        values.setflags(write=False)
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "values", values)

    @property
    def n_items(self) -> int:
        """Number of titles (rows of ``keys`` and ``values``)."""
        return len(self.titles)

    @property
    def d_k(self) -> int:
        """Length of a key vector (and of a query)."""
        return self.keys.shape[1]

    @property
    def d_v(self) -> int:
        """Length of a value vector (and of a lookup's result)."""
        return self.values.shape[1]

    def query(self, **weights: Any) -> np.ndarray:
        """A ``(d_k,)`` query vector from key-axis names; axes not named are 0.

        Parameters
        ----------
        **weights : float
            One keyword per key axis to set, e.g. ``crime=1, comedy=1``.

        Returns
        -------
        numpy.ndarray, shape ``(d_k,)``
            The query, in the order of ``key_axes``.

        Raises
        ------
        TypeError
            If an amount is not a real number.
        ValueError
            If no axis is named, an axis is unknown, or an amount is not finite.

        Examples
        --------
        >>> from selfattention import video_catalogue
        >>> video_catalogue().query(crime=1, comedy=0.5).tolist()
        [0.0, 1.0, 0.5, 0.0]
        """
        if not weights:
            raise ValueError(f"name at least one key axis, from {self.key_axes}")
        vector = np.zeros(self.d_k)
        for axis, amount in weights.items():
            if axis not in self.key_axes:
                raise ValueError(f"unknown key axis {axis!r}; the axes are {self.key_axes}")
            if isinstance(amount, (bool, np.bool_)) or not isinstance(
                amount, (int, float, np.number)
            ):
                raise TypeError(f"{axis} must be a real number, got {type(amount).__name__}")
            if not np.isfinite(amount):
                raise ValueError(f"{axis} must be finite, got {amount}")
            vector[self.key_axes.index(axis)] = float(amount)
        return vector

    def as_dict(self) -> dict[str, np.ndarray]:
        """The hard lookup table: title -> ``(d_v,)`` value vector.

        Examples
        --------
        >>> from selfattention import video_catalogue
        >>> video_catalogue().as_dict()["The Last Heist"].tolist()
        [2.0, 1.0, 4.1]
        """
        return dict(zip(self.titles, self.values, strict=True))


def video_catalogue() -> Catalogue:
    """The book's toy catalogue: 6 videos, ``d_k = 4`` key axes, ``d_v = 3`` value axes.

    Key axes (``keys``, shape ``(6, 4)``), each from 0 to 1: how strongly the
    title and blurb promise

    - ``fantasy``: dragons, magic, other worlds;
    - ``crime``: heists, detectives, murder;
    - ``comedy``: jokes and light mood;
    - ``nature``: animals, oceans, landscapes.

    Value axes (``values``, shape ``(6, 3)``), the content you get:

    - ``hours``: total running time in hours;
    - ``episodes``: number of episodes (1 for a film);
    - ``stars``: average viewer rating out of 5.

    Keys and values live in different spaces on purpose: you search by what a
    title promises and receive what the video is.

    Returns
    -------
    Catalogue
        A new catalogue each call (its arrays are read-only).

    Examples
    --------
    >>> from selfattention import video_catalogue
    >>> catalogue = video_catalogue()
    >>> catalogue.keys.shape, catalogue.values.shape
    ((6, 4), (6, 3))
    >>> catalogue.titles[:2]
    ('Dragons of the North', 'The Last Heist')
    """
    titles = tuple(title for title, _, _ in _ITEMS)
    keys = np.array([key for _, key, _ in _ITEMS])  # (6, 4)
    values = np.array([value for _, _, value in _ITEMS])  # (6, 3)
    return Catalogue(titles, keys, values, KEY_AXES, VALUE_AXES)
