"""The website's interactive figures: the numbers each one draws, from its notebook.

An interactive figure is one notebook output, made by :func:`interactive_figure`
in the cell after the static figure it belongs to. The output is an HTML element
that stays hidden and carries the figure's data as JSON: numbers the chapter
computed with this package. On the website the book's script
(``_static/interactive.js``) finds the element, draws the figure from those
numbers, and shows it below the static one. Without JavaScript, in JupyterLab
(which has not got the site's script, and runs no script of an untrusted
notebook) and in the PDF, the element stays hidden and the static figure is all
there is. Before the element the output has one line, the same on every
chapter (:data:`NOTE` and the figure's title), saying that the live figure is
on the book's website: JupyterLab shows it where the cell would otherwise look
empty, and the site's stylesheet hides it.

nbval compares the stored HTML like any other output, so the JSON comes out
byte for byte the same on every machine: floats are rounded to ``digits``
decimals (``round(x, digits)``, written with Python's shortest repr, which
JavaScript's ``JSON.parse`` reads back as the same double), and lines are
broken at commas to stay within the 79 characters of the site's code column.
"""

from __future__ import annotations

import copy
import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .._checks import check_int, describe

#: The figures the site's script can draw, one renderer each.
KINDS = ("softmax", "heads", "masks", "classifier")

_NAME = re.compile(r"^fig-[a-z0-9]+(-[a-z0-9]+)*$")
#: The first words of the line JupyterLab shows in place of an interactive figure.
NOTE = "The live figure is on the book's website:"
#: The longest line the stored HTML may have (the site's code column).
LINE_WIDTH = 79
#: The longest string the data may hold, as JSON writes it (quotes and escapes
#: included): a token, a label or a short title; with what follows it on its
#: line, it stays within LINE_WIDTH.
MAX_STRING = 66


def to_plain(value: Any, digits: int = 10, name: str = "data") -> Any:
    """``value`` as plain JSON data: dicts, lists, str, bool, int and rounded floats.

    numpy arrays and torch tensors become nested lists; numpy scalars become
    Python numbers; floats are rounded to ``digits`` decimals, with ``-0.0``
    written as ``0.0`` (its sign may differ between machines).

    Parameters
    ----------
    value : Any
        A mapping with str keys, a sequence, an array or tensor, a string, a
        bool, an int, a float or None, nested in any way.
    digits : int, default 10
        Decimals kept of every float (0 to 17).
    name : str, default "data"
        What to call ``value`` in error messages.

    Returns
    -------
    Any
        The same structure, built only of types ``json`` writes exactly.

    Raises
    ------
    TypeError
        If a key is not a str, or a value is of another type.
    ValueError
        If a float is NaN or infinite, or ``digits`` is outside 0 to 17.

    Examples
    --------
    >>> import numpy as np
    >>> to_plain({"w": np.array([1 / 3, -1e-12]), "keep": np.array([True, False])}, digits=4)
    {'w': [0.3333, 0.0], 'keep': [True, False]}
    """
    digits = check_int(digits, "digits")
    if not 0 <= digits <= 17:
        raise ValueError(f"digits must lie in 0 to 17, got {digits}")
    return _plain(value, digits, name)


def _plain(value: Any, digits: int, name: str) -> Any:
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"{name} holds {number}: only finite numbers can be stored")
        return round(number, digits) + 0.0  # + 0.0 turns -0.0 into 0.0
    if isinstance(value, Mapping):
        plain = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{name} has a key {key!r} of type {type(key).__name__}: use str")
            plain[key] = _plain(item, digits, f"{name}[{key!r}]")
        return plain
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"{name} is an array of {value.dtype}: use bool, int or float")
        return _plain(value.tolist(), digits, name)
    if isinstance(value, Sequence):
        return [_plain(item, digits, f"{name}[{index}]") for index, item in enumerate(value)]
    raise TypeError(f"{name} is {describe(value)}: use dicts, lists, arrays, str or numbers")


def _wrap(text: str, width: int = LINE_WIDTH) -> str:
    """Break compact JSON into lines of at most ``width`` characters.

    Lines break after a ``,``, ``[``, ``{`` or ``:`` outside strings, where JSON
    allows whitespace; the pieces between are packed greedily. A piece longer
    than ``width`` (a long string) gets a line of its own.
    """
    pieces, piece, in_string, escaped = [], [], False, False
    for char in text:
        piece.append(char)
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in ",[{:":
            pieces.append("".join(piece))
            piece = []
    pieces.append("".join(piece))
    lines, line = [], ""
    for piece in pieces:
        if line and len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        line += piece
    lines.append(line)
    return "\n".join(lines)


def _check_strings(value: Any, name: str) -> None:
    if isinstance(value, str):
        written = len(json.dumps(value, ensure_ascii=True))
        if written > MAX_STRING:
            raise ValueError(
                f"{name} is a string that JSON writes in {written} characters; at most "
                f"{MAX_STRING} fit one line of the stored output: {value[:40]!r}..."
            )
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_strings(item, f"{name}[{key!r}]")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_strings(item, f"{name}[{index}]")


@dataclass(frozen=True)
class InteractiveFigure:
    """One interactive figure as a notebook output: hidden HTML with its data as JSON.

    Made by :func:`interactive_figure`; a notebook shows it by ending a cell
    with it (Jupyter calls ``_repr_html_`` for the HTML and ``repr`` for the
    plain-text twin).

    Examples
    --------
    >>> from selfattention.book.interactive import interactive_figure
    >>> figure = interactive_figure("softmax", {"scores": [0.5, 2.0]}, figure="fig-x")
    >>> figure.kind, figure.figure, figure.data
    ('softmax', 'fig-x', {'scores': [0.5, 2.0]})
    """

    kind: str
    figure: str
    data: dict

    @property
    def json(self) -> str:
        """The data as JSON, safe inside a ``<script>`` element, lines of at most 79 characters

        Examples
        --------
        >>> from selfattention.book.interactive import interactive_figure
        >>> interactive_figure("softmax", {"key": "</script>"}, figure="fig-x").json
        '{"key":"\\\\u003c/script\\\\u003e"}'
        """
        text = json.dumps(self.data, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
        # "<", ">" and "&" only occur inside JSON strings, where \\u escapes mean the same.
        for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
            text = text.replace(char, escape)
        return _wrap(text)

    @property
    def note(self) -> str:
        """The line a reader sees where the site's script does not run (JupyterLab).

        The same words on every chapter: the live figure is on the book's
        website, and what it shows (the figure's ``title``, if the data has one).

        Examples
        --------
        >>> from selfattention.book.interactive import interactive_figure
        >>> interactive_figure("softmax", {"title": "A sweep"}, figure="fig-x").note
        "The live figure is on the book's website:\\nA sweep."
        """
        title = self.data.get("title")
        what = title if isinstance(title, str) and title else "the figure above, live"
        return f"{NOTE}\n{what}."

    def _repr_html_(self) -> str:
        # The note shows where the site's stylesheet is absent (JupyterLab); on
        # the site interactive.css hides it and the script draws the figure.
        note = html.escape(self.note, quote=False)
        return (
            f'<p class="sa-elsewhere">{note}</p>\n'
            f'<div class="sa-interactive" hidden\n     data-kind="{self.kind}"'
            f' data-figure="{self.figure}">\n'
            f'<script type="application/json">\n{self.json}\n</script>\n</div>'
        )

    def __repr__(self) -> str:
        return self.note


def interactive_figure(
    kind: str, data: Mapping[str, Any], figure: str, digits: int = 10
) -> InteractiveFigure:
    """The interactive version of a chapter's figure ``figure``, drawn from ``data``.

    End a notebook cell with the result: the website's script draws the figure
    below the static figure named ``figure``; everywhere else the output stays
    hidden.

    Parameters
    ----------
    kind : str
        Which of the site's renderers draws it: one of :data:`KINDS`.
    data : Mapping[str, Any]
        What the renderer needs (see ``_static/interactive.js`` for each kind),
        as :func:`to_plain` accepts it. Strings are at most 64 characters
        (66 as JSON writes them, quotes included); split longer text into
        a list of strings.
    figure : str
        The name of the static figure it accompanies, such as
        ``"fig-search-temperature"`` (the cell metadata's ``mystnb.figure.name``).
    digits : int, default 10
        Decimals kept of every float.

    Returns
    -------
    InteractiveFigure
        The output: ``_repr_html_`` gives the hidden element with its JSON.

    Raises
    ------
    TypeError
        If ``kind`` or ``figure`` is not a str, ``data`` is not a mapping, or
        holds a type :func:`to_plain` refuses.
    ValueError
        If ``kind`` is not one of :data:`KINDS`, ``figure`` is not a figure
        name (``fig-`` and lower-case words joined by hyphens), a float in
        ``data`` is not finite, or a string is too long.

    Examples
    --------
    >>> from selfattention.book.interactive import interactive_figure
    >>> figure = interactive_figure(
    ...     "softmax", {"keys": ["a", "b"], "scores": [1 / 3, 2.0]},
    ...     figure="fig-demo", digits=3)
    >>> print(figure._repr_html_())
    <p class="sa-elsewhere">The live figure is on the book's website:
    the figure above, live.</p>
    <div class="sa-interactive" hidden
         data-kind="softmax" data-figure="fig-demo">
    <script type="application/json">
    {"keys":["a","b"],"scores":[0.333,2.0]}
    </script>
    </div>

    Long data is broken into lines that fit the site's 79-character code column:

    >>> import numpy as np
    >>> html = interactive_figure("heads", {"weights": np.full((8, 8), 1 / 3)},
    ...                           figure="fig-demo")._repr_html_()
    >>> len(html), max(len(line) for line in html.splitlines())
    (1098, 79)

    Bad input is refused by name:

    >>> interactive_figure("bars", {}, figure="fig-demo")
    Traceback (most recent call last):
        ...
    ValueError: kind must be one of ('softmax', 'heads', 'masks', 'classifier'), got 'bars'
    >>> interactive_figure("softmax", {"scores": [1.0, float("nan")]}, figure="fig-demo")
    Traceback (most recent call last):
        ...
    ValueError: data['scores'][1] holds nan: only finite numbers can be stored
    """
    for value, argument in ((kind, "kind"), (figure, "figure")):
        if not isinstance(value, str):
            raise TypeError(f"{argument} must be a str, got {describe(value)}")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if not _NAME.match(figure):
        raise ValueError(
            f"figure must be a figure name like 'fig-search-temperature', got {figure!r}"
        )
    if not isinstance(data, Mapping):
        raise TypeError(f"data must be a mapping, got {describe(data)}")
    plain = to_plain(data, digits, "data")
    _check_strings(plain, "data")
    return InteractiveFigure(kind=kind, figure=figure, data=plain)


def classifier_data(
    model: Any,
    lines: Sequence[Any],
    vocabulary: Any = None,
    classes: Sequence[str] | None = None,
    digits: int = 6,
) -> dict:
    """A trained ``AttentionClassifier`` for the browser: rounded weights, and its answers.

    The site's ``classifier`` figure runs the model's forward pass in the
    browser from these weights: embedding, positions, one multi-head attention
    layer, masked mean pooling, the linear layer and a softmax. So that the
    browser's numbers can be compared with PyTorch's, every weight (and the
    positional table) is rounded to ``digits`` decimals, and a float64 copy of
    the model holding exactly those rounded weights classifies each of
    ``lines``. Its probabilities and pooled attention ``a_j`` (the mean over
    the heads and queries of ``A_ij``, see
    :func:`selfattention.toys.models.pooled_attention`) are the ``checks``
    the browser must reproduce.

    Parameters
    ----------
    model : AttentionClassifier
        The trained model (any dtype); it is not changed.
    lines : sequence of Line, or of word sequences
        The lines to classify for the checks; a ``Line`` also gives its label.
    vocabulary : Vocabulary, optional
        Words to ids; ``SERIES_VOCABULARY`` by default.
    classes : sequence of str, optional
        The class names, in label order; ``SERIES`` by default.
    digits : int, default 6
        Decimals kept of every weight.

    Returns
    -------
    dict
        ``vocabulary`` (the tokens in id order, padding first), ``classes``,
        ``d_model``, ``num_heads``, ``positional``, ``max_len``, ``weights``
        (``embedding``, ``positions``, ``q_weight`` ... ``o_bias`` as
        ``nn.Linear`` stores them, ``(out, in)``, and ``classifier_weight``,
        ``classifier_bias``), and ``checks``: one dict per line with its
        ``words``, ``label`` (None for a plain word list), ``probabilities``
        and ``attention``.

    Raises
    ------
    TypeError
        If ``model`` is not an ``AttentionClassifier``.
    ValueError
        If its attention layer uses rotary positions, a window or shared
        key/value heads (the browser's forward pass has none of them), the
        class names do not match its outputs, or a line is longer than
        ``max_len`` or has a word outside the vocabulary.

    Examples
    --------
    >>> import torch
    >>> from selfattention import AttentionClassifier
    >>> from selfattention.book.interactive import classifier_data
    >>> _ = torch.manual_seed(0)
    >>> model = AttentionClassifier(vocab_size=67, num_classes=3, d_model=8)
    >>> data = classifier_data(model, [["a", "lannister"], ["jedi", "the", "night"]])
    >>> data["d_model"], len(data["vocabulary"]), data["classes"][1]
    (8, 67, 'Star Wars')
    >>> check = data["checks"][1]
    >>> check["words"], len(check["probabilities"]), len(check["attention"])
    (['jedi', 'the', 'night'], 3, 3)
    >>> round(sum(check["probabilities"]), 12), round(sum(check["attention"]), 12)
    (1.0, 1.0)
    >>> data["weights"]["q_weight"][0][:2]  # rounded to 6 decimals
    [0.348386, -0.22369]
    >>> classifier_data(model, [["a", "hello"]])
    Traceback (most recent call last):
        ...
    ValueError: lines[0]: unknown word 'hello'
    >>> classifier_data(torch.nn.Linear(2, 2), [["a"]])
    Traceback (most recent call last):
        ...
    TypeError: model must be an AttentionClassifier, got Linear
    """
    from ..toys.data import SERIES, SERIES_VOCABULARY, Line, Vocabulary, make_batch
    from ..toys.models import AttentionClassifier, pooled_attention

    if not isinstance(model, AttentionClassifier):
        raise TypeError(f"model must be an AttentionClassifier, got {describe(model)}")
    vocabulary = SERIES_VOCABULARY if vocabulary is None else vocabulary
    if not isinstance(vocabulary, Vocabulary):
        raise TypeError(f"vocabulary must be a Vocabulary, got {describe(vocabulary)}")
    classes = list(SERIES if classes is None else classes)
    if len(classes) != model.num_classes or not all(isinstance(c, str) for c in classes):
        raise ValueError(
            f"classes must be {model.num_classes} names, one per output, got {classes!r}"
        )
    attention = model.attention
    if getattr(attention, "rope", False) or getattr(attention, "window", None) is not None:
        raise ValueError("the browser's forward pass has no rotary positions and no window")
    if attention.num_kv_heads != attention.num_heads:
        raise ValueError(
            f"the browser's forward pass needs num_kv_heads = num_heads, got "
            f"{attention.num_kv_heads} and {attention.num_heads}"
        )
    digits = check_int(digits, "digits")
    if not 0 <= digits <= 17:
        raise ValueError(f"digits must lie in 0 to 17, got {digits}")

    # The copy that holds exactly the exported numbers: Python's round, as to_plain writes.
    rounded = copy.deepcopy(model).to(torch.float64).eval()
    layer = rounded.attention
    named = {
        "embedding": rounded.embedding.weight,
        "positions": rounded.positions,
        "q_weight": layer.q_proj.weight,
        "q_bias": layer.q_proj.bias,
        "k_weight": layer.k_proj.weight,
        "k_bias": layer.k_proj.bias,
        "v_weight": layer.v_proj.weight,
        "v_bias": layer.v_proj.bias,
        "o_weight": layer.out_proj.weight,
        "o_bias": layer.out_proj.bias,
        "classifier_weight": rounded.classifier.weight,
        "classifier_bias": rounded.classifier.bias,
    }
    weights = {}
    with torch.no_grad():
        for name, tensor in named.items():
            weights[name] = to_plain(tensor, digits, name)
            tensor.copy_(torch.tensor(weights[name], dtype=torch.float64))

    checks = []
    for number, line in enumerate(lines):
        words = list(line.words if isinstance(line, Line) else line)
        if len(words) > rounded.max_len:
            raise ValueError(
                f"lines[{number}] has {len(words)} words, more than max_len={rounded.max_len}"
            )
        try:
            batch = make_batch([words], vocabulary)  # one line: no padding
        except ValueError as error:
            raise ValueError(f"lines[{number}]: {error}") from None
        with torch.no_grad():
            logits, attention_weights = rounded(batch.ids, batch.mask)
        checks.append(
            {
                "words": words,
                "label": line.label if isinstance(line, Line) else None,
                "probabilities": logits.softmax(dim=-1)[0].tolist(),  # (num_classes,)
                "attention": pooled_attention(attention_weights, batch.mask)[0].tolist(),  # (T,)
            }
        )
    return {
        "vocabulary": list(vocabulary.tokens),
        "classes": classes,
        "d_model": int(rounded.embedding.weight.shape[1]),
        "num_heads": int(attention.num_heads),
        "positional": bool(rounded.positional),
        "max_len": int(rounded.max_len),
        "weights": weights,
        "checks": checks,
    }
