"""One call at the top of every chapter: the same print options and figure style everywhere."""

from __future__ import annotations

import numpy as np


def setup(precision: int = 3) -> None:
    """Round printed arrays and tensors to ``precision`` digits and set the figure style.

    Rounded printing keeps stored notebook outputs identical across machines,
    whose last floating-point digits can differ. Seeds are not set here: each
    chapter seeds its own generators where the reader can see it.
    """
    import matplotlib as mpl
    import torch

    np.set_printoptions(precision=precision, suppress=True, linewidth=100)
    torch.set_printoptions(precision=precision, sci_mode=False, linewidth=100)
    mpl.rcParams.update(
        {
            "figure.dpi": 100,
            "figure.figsize": (6.4, 4.0),
            "savefig.bbox": "tight",
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": False,
            "font.size": 10,
            "image.cmap": "viridis",
        }
    )
