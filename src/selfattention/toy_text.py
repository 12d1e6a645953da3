"""A tiny fixed vocabulary and toy embeddings for the book's example sentences.

Chapter 5 introduces "Hi, how are you?" and chapters 7, 8 and 10 reuse it;
chapter 8 batches it with the answer "I am fine", and chapter 10 lets the two
sentences attend to each other. Chapter 5 also uses "The animal didn't
cross the street because it was too tired." Every word of these sentences is
in ``VOCABULARY``; anything else is rejected with a ``ValueError`` naming it.

The pipeline is ``tokenize`` (text to tokens), ``token_ids`` (tokens to
rows of the table), ``toy_embeddings`` (a lookup in a fixed, seeded table)
and ``position_aware_embeddings`` (the lookup plus the sinusoidal encoding).
Everything is deterministic: the same text, ``d_model`` and ``seed`` always
give the same numbers.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from ._checks import check_positive_int
from .positional import sinusoidal_positional_encoding

#: The padding token; its embedding is the zero vector.
PAD = "<pad>"

#: The whole vocabulary, in id order: id ``i`` is ``VOCABULARY[i]``.
VOCABULARY: tuple[str, ...] = (
    PAD,
    # "Hi, how are you?" and "I am fine"
    "hi", "how", "are", "you", "i", "am", "fine",
    # "The animal didn't cross the street because it was too tired."
    "the", "animal", "didn't", "cross", "street", "because", "it", "was", "too", "tired",
    # punctuation
    ",", ".", "?", "!",
)

_ID = {token: index for index, token in enumerate(VOCABULARY)}
# Lower-case words (letters and apostrophes), or any other single visible character.
_TOKEN_PATTERN = re.compile(r"[a-z']+|[^\sa-z']")


def _unknown(token: str) -> ValueError:
    words = " ".join(VOCABULARY)
    return ValueError(f"unknown token {token!r}; the toy vocabulary is: {words}")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lower-case words and punctuation marks.

    ``tokenize("Hi, how are you?")`` gives ``['hi', ',', 'how', 'are', 'you', '?']``.
    Raises ``ValueError`` naming the first token that is not in ``VOCABULARY``,
    or if ``text`` holds no token at all.
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
    """The id of every token, shape ``(T,)``, dtype int64."""
    tokens = _check_tokens(tokens)
    return np.array([_ID[token] for token in tokens], dtype=np.int64)


def embedding_table(d_model: int = 4, seed: int = 0) -> np.ndarray:
    """The fixed toy embedding table, shape ``(len(VOCABULARY), d_model)``.

    Entries are standard normal draws from ``np.random.default_rng(seed)``,
    rounded to one decimal so that a reader can check products by hand. The
    row of ``PAD`` is zero.
    """
    d_model = check_positive_int(d_model, "d_model")
    seed = check_positive_int(seed, "seed", allow_zero=True)
    rng = np.random.default_rng(seed)
    table = np.round(rng.normal(size=(len(VOCABULARY), d_model)), 1)  # (V, d_model)
    table[_ID[PAD]] = 0.0
    return table + 0.0  # turns any -0.0 into 0.0, so printed tables show no "-0."


def toy_embeddings(tokens: Sequence[str], d_model: int = 4, seed: int = 0) -> np.ndarray:
    """Look the tokens up in ``embedding_table(d_model, seed)``: shape ``(T, d_model)``.

    The embedding of a token does not depend on its position: the same word
    gets the same row wherever it appears.
    """
    ids = token_ids(tokens)  # (T,)
    return embedding_table(d_model, seed)[ids]  # (T, d_model)


def position_aware_embeddings(
    tokens: Sequence[str], d_model: int = 4, seed: int = 0
) -> np.ndarray:
    """``toy_embeddings`` plus the sinusoidal positional encoding: shape ``(T, d_model)``.

    ``d_model`` must be even (the encoding comes in sine/cosine pairs).
    """
    embeddings = toy_embeddings(tokens, d_model, seed)  # (T, d_model)
    return embeddings + sinusoidal_positional_encoding(len(embeddings), d_model)  # (T, d_model)
