"""Figures shared by the chapters: one look for every attention heatmap."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: Perceptually uniform and readable with the common colour-vision deficiencies.
ATTENTION_CMAP = "viridis"
#: Matrices up to this many rows and columns get their values written in the cells.
ANNOTATE_MAX = 10
#: Font size in points of the values written in heatmap cells, the smallest
#: text of most heatmaps. At 10 pt it stays at least 7 px high on a 390 px
#: phone in figures up to about 770 px wide (tests/browser checks every figure).
ANNOTATION_FONTSIZE = 10


def plot_attention(
    weights: Any,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    ax: Any | None = None,
    annotate: bool | None = None,
    title: str | None = None,
    vmin: float | None = 0.0,
    vmax: float | None = None,
    colorbar: bool = True,
    fmt: str = ".2f",
    colorbar_label: str | None = None,
) -> Any:
    """Draw a ``(T_q, T_k)`` matrix as a heatmap: queries down, keys across.

    Labels go on both axes; values are written in the cells when the matrix is
    at most ``ANNOTATE_MAX`` on each side (or when ``annotate`` says so).
    ``vmin`` defaults to 0 (attention weights); pass ``None`` for raw scores.
    The colour bar is labelled ``colorbar_label``; by default "attention
    weight" when ``vmin`` is 0 and every value lies in [0, 1], else "score"
    (pass ``""`` for no label). Returns the matplotlib ``Axes``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> ax = plot_attention([[0.75, 0.25], [0.5, 0.5]], ["a", "b"], ["a", "b"])
    >>> ax.images[0].colorbar.ax.get_ylabel()
    'attention weight'
    """
    import matplotlib.pyplot as plt

    matrix = np.asarray(weights.detach().cpu() if hasattr(weights, "detach") else weights)
    if matrix.ndim != 2:
        raise ValueError(f"weights must be a 2-D (T_q, T_k) matrix, got shape {matrix.shape}")
    matrix = matrix.astype(np.float64)
    rows, cols = matrix.shape
    for name, labels, size in (
        ("query_labels", query_labels, rows),
        ("key_labels", key_labels, cols),
    ):
        if labels is not None and len(labels) != size:
            raise ValueError(
                f"{name} has {len(labels)} entries but weights has shape {matrix.shape}"
            )
    if ax is None:
        _, ax = plt.subplots(figsize=(0.6 * cols + 2.2, 0.5 * rows + 1.4))
    image = ax.imshow(matrix, cmap=ATTENTION_CMAP, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(cols), labels=list(key_labels) if key_labels is not None else range(cols))
    ax.set_yticks(
        range(rows), labels=list(query_labels) if query_labels is not None else range(rows)
    )
    ax.tick_params(axis="x", labelrotation=45 if key_labels is not None else 0)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title:
        ax.set_title(title)
    if annotate is None:
        annotate = rows <= ANNOTATE_MAX and cols <= ANNOTATE_MAX
    if annotate:
        low, high = image.get_clim()
        middle = (low + high) / 2
        for i in range(rows):
            for j in range(cols):
                # Dark text on the bright (yellow) end of viridis, light text elsewhere.
                colour = "black" if matrix[i, j] > middle else "white"
                ax.text(
                    j,
                    i,
                    format(matrix[i, j], fmt),
                    ha="center",
                    va="center",
                    color=colour,
                    fontsize=ANNOTATION_FONTSIZE,
                )
    if colorbar:
        if colorbar_label is None:
            weights_like = vmin == 0.0 and bool(np.all((matrix >= 0.0) & (matrix <= 1.0)))
            colorbar_label = "attention weight" if weights_like else "score"
        bar = ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        if colorbar_label:
            bar.set_label(colorbar_label)
    return ax
