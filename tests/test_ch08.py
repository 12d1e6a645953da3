"""Chapter 8: the attention-output checker, and the synthetic image and patches."""

import math

import numpy as np
import pytest

from selfattention import patchify, softmax, synthetic_image
from selfattention.exercises import check_attention_output


def right_attention(query, key, value):
    scores = query @ np.swapaxes(key, -1, -2) / math.sqrt(query.shape[-1])  # (..., T_q, T_k)
    return softmax(scores, axis=-1) @ value  # (..., T_q, d_v)


def test_attention_output_checker_accepts_right_answer(capsys):
    assert check_attention_output(right_attention) is True
    assert capsys.readouterr().out.startswith("✓ check_attention_output: all 5 cases pass")


def test_attention_output_checker_rejects_missing_scale(capsys):
    def forgot_scale(query, key, value):
        return softmax(query @ np.swapaxes(key, -1, -2), axis=-1) @ value

    assert check_attention_output(forgot_scale) is False
    out = capsys.readouterr().out
    assert "case 1 (two queries, three keys, d_k = 4, written out by hand)\n  values differ" in out
    assert "expected:" in out and "got:" in out


def test_attention_output_checker_rejects_softmax_over_queries(capsys):
    def wrong_axis(query, key, value):
        scores = query @ np.swapaxes(key, -1, -2) / math.sqrt(query.shape[-1])
        return softmax(scores, axis=-2) @ value

    assert check_attention_output(wrong_axis) is False
    assert "✗ check_attention_output: case 1" in capsys.readouterr().out


def test_attention_output_checker_names_the_case_of_a_transposed_product(capsys):
    def transposed(query, key, value):
        scores = query @ np.swapaxes(key, -1, -2) / math.sqrt(query.shape[-1])
        weights = softmax(scores, axis=-1)  # (..., T_q, T_k)
        return (
            np.swapaxes(weights, -1, -2) @ value
            if weights.shape[-1] == weights.shape[-2]
            else weights @ value
        )

    assert check_attention_output(transposed) is False
    assert (
        "case 2 (self-attention, T = 5, d_k = d_v = 3)\n  values differ" in capsys.readouterr().out
    )


def test_attention_output_checker_catches_a_naive_softmax(capsys):
    def naive(query, key, value):
        scores = query @ np.swapaxes(key, -1, -2) / math.sqrt(query.shape[-1])
        with np.errstate(over="ignore", invalid="ignore"):
            exps = np.exp(scores)
            return exps / exps.sum(axis=-1, keepdims=True) @ value

    assert check_attention_output(naive) is False
    assert "case 5 (large scores" in capsys.readouterr().out


def test_attention_output_checker_reports_values_times_weights_by_its_shape(capsys):
    def weights_times_values_wrong_way(query, key, value):
        scores = query @ np.swapaxes(key, -1, -2) / math.sqrt(query.shape[-1])
        return value @ softmax(scores, axis=-1)

    assert check_attention_output(weights_times_values_wrong_way) is False
    out = capsys.readouterr().out
    assert (
        "case 1 (two queries, three keys, d_k = 4, written out by hand)\n  "
        "shape (3, 3) instead of (2, 2)" in out
    )


# --- synthetic_image -------------------------------------------------------------


def test_synthetic_image_shape_range_mask_and_determinism():
    image, mask = synthetic_image(16, (4, 8, 12, 16), seed=3)
    assert image.shape == (16, 16, 3) and image.dtype == np.float64
    assert mask.shape == (16, 16) and mask.dtype == np.bool_
    assert 0.0 <= image.min() and image.max() <= 1.0
    assert mask.sum() == 8 * 8 and mask[4:12, 8:16].all()
    again, _ = synthetic_image(16, (4, 8, 12, 16), seed=3)
    other, _ = synthetic_image(16, (4, 8, 12, 16), seed=4)
    np.testing.assert_array_equal(image, again)
    assert not np.array_equal(image, other)
    # The object is red; the background is not.
    assert image[mask][:, 0].mean() > 0.8 and image[~mask][:, 0].mean() < 0.3


def test_synthetic_image_without_noise_is_exactly_the_object_colour():
    image, mask = synthetic_image(8, (0, 0, 2, 3), seed=0, noise=0.0)
    np.testing.assert_allclose(image[mask], np.tile([0.90, 0.25, 0.15], (6, 1)))


@pytest.mark.parametrize(
    "kwargs,error,pattern",
    [
        (dict(size=0, object_box=(0, 0, 1, 1)), ValueError, r"size must be positive, got 0"),
        (dict(size=8.0, object_box=(0, 0, 1, 1)), TypeError, r"size must be an int, got float"),
        (
            dict(size=8, object_box=(0, 0, 1)),
            ValueError,
            r"object_box must have 4 entries .* got 3",
        ),
        (dict(size=8, object_box=5), TypeError, r"object_box must be a sequence .* got int"),
        (
            dict(size=8, object_box=(0, 0, 1.5, 2)),
            TypeError,
            r"object_box bottom must be an int, got float",
        ),
        (
            dict(size=8, object_box=(2, 0, 2, 4)),
            ValueError,
            r"0 <= top < bottom <= size .* size=8",
        ),
        (dict(size=8, object_box=(0, 0, 4, 9)), ValueError, r"\(0, 0, 4, 9\) must satisfy"),
        (dict(size=8, object_box=(-1, 0, 4, 4)), ValueError, r"must satisfy"),
        (
            dict(size=8, object_box=(0, 0, 4, 4), seed=1.5),
            TypeError,
            r"seed must be an int, got float",
        ),
        (
            dict(size=8, object_box=(0, 0, 4, 4), seed=-1),
            ValueError,
            r"seed must be non-negative, got -1",
        ),
        (
            dict(size=8, object_box=(0, 0, 4, 4), noise=-0.1),
            ValueError,
            r"noise must be a finite number >= 0",
        ),
        (
            dict(size=8, object_box=(0, 0, 4, 4), noise="a"),
            TypeError,
            r"noise must be a number, got str",
        ),
    ],
)
def test_synthetic_image_bad_inputs(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        synthetic_image(**kwargs)


# --- patchify ------------------------------------------------------------------------


def test_patchify_shape_order_and_contents():
    image = np.arange(4 * 6 * 3, dtype=float).reshape(4, 6, 3)  # (H, W, C)
    patches = patchify(image, 2)
    assert patches.shape == (2 * 3, 2 * 2 * 3)
    # Patch k is block (k // 3, k % 3), flattened in (row, column, channel) order.
    for k in range(6):
        row, col = divmod(k, 3)
        block = image[2 * row : 2 * row + 2, 2 * col : 2 * col + 2]
        np.testing.assert_array_equal(patches[k], block.reshape(-1))


def test_patchify_grayscale_and_whole_image_patch():
    gray = np.arange(16, dtype=float).reshape(4, 4)
    assert patchify(gray, 2).shape == (4, 4)
    np.testing.assert_array_equal(patchify(gray, 4), gray.reshape(1, 16))
    np.testing.assert_array_equal(patchify(gray, 1), gray.reshape(16, 1))


def test_patchify_keeps_every_pixel_once():
    image, _ = synthetic_image(12, (0, 0, 6, 6), seed=1)
    patches = patchify(image, 3)
    assert patches.shape == (16, 27)
    np.testing.assert_allclose(np.sort(patches.ravel()), np.sort(image.ravel()))


@pytest.mark.parametrize(
    "image,patch_size,error,pattern",
    [
        (
            np.zeros((6, 8, 3)),
            4,
            ValueError,
            r"patch_size=4 must divide .* got image shape \(6, 8, 3\)",
        ),
        (np.zeros((8, 6)), 4, ValueError, r"got image shape \(8, 6\)"),
        (np.zeros((8, 8, 3)), 0, ValueError, r"patch_size must be positive, got 0"),
        (np.zeros((8, 8, 3)), 2.0, TypeError, r"patch_size must be an int, got float"),
        (np.zeros(8), 2, ValueError, r"image must have shape \(H, W, C\) or \(H, W\), got \(8,\)"),
        (np.zeros((2, 8, 8, 3)), 2, ValueError, r"got \(2, 8, 8, 3\)"),
        (
            np.zeros((8, 8), dtype=bool),
            2,
            TypeError,
            r"image must hold real numbers, got dtype bool",
        ),
        (np.full((4, 4), np.nan), 2, ValueError, r"image contains NaN"),
    ],
)
def test_patchify_bad_inputs(image, patch_size, error, pattern):
    with pytest.raises(error, match=pattern):
        patchify(image, patch_size)
