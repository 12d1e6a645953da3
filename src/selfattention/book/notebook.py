"""One call at the top of every chapter: the same print options and figure style everywhere."""

from __future__ import annotations

import numpy as np


def setup(precision: int = 3) -> None:
    """Round printed arrays and tensors to ``precision`` digits and set the figure style.

    Rounded printing keeps stored notebook outputs identical across machines,
    whose last floating-point digits can differ. Seeds are not set here: each
    chapter seeds its own generators where the reader can see it.

    Figures are laid out at 100 dpi (a 6.7 in wide figure fills the site's
    670 px text column) and, inside a notebook, stored as "retina" PNGs: twice
    the pixels, with the logical size (figsize times 100) in the output's
    metadata, so the site and JupyterLab show them at that size, sharp on
    high-density screens. Outside IPython the inline backend is left alone.

    Examples
    --------
    >>> import matplotlib as mpl
    >>> import numpy as np
    >>> import torch
    >>> saved = np.get_printoptions(), mpl.rcParams.copy()
    >>> setup()
    >>> np.get_printoptions()["precision"], mpl.rcParams["figure.dpi"]
    (3, 100.0)
    >>> np.set_printoptions(**saved[0]); mpl.rcParams.update(saved[1])
    >>> torch.set_printoptions(profile="default")
    """
    import matplotlib as mpl
    import torch

    np.set_printoptions(precision=precision, suppress=True, linewidth=79)
    torch.set_printoptions(precision=precision, sci_mode=False, linewidth=79)
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
    _retina_figures()


def _retina_figures() -> None:
    """Have the inline backend store figures at 2x pixels with their 1x size as metadata."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the notebook stack
        return
    if get_ipython() is None:
        return
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats("retina")
