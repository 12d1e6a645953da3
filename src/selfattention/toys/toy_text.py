"""A tiny fixed vocabulary and toy embeddings for the book's example sentences.

Chapter 5 introduces "Hi, how are you?" and chapters 6 to 8 and 10 reuse it;
chapter 8 batches it with the answer "I am fine", and chapter 10 lets the two
sentences attend to each other. Chapter 5 also uses "The animal didn't
cross the street because it was too tired." Every word of these sentences is
in ``VOCABULARY``; anything else is rejected with a ``ValueError`` naming it.

The pipeline is ``tokenize`` (text to tokens), ``token_ids`` (tokens to
rows of the table), ``toy_embeddings`` (a lookup in a fixed, seeded table)
and ``position_aware_embeddings`` (the lookup plus the sinusoidal encoding).
``running_example`` adds the four fixed projections that chapters 5 to 8
carry from the scores ``Q K^T`` to the output. Everything is deterministic:
the same text, ``d_model`` and ``seed`` always give the same numbers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._checks import check_positive_int
from ..handmath.positional import sinusoidal_positional_encoding

#: The padding token; its embedding is the zero vector.
PAD = "<pad>"

#: The whole toy vocabulary in id order (id ``i`` is ``VOCABULARY[i]``). Id 0 is
#: the padding token ``"<pad>"``, whose embedding is zero; then the words of "Hi,
#: how are you?", "I am fine" and "The animal didn't cross the street because it
#: was too tired."; then the punctuation marks.
VOCABULARY: tuple[str, ...] = (
    PAD,
    # "Hi, how are you?" and "I am fine"
    "hi",
    "how",
    "are",
    "you",
    "i",
    "am",
    "fine",
    # "The animal didn't cross the street because it was too tired."
    "the",
    "animal",
    "didn't",
    "cross",
    "street",
    "because",
    "it",
    "was",
    "too",
    "tired",
    # punctuation
    ",",
    ".",
    "?",
    "!",
)

_ID = {token: index for index, token in enumerate(VOCABULARY)}
# Lower-case words (letters and apostrophes), or any other single visible character.
_TOKEN_PATTERN = re.compile(r"[a-z']+|[^\sa-z']")


def _unknown(token: str) -> ValueError:
    words = " ".join(VOCABULARY)
    return ValueError(f"unknown token {token!r}; the toy vocabulary is: {words}")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lower-case words and punctuation marks.

    Parameters
    ----------
    text : str
        A sentence made of words in ``VOCABULARY``.

    Returns
    -------
    list of str
        The tokens, in order.

    Raises
    ------
    TypeError
        If ``text`` is not a str.
    ValueError
        If ``text`` holds no token, or a token that is not in ``VOCABULARY``
        (the message names the first one).

    Examples
    --------
    >>> from selfattention import tokenize
    >>> tokenize("Hi, how are you?")
    ['hi', ',', 'how', 'are', 'you', '?']
    >>> tokenize("Hello there")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: unknown token 'hello'; the toy vocabulary is: <pad> hi how ...
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    tokens = _TOKEN_PATTERN.findall(text.lower())
    if not tokens:
        raise ValueError(f"text has no tokens, got {text!r}")
    for token in tokens:
        if token not in _ID:
            raise _unknown(token)
    return tokens


def _check_tokens(tokens: Any) -> list[str]:
    if isinstance(tokens, str):
        raise TypeError(
            f"tokens must be a list of str, got the str {tokens!r}; call tokenize(text) first"
        )
    try:
        tokens = list(tokens)
    except TypeError:
        raise TypeError(f"tokens must be a list of str, got {type(tokens).__name__}") from None
    if not tokens:
        raise ValueError("tokens is empty; a sequence needs at least one token")
    for index, token in enumerate(tokens):
        if not isinstance(token, str):
            raise TypeError(f"tokens[{index}] must be a str, got {type(token).__name__}")
        if token not in _ID:
            raise _unknown(token)
    return tokens


def token_ids(tokens: Sequence[str]) -> np.ndarray:
    """The row of every token in the embedding table (its index in ``VOCABULARY``).

    Parameters
    ----------
    tokens : sequence of str
        ``T >= 1`` tokens, e.g. from :func:`selfattention.tokenize`.

    Returns
    -------
    numpy.ndarray, shape ``(T,)``
        The ids, dtype int64.

    Raises
    ------
    TypeError
        If ``tokens`` is a single str (call ``tokenize`` first) or holds a
        non-str.
    ValueError
        If ``tokens`` is empty or holds a token not in ``VOCABULARY``.

    Examples
    --------
    >>> from selfattention import VOCABULARY, token_ids
    >>> token_ids(["hi", "you"]).tolist()
    [1, 4]
    >>> VOCABULARY[4]
    'you'
    """
    tokens = _check_tokens(tokens)
    return np.array([_ID[token] for token in tokens], dtype=np.int64)


def embedding_table(d_model: int = 4, seed: int = 0) -> np.ndarray:
    """The fixed toy embedding table, one row per token of ``VOCABULARY``.

    Entries are standard normal draws from ``np.random.default_rng(seed)``,
    rounded to one decimal so that a reader can check products by hand. The
    row of ``PAD`` (id 0) is zero.

    Parameters
    ----------
    d_model : int, default 4
        Width of each embedding; positive.
    seed : int, default 0
        Seed of the draws; at least 0.

    Returns
    -------
    numpy.ndarray, shape ``(len(VOCABULARY), d_model)``
        The table, float64.

    Raises
    ------
    TypeError
        If ``d_model`` or ``seed`` is not an int.
    ValueError
        If ``d_model`` is not positive or ``seed`` is negative.

    Examples
    --------
    >>> from selfattention import embedding_table
    >>> table = embedding_table(d_model=4)
    >>> table.shape
    (22, 4)
    >>> table[:2].tolist()  # <pad>, then "hi"
    [[0.0, 0.0, 0.0, 0.0], [-0.5, 0.4, 1.3, 0.9]]
    """
    d_model = check_positive_int(d_model, "d_model")
    seed = check_positive_int(seed, "seed", allow_zero=True)
    rng = np.random.default_rng(seed)
    table = np.round(rng.normal(size=(len(VOCABULARY), d_model)), 1)  # (V, d_model)
    table[_ID[PAD]] = 0.0
    return table + 0.0  # turns any -0.0 into 0.0, so printed tables show no "-0."


def toy_embeddings(tokens: Sequence[str], d_model: int = 4, seed: int = 0) -> np.ndarray:
    """Look the tokens up in ``embedding_table(d_model, seed)``.

    The embedding of a token does not depend on its position: the same word
    gets the same row wherever it appears.

    Parameters
    ----------
    tokens : sequence of str
        ``T >= 1`` tokens from ``VOCABULARY``.
    d_model : int, default 4
        Width of each embedding; positive.
    seed : int, default 0
        Seed of the table; at least 0.

    Returns
    -------
    numpy.ndarray, shape ``(T, d_model)``
        One embedding per token.

    Raises
    ------
    TypeError
        As :func:`selfattention.token_ids` and :func:`selfattention.embedding_table`.
    ValueError
        As :func:`selfattention.token_ids` and :func:`selfattention.embedding_table`.

    Examples
    --------
    >>> from selfattention import tokenize, toy_embeddings
    >>> toy_embeddings(tokenize("hi how")).tolist()
    [[-0.5, 0.4, 1.3, 0.9], [-0.7, -1.3, -0.6, 0.0]]
    """
    ids = token_ids(tokens)  # (T,)
    return embedding_table(d_model, seed)[ids]  # (T, d_model)


def position_aware_embeddings(
    tokens: Sequence[str], d_model: int = 4, seed: int = 0
) -> np.ndarray:
    """``toy_embeddings`` plus the sinusoidal positional encoding.

    Parameters
    ----------
    tokens : sequence of str
        ``T >= 1`` tokens from ``VOCABULARY``.
    d_model : int, default 4
        Width of each embedding; positive and even (the encoding comes in
        sine/cosine pairs).
    seed : int, default 0
        Seed of the table; at least 0.

    Returns
    -------
    numpy.ndarray, shape ``(T, d_model)``
        ``toy_embeddings(tokens, d_model, seed)`` plus
        ``sinusoidal_positional_encoding(T, d_model)``.

    Raises
    ------
    TypeError
        As :func:`selfattention.toy_embeddings`.
    ValueError
        As :func:`selfattention.toy_embeddings`, or if ``d_model`` is odd.

    Examples
    --------
    >>> from selfattention import position_aware_embeddings, tokenize
    >>> position_aware_embeddings(tokenize("hi how")).round(3).tolist()
    [[-0.5, 1.4, 1.3, 1.9], [0.141, -0.76, -0.59, 1.0]]
    """
    embeddings = toy_embeddings(tokens, d_model, seed)  # (T, d_model)
    return embeddings + sinusoidal_positional_encoding(len(embeddings), d_model)  # (T, d_model)


# The seed of the running example's weights: with it the query "you" scores
# the key "hi" highest, a pattern the chapters can follow from score to output.
_RUNNING_SEED = 3
_RUNNING_SENTENCE = "Hi, how are you?"
_RUNNING_SIZES = {"d_model": 4, "d_k": 3, "d_v": 2}


@dataclass(frozen=True, eq=False)
class RunningExample:
    """The numbers that chapters 5 to 8 carry from ``Q K^T`` to the output.

    Build it with :func:`selfattention.toys.toy_text.running_example`. The
    matrices act on row vectors, as everywhere in the book: ``Q = X W_Q``.
    The sizes are four different numbers, ``T = 6``, ``d_model = 4``,
    ``d_k = 3`` and ``d_v = 2``, so that a product of two wrong axes fails.

    Attributes
    ----------
    sentence : str
        ``"Hi, how are you?"``.
    tokens : tuple of str
        Its ``T = 6`` tokens, ``('hi', ',', 'how', 'are', 'you', '?')``.
    X : numpy.ndarray, shape ``(T, d_model) = (6, 4)``
        The position-aware embeddings,
        ``position_aware_embeddings(tokens, d_model=4)``.
    W_Q : numpy.ndarray, shape ``(d_model, d_k) = (4, 3)``
        The query projection.
    W_K : numpy.ndarray, shape ``(d_model, d_k) = (4, 3)``
        The key projection.
    W_V : numpy.ndarray, shape ``(d_model, d_v) = (4, 2)``
        The value projection.
    W_O : numpy.ndarray, shape ``(d_v, d_model) = (2, 4)``
        The output projection.

    Examples
    --------
    >>> from selfattention.toys.toy_text import running_example
    >>> example = running_example()
    >>> example.T, example.d_model, example.d_k, example.d_v
    (6, 4, 3, 2)
    >>> example.W_O.shape  # (d_v, d_model)
    (2, 4)
    """

    sentence: str
    tokens: tuple[str, ...]
    X: np.ndarray
    W_Q: np.ndarray
    W_K: np.ndarray
    W_V: np.ndarray
    W_O: np.ndarray

    @property
    def T(self) -> int:
        """The number of tokens, 6."""
        return len(self.tokens)

    @property
    def d_model(self) -> int:
        """The width of an embedding, 4."""
        return int(self.X.shape[1])

    @property
    def d_k(self) -> int:
        """The size of a query and of a key, 3."""
        return int(self.W_Q.shape[1])

    @property
    def d_v(self) -> int:
        """The size of a value, 2."""
        return int(self.W_V.shape[1])


def running_example() -> RunningExample:
    """The running example of chapters 5 to 8: "Hi, how are you?" and its projections.

    ``X`` is ``position_aware_embeddings(tokenize("Hi, how are you?"),
    d_model=4)``, as chapter 5 builds it. The four weight matrices stand for
    the projections of an untrained model: normal draws with standard
    deviation ``1 / sqrt(d_model) = 0.5`` from ``np.random.default_rng(3)``,
    drawn in the order ``W_Q``, ``W_K``, ``W_V``, ``W_O`` and rounded to one
    decimal so that products can be checked by hand. There are no biases.
    0.5 is one over the square root of the fan-in for ``W_Q``, ``W_K`` and
    ``W_V``; ``W_O`` (fan-in ``d_v = 2``) gets it too, for simplicity. The
    seed 3 was chosen so that the query "you" scores the key "hi" highest.

    Every call builds new arrays, so a notebook that changes one changes
    nothing elsewhere, and every call gives the same numbers.

    Returns
    -------
    RunningExample
        The sentence, its tokens, ``X`` ``(6, 4)``, ``W_Q`` and ``W_K``
        ``(4, 3)``, ``W_V`` ``(4, 2)`` and ``W_O`` ``(2, 4)``, all float64.

    Examples
    --------
    >>> from selfattention.toys.toy_text import running_example
    >>> example = running_example()
    >>> example.tokens
    ('hi', ',', 'how', 'are', 'you', '?')
    >>> example.W_Q.tolist()  # (d_model, d_k)
    [[1.0, -1.3, 0.2], [-0.3, -0.2, -0.1], [-1.0, -0.1, -0.4], [1.7, 0.1, -0.2]]
    >>> Q = example.X @ example.W_Q  # (T, d_k)
    >>> K = example.X @ example.W_K  # (T, d_k)
    >>> S = Q @ K.T                  # (T, T), the raw scores
    >>> round(float(S[4, 0]), 3)     # query "you" (row 4), key "hi" (column 0)
    5.916
    """
    tokens = tuple(tokenize(_RUNNING_SENTENCE))
    d_model, d_k, d_v = (_RUNNING_SIZES[name] for name in ("d_model", "d_k", "d_v"))
    rng = np.random.default_rng(_RUNNING_SEED)
    scale = 1.0 / np.sqrt(d_model)
    weights = [
        np.round(rng.normal(scale=scale, size=shape), 1) + 0.0  # + 0.0 turns -0.0 into 0.0
        for shape in ((d_model, d_k), (d_model, d_k), (d_model, d_v), (d_v, d_model))
    ]
    return RunningExample(
        _RUNNING_SENTENCE,
        tokens,
        position_aware_embeddings(tokens, d_model=d_model),  # (T, d_model)
        *weights,
    )
