"""A tiny synthetic image and the patch cutting of a vision transformer (chapter 8).

A vision transformer (Dosovitskiy et al., 2021) cuts an image into square
patches and treats each flattened patch as one token. ``synthetic_image``
makes a small RGB picture with one coloured object on a smooth background,
both with a little pixel noise, and ``patchify`` cuts any image into those tokens.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ._checks import as_float_array, check_positive_int

#: RGB colour of the object (a warm red) and the two corners of the background gradient.
OBJECT_COLOUR = np.array([0.90, 0.25, 0.15])
BACKGROUND_TOP_LEFT = np.array([0.10, 0.35, 0.45])
BACKGROUND_BOTTOM_RIGHT = np.array([0.25, 0.50, 0.35])


def synthetic_image(
    size: int, object_box: Sequence[int], seed: int = 0, noise: float = 0.03
) -> tuple[np.ndarray, np.ndarray]:
    """A ``(size, size, 3)`` RGB image in [0, 1] with one red object; returns ``(image, mask)``.

    ``object_box`` is ``(top, left, bottom, right)`` in pixels, half-open like a
    slice: the object covers rows ``top:bottom`` and columns ``left:right``.
    The background is a smooth blue-green gradient. Both get Gaussian pixel
    noise of standard deviation ``noise`` drawn from ``seed``. ``mask`` is a
    boolean ``(size, size)`` array, True on the object's pixels.
    """
    size = check_positive_int(size, "size")
    seed = check_positive_int(seed, "seed", allow_zero=True)
    if isinstance(noise, (bool, np.bool_)) or not isinstance(noise, (int, float, np.floating, np.integer)):
        raise TypeError(f"noise must be a number, got {type(noise).__name__}")
    if not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite number >= 0, got {noise}")
    try:
        box = tuple(object_box)
    except TypeError:
        raise TypeError(
            f"object_box must be a sequence (top, left, bottom, right), got {type(object_box).__name__}"
        ) from None
    if len(box) != 4:
        raise ValueError(f"object_box must have 4 entries (top, left, bottom, right), got {len(box)}")
    for name, value in zip(("top", "left", "bottom", "right"), box):
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
    blend = (ramp[:, None] + ramp[None, :])[..., None] / 2  # (size, size, 1), 0 top-left to 1 bottom-right
    image = (1 - blend) * BACKGROUND_TOP_LEFT + blend * BACKGROUND_BOTTOM_RIGHT  # (size, size, 3)
    mask = np.zeros((size, size), dtype=bool)
    mask[top:bottom, left:right] = True
    image[mask] = OBJECT_COLOUR
    image = image + rng.normal(0.0, noise, size=image.shape)
    return np.clip(image, 0.0, 1.0), mask


def patchify(image: Any, patch_size: int) -> np.ndarray:
    """Cut ``image`` into square patches, one flattened patch per row.

    ``image`` is ``(H, W, C)`` or ``(H, W)`` (one channel). Returns an array
    of shape ``(num_patches, patch_size * patch_size * C)`` with
    ``num_patches = (H / patch_size) * (W / patch_size)``. Patches are listed
    row by row (left to right, then top to bottom) and each is flattened in
    (row, column, channel) order. ``H`` and ``W`` must be multiples of
    ``patch_size``.
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
