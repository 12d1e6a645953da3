"""One call at the top of every chapter: the same print options and figure style everywhere."""

from __future__ import annotations

from typing import Any

import numpy as np

from .shell import running_shell


def setup(precision: int = 3) -> None:
    """Round printed arrays and tensors to ``precision`` digits and set the figure style.

    Rounded printing keeps stored notebook outputs identical across machines,
    whose last floating-point digits can differ. Seeds are not set here: each
    chapter seeds its own generators where the reader can see it.

    Figures are laid out at 100 dpi (a 6.7 in wide figure fills the site's
    670 px text column) and, inside a notebook, stored as "retina" PNGs: twice
    the pixels, with the logical size (figsize times 100) in the output's
    metadata, so the site and JupyterLab show them at that size, sharp on
    high-density screens. The same metadata records the figure's smallest
    font size in points (``"selfattention": {"min_font_pt": ...}``), from which
    the browser tests work out how large its text is on a phone. Outside
    IPython the inline backend is left alone.

    Inside IPython it also registers the ``%answer`` line magic that the
    exercise solutions start with (``selfattention.book.answer``).

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
    from .answer import register

    register()


def _retina_figures() -> None:
    """Have the inline backend store figures at 2x pixels with their 1x size as metadata,
    and each figure's smallest font size beside it."""
    shell = running_shell()
    if shell is None:
        return
    from matplotlib.figure import Figure
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats("retina")  # replaces any earlier figure formatter
    formatter = shell.display_formatter.formatters["image/png"]
    retina = formatter.lookup_by_type(Figure)

    def retina_with_font_size(figure: Figure) -> Any:
        result = retina(figure)
        if not isinstance(result, tuple):  # None for an empty figure
            return result
        data, metadata = result
        smallest = _smallest_font_pt(figure)
        if smallest is not None:
            # 9, not 9.0: as JupyterLab writes the number when it saves, so that
            # saving an untouched notebook changes nothing.
            smallest = int(smallest) if smallest == int(smallest) else smallest
            metadata = {**metadata, "selfattention": {"min_font_pt": smallest}}
        return data, metadata

    formatter.for_type(Figure, retina_with_font_size)


def _smallest_font_pt(figure: Any) -> float | None:
    """The smallest font size, in points, of any text ``figure`` draws.

    Every visible, non-empty text counts: titles, axis labels, tick labels,
    legends, colour bars, annotations and the values written in heatmap
    cells. The figure is drawn first, so that tick labels exist. Returns
    None for a figure without text.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> figure, ax = plt.subplots()
    >>> ax.plot([0, 1], [0, 1])  # doctest: +ELLIPSIS
    [<matplotlib.lines.Line2D object at ...>]
    >>> ax.set_xlabel("key", fontsize=12)  # doctest: +ELLIPSIS
    Text(...)
    >>> ax.tick_params(labelsize=8)
    >>> _smallest_font_pt(figure)
    8.0
    >>> plt.close(figure)
    """
    from matplotlib.text import Text

    figure.canvas.draw()
    sizes = [
        float(text.get_fontsize())
        for text in figure.findobj(Text)
        if text.get_visible()
        and text.get_text().strip()
        and (text.axes is None or text.axes.get_visible())
    ]
    return round(min(sizes), 2) if sizes else None
