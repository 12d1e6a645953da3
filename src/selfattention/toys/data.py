"""A synthetic corpus for chapter 11: "which series is this line from?".

Every line is a handful of filler words shared by all series plus exactly
one giveaway word (*lannister*, *jedi*, *hogwarts*, ...) that decides the
label. The giveaway sits at a uniformly random position and lines vary in
length, so a model must *find* the word, and batches need padding.

Everything is generated from a seed, with no downloads: the same arguments
always give the same lines. The pipeline is ``make_lines`` (labelled lines
of words), ``SERIES_VOCABULARY`` (words to ids and back) and ``make_batch``
(padded token ids, lengths, padding mask and labels as torch tensors).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .._checks import check_positive_int
from ..masks import padding_mask

#: The series in label order; label ``c`` is ``SERIES[c]``.
SERIES: tuple[str, ...] = ("Game of Thrones", "Star Wars", "Harry Potter")

#: The giveaway words of each series, in label order. One word gives a line away.
GIVEAWAY_WORDS: tuple[tuple[str, ...], ...] = (
    ("lannister", "stark", "targaryen", "westeros"),
    ("jedi", "sith", "skywalker", "wookiee"),
    ("hogwarts", "muggle", "quidditch", "dumbledore"),
)

#: Words shared by every series; they carry no information about the label.
#: "A Lannister always pays his debts" is built from these plus "lannister".
# fmt: off
FILLER_WORDS: tuple[str, ...] = (
    "a", "always", "pays", "his", "debts",
    "the", "he", "she", "they", "we", "you", "i", "her", "their", "my",
    "never", "still", "once", "again", "now", "not", "all", "every",
    "says", "knows", "keeps", "takes", "finds", "wants", "fights", "loves",
    "old", "young", "great", "small", "dark", "true", "last", "first",
    "friend", "brother", "sister", "father", "mother", "home", "night",
    "day", "war", "gold", "name", "words", "promise", "secret", "door",
)
# fmt: on

#: The padding token; it always has id 0.
PAD = "<pad>"

_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class Line:
    """One labelled line of the corpus.

    Attributes
    ----------
    words : tuple of str
        The line, one word per token.
    label : int
        Index into ``SERIES``.
    giveaway : int
        Position of the giveaway word in ``words`` (0-based).

    Examples
    --------
    >>> line = Line(("a", "lannister", "always"), label=0, giveaway=1)
    >>> line.text(), SERIES[line.label], line.words[line.giveaway]
    ('a lannister always', 'Game of Thrones', 'lannister')
    """

    words: tuple[str, ...]
    label: int
    giveaway: int

    def text(self) -> str:
        """The words joined by spaces."""
        return " ".join(self.words)


def make_lines(
    count: int,
    seed: int = 0,
    min_length: int = 4,
    max_length: int = 10,
    fixed_position: int | None = None,
) -> list[Line]:
    """Generate ``count`` labelled lines, deterministically from ``seed``.

    Labels are balanced: each series gets ``count // len(SERIES)`` lines, and
    the remainder goes to the first series in order; the labels are then
    shuffled. Each line has a length drawn uniformly from ``min_length`` to
    ``max_length`` (inclusive), filler words drawn uniformly with replacement,
    and one giveaway word of its series, drawn uniformly, at a uniformly
    random position (or at ``fixed_position`` when it is given).

    Parameters
    ----------
    count : int
        Number of lines, at least 0.
    seed : int
        Seed of the numpy generator; the same seed gives the same lines.
    min_length, max_length : int
        Shortest and longest line, ``2 <= min_length <= max_length``.
    fixed_position : int, optional
        Put every giveaway at this position; it must be below ``min_length``.

    Returns
    -------
    list of Line

    Examples
    --------
    >>> lines = make_lines(3, seed=0)
    >>> sorted(line.label for line in lines)
    [0, 1, 2]
    >>> make_lines(3, seed=0) == lines
    True
    """
    count = check_positive_int(count, "count", allow_zero=True)
    seed = check_positive_int(seed, "seed", allow_zero=True)
    min_length = check_positive_int(min_length, "min_length")
    max_length = check_positive_int(max_length, "max_length")
    if not 2 <= min_length <= max_length:
        raise ValueError(
            f"need 2 <= min_length <= max_length, got min_length={min_length}, "
            f"max_length={max_length}"
        )
    if fixed_position is not None:
        fixed_position = check_positive_int(fixed_position, "fixed_position", allow_zero=True)
        if fixed_position >= min_length:
            raise ValueError(
                f"fixed_position={fixed_position} must be below min_length={min_length}, "
                "so that every line has that position"
            )
    rng = np.random.default_rng(seed)
    classes = len(SERIES)
    labels = np.arange(count) % classes  # balanced before shuffling
    rng.shuffle(labels)
    lines = []
    for label in labels.tolist():
        length = int(rng.integers(min_length, max_length + 1))
        filler = rng.integers(0, len(FILLER_WORDS), size=length)
        words = [FILLER_WORDS[index] for index in filler.tolist()]
        giveaways = GIVEAWAY_WORDS[label]
        word = giveaways[int(rng.integers(0, len(giveaways)))]
        position = int(rng.integers(0, length)) if fixed_position is None else fixed_position
        words[position] = word
        lines.append(Line(tuple(words), int(label), position))
    return lines


class Vocabulary:
    """Words to ids and back; id 0 is the padding token ``PAD``.

    Parameters
    ----------
    words : sequence of str
        The vocabulary without ``PAD``, in id order starting at 1. No repeats.

    Examples
    --------
    >>> vocabulary = Vocabulary(["a", "lannister"])
    >>> vocabulary.encode(vocabulary.tokenize("A Lannister!"))
    [1, 2]
    >>> len(vocabulary), vocabulary.decode([2, 0])
    (3, ['lannister', '<pad>'])
    """

    def __init__(self, words: Sequence[str]) -> None:
        words = tuple(words)
        for word in words:
            if not isinstance(word, str) or not word:
                raise TypeError(f"words must be non-empty strings, got {word!r}")
        if PAD in words or len(set(words)) != len(words):
            raise ValueError("words must be distinct and must not contain the padding token")
        self.tokens: tuple[str, ...] = (PAD, *words)
        self._ids = {token: index for index, token in enumerate(self.tokens)}

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, word: object) -> bool:
        return word in self._ids

    def tokenize(self, text: str) -> list[str]:
        """Lower-case ``text`` and keep its words (letters only; punctuation is dropped).

        Raises ``ValueError`` naming the first word not in the vocabulary.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        words = _WORD.findall(text.lower())
        if not words:
            raise ValueError(f"text has no words, got {text!r}")
        for word in words:
            if word not in self._ids:
                raise ValueError(f"unknown word {word!r} in {text!r}")
        return words

    def encode(self, words: Iterable[str]) -> list[int]:
        """The id of each word; ``ValueError`` names an unknown word."""
        if isinstance(words, str):
            raise TypeError("encode takes a sequence of words; call tokenize on a str first")
        ids = []
        for word in words:
            if word not in self._ids:
                raise ValueError(f"unknown word {word!r}")
            ids.append(self._ids[word])
        return ids

    def decode(self, ids: Iterable[int]) -> list[str]:
        """The word of each id."""
        words = []
        for index in ids:
            index = int(index)
            if not 0 <= index < len(self.tokens):
                raise ValueError(
                    f"id {index} is outside the vocabulary of {len(self.tokens)} tokens"
                )
            words.append(self.tokens[index])
        return words


#: The corpus vocabulary; padding, then the filler words, then the giveaways by series.
SERIES_VOCABULARY = Vocabulary(
    FILLER_WORDS + tuple(word for words in GIVEAWAY_WORDS for word in words)
)


@dataclass(frozen=True)
class Batch:
    """A padded batch, ready for the model.

    Attributes
    ----------
    ids : torch.Tensor
        ``(B, T)`` int64 token ids, padded with 0 after each line.
    lengths : torch.Tensor
        ``(B,)`` int64 number of real tokens per line.
    mask : torch.Tensor
        ``(B, T)`` bool, True = real token (``padding_mask(lengths, T)``).
    labels : torch.Tensor
        ``(B,)`` int64 series labels (-1 when the lines had none).
    giveaway : torch.Tensor
        ``(B,)`` int64 position of the giveaway word (-1 when unknown).

    Examples
    --------
    >>> batch = make_batch(make_lines(4, seed=0))
    >>> len(batch), batch.ids.shape == batch.mask.shape
    (4, True)
    >>> bool((batch.mask.sum(dim=1) == batch.lengths).all())
    True
    """

    ids: torch.Tensor
    lengths: torch.Tensor
    mask: torch.Tensor
    labels: torch.Tensor
    giveaway: torch.Tensor

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def subset(self, index: torch.Tensor | Sequence[int] | slice) -> Batch:
        """The lines at ``index``, cut to the longest of them (padding stays at the end)."""
        lengths = self.lengths[index]
        width = max(int(lengths.max()), 1) if lengths.numel() else 1
        return Batch(
            self.ids[index][:, :width],
            lengths,
            self.mask[index][:, :width],
            self.labels[index],
            self.giveaway[index],
        )


def make_batch(
    lines: Sequence[Line | Sequence[str]],
    vocabulary: Vocabulary = SERIES_VOCABULARY,
    max_len: int | None = None,
) -> Batch:
    """Encode and pad ``lines`` into one ``Batch``.

    Parameters
    ----------
    lines : sequence of Line, or of word sequences
        Plain word sequences get label and giveaway -1.
    vocabulary : Vocabulary
        Maps words to ids; padding is id 0.
    max_len : int, optional
        Padded length ``T``; defaults to the longest line.

    Examples
    --------
    >>> batch = make_batch([["a", "lannister"], ["jedi"]])
    >>> batch.ids.tolist(), batch.lengths.tolist(), batch.mask.tolist()
    ([[1, 55], [59, 0]], [2, 1], [[True, True], [True, False]])
    """
    if not isinstance(vocabulary, Vocabulary):
        raise TypeError(f"vocabulary must be a Vocabulary, got {type(vocabulary).__name__}")
    if isinstance(lines, (str, Line)) or not isinstance(lines, Sequence):
        raise TypeError(f"lines must be a sequence of lines, got {type(lines).__name__}")
    if len(lines) == 0:
        raise ValueError("lines is empty; a batch needs at least one line")
    encoded, labels, giveaways = [], [], []
    for number, line in enumerate(lines):
        words = line.words if isinstance(line, Line) else line
        if isinstance(words, str):
            raise TypeError(f"line {number} is a str; pass a list of words (vocabulary.tokenize)")
        ids = vocabulary.encode(words)
        if not ids:
            raise ValueError(f"line {number} is empty")
        encoded.append(ids)
        labels.append(line.label if isinstance(line, Line) else -1)
        giveaways.append(line.giveaway if isinstance(line, Line) else -1)
    lengths = torch.tensor([len(ids) for ids in encoded], dtype=torch.int64)  # (B,)
    longest = int(lengths.max())
    if max_len is None:
        max_len = longest
    max_len = check_positive_int(max_len, "max_len")
    if max_len < longest:
        raise ValueError(f"max_len={max_len} is shorter than the longest line ({longest} words)")
    ids = torch.zeros(len(encoded), max_len, dtype=torch.int64)  # (B, T), 0 = PAD
    for row, line_ids in enumerate(encoded):
        ids[row, : len(line_ids)] = torch.tensor(line_ids, dtype=torch.int64)
    return Batch(
        ids,
        lengths,
        padding_mask(lengths, max_len),
        torch.tensor(labels, dtype=torch.int64),
        torch.tensor(giveaways, dtype=torch.int64),
    )
