"""A tiny synthetic image and the patch cutting of a vision transformer (chapter 8).

A vision transformer (Dosovitskiy et al., 2021) cuts an image into square
patches and treats each flattened patch as one token. ``synthetic_image``
makes a small RGB picture with one coloured object on a smooth background,
both with a little pixel noise, and ``patchify`` cuts any image into those tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._checks import as_float_array, check_positive_int

#: RGB colour of the object (a warm red) and the two corners of the background gradient.
OBJECT_COLOUR = np.array([0.90, 0.25, 0.15])
BACKGROUND_TOP_LEFT = np.array([0.10, 0.35, 0.45])
BACKGROUND_BOTTOM_RIGHT = np.array([0.25, 0.50, 0.35])


def synthetic_image(
    size: int, object_box: Sequence[int], seed: int = 0, noise: float = 0.03
) -> tuple[np.ndarray, np.ndarray]:
    """A small RGB image in [0, 1] with one red object on a smooth background.

    The background is a blue-green gradient from the top-left to the
    bottom-right corner. Both object and background get Gaussian pixel noise
    drawn from ``seed``, then everything is clipped to [0, 1].

    Parameters
    ----------
    size : int
        Height and width in pixels; positive.
    object_box : sequence of 4 int
        ``(top, left, bottom, right)`` in pixels, half-open like a slice: the
        object covers rows ``top:bottom`` and columns ``left:right``.
    seed : int, default 0
        Seed of the noise; at least 0.
    noise : float, default 0.03
        Standard deviation of the noise; at least 0.

    Returns
    -------
    image : numpy.ndarray, shape ``(size, size, 3)``
        The RGB image, float64 in [0, 1].
    mask : numpy.ndarray, shape ``(size, size)``
        Boolean, True on the object's pixels.

    Raises
    ------
    TypeError
        If ``size``, ``seed`` or an entry of ``object_box`` is not an int,
        ``object_box`` is not a sequence, or ``noise`` is not a number.
    ValueError
        If ``size`` is not positive, ``seed`` or ``noise`` is negative,
        ``object_box`` does not have 4 entries or does not fit in the image
        (``0 <= top < bottom <= size`` and ``0 <= left < right <= size``).

    Examples
    --------
    >>> from selfattention import synthetic_image
    >>> image, mask = synthetic_image(8, object_box=(2, 2, 6, 6))
    >>> image.shape, mask.shape, int(mask.sum())
    ((8, 8, 3), (8, 8), 16)
    """
    size = check_positive_int(size, "size")
    seed = check_positive_int(seed, "seed", allow_zero=True)
    if isinstance(noise, (bool, np.bool_)) or not isinstance(
        noise, (int, float, np.floating, np.integer)
    ):
        raise TypeError(f"noise must be a number, got {type(noise).__name__}")
    if not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite number >= 0, got {noise}")
    try:
        box = tuple(object_box)
    except TypeError:
        raise TypeError(
            "object_box must be a sequence (top, left, bottom, right), "
            f"got {type(object_box).__name__}"
        ) from None
    if len(box) != 4:
        raise ValueError(
            f"object_box must have 4 entries (top, left, bottom, right), got {len(box)}"
        )
    for name, value in zip(("top", "left", "bottom", "right"), box, strict=True):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"object_box {name} must be an int, got {type(value).__name__}")
    top, left, bottom, right = (int(value) for value in box)
    if not (0 <= top < bottom <= size and 0 <= left < right <= size):
        raise ValueError(
            f"object_box (top, left, bottom, right) = {box} must satisfy "
            f"0 <= top < bottom <= size and 0 <= left < right <= size, with size={size}"
        )

    rng = np.random.default_rng(seed)
    ramp = np.linspace(0.0, 1.0, size)  # (size,)
    blend = (ramp[:, None] + ramp[None, :])[
        ..., None
    ] / 2  # (size, size, 1), 0 top-left to 1 bottom-right
    image = (1 - blend) * BACKGROUND_TOP_LEFT + blend * BACKGROUND_BOTTOM_RIGHT  # (size, size, 3)
    mask = np.zeros((size, size), dtype=bool)
    mask[top:bottom, left:right] = True
    image[mask] = OBJECT_COLOUR
    image = image + rng.normal(0.0, noise, size=image.shape)
    return np.clip(image, 0.0, 1.0), mask


def patchify(image: Any, patch_size: int) -> np.ndarray:
    """Cut ``image`` into square patches, one flattened patch per row.

    Patches are listed row by row (left to right, then top to bottom), and
    each is flattened in (row, column, channel) order, as a vision
    transformer reads them.

    Parameters
    ----------
    image : array_like, shape ``(H, W, C)`` or ``(H, W)``
        The picture; a 2-D image has one channel. ``H`` and ``W`` must be
        multiples of ``patch_size``.
    patch_size : int
        Side of each square patch in pixels; positive.

    Returns
    -------
    numpy.ndarray, shape ``(num_patches, patch_size * patch_size * C)``
        With ``num_patches = (H / patch_size) * (W / patch_size)``.

    Raises
    ------
    TypeError
        If ``patch_size`` is not an int, or ``image`` does not hold real numbers.
    ValueError
        If ``patch_size`` is not positive, ``image`` is not 2-D or 3-D, or
        ``patch_size`` does not divide its height and width.

    Examples
    --------
    >>> import numpy as np
    >>> from selfattention import patchify
    >>> image = np.arange(16.0).reshape(4, 4)  # (H, W) = (4, 4), one channel
    >>> patchify(image, 2).tolist()
    [[0.0, 1.0, 4.0, 5.0], [2.0, 3.0, 6.0, 7.0], [8.0, 9.0, 12.0, 13.0], [10.0, 11.0, 14.0, 15.0]]
    """
    patch_size = check_positive_int(patch_size, "patch_size")
    pixels = as_float_array(image, "image")
    if pixels.ndim == 2:
        pixels = pixels[..., None]
    if pixels.ndim != 3:
        raise ValueError(f"image must have shape (H, W, C) or (H, W), got {np.shape(image)}")
    height, width, channels = pixels.shape
    if height % patch_size or width % patch_size:
        raise ValueError(
            f"patch_size={patch_size} must divide the image height and width evenly, "
            f"got image shape {np.shape(image)}"
        )
    rows, cols = height // patch_size, width // patch_size
    blocks = pixels.reshape(rows, patch_size, cols, patch_size, channels)
    blocks = blocks.transpose(0, 2, 1, 3, 4)  # (rows, cols, patch_size, patch_size, C)
    return blocks.reshape(rows * cols, patch_size * patch_size * channels)
