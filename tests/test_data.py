"""Chapter 11's synthetic corpus: deterministic, balanced, one giveaway, padded batches."""

import doctest
from collections import Counter

import pytest
import torch

from selfattention import padding_mask
from selfattention.toys import data as data_module
from selfattention.toys.data import (
    FILLER_WORDS,
    GIVEAWAY_WORDS,
    PAD,
    SERIES,
    SERIES_VOCABULARY,
    Line,
    Vocabulary,
    make_batch,
    make_lines,
)


def test_doctests_of_the_data_module():
    result = doctest.testmod(data_module)
    assert result.attempted > 0 and result.failed == 0


def test_same_seed_same_lines_and_other_seed_other_lines():
    assert make_lines(50, seed=3) == make_lines(50, seed=3)
    assert make_lines(50, seed=3) != make_lines(50, seed=4)
    assert make_lines(0) == []


@pytest.mark.parametrize("count", [1, 2, 3, 299, 300, 301])
def test_labels_are_balanced(count):
    labels = Counter(line.label for line in make_lines(count, seed=1))
    per_class = [labels.get(label, 0) for label in range(len(SERIES))]
    assert sum(per_class) == count
    assert max(per_class) - min(per_class) <= 1
    assert per_class == sorted(per_class, reverse=True)  # the remainder goes first


def test_every_line_has_exactly_one_giveaway_of_its_series():
    all_giveaways = {word for words in GIVEAWAY_WORDS for word in words}
    for line in make_lines(400, seed=2, min_length=3, max_length=9):
        assert 3 <= len(line.words) <= 9
        found = [index for index, word in enumerate(line.words) if word in all_giveaways]
        assert found == [line.giveaway]
        assert line.words[line.giveaway] in GIVEAWAY_WORDS[line.label]
        assert all(
            word in FILLER_WORDS for index, word in enumerate(line.words) if index != line.giveaway
        )


def test_lengths_and_positions_cover_their_range():
    lines = make_lines(600, seed=5)
    assert {len(line.words) for line in lines} == set(range(4, 11))
    assert {line.giveaway for line in lines} == set(range(10))
    # Uniform position: the giveaway is first in about 1 / E[T] of the lines, not always.
    first = sum(line.giveaway == 0 for line in lines) / len(lines)
    assert 0.1 < first < 0.25


def test_fixed_position_puts_every_giveaway_there():
    lines = make_lines(60, seed=0, fixed_position=2)
    assert {line.giveaway for line in lines} == {2}


def test_the_lannister_line_tokenizes():
    words = SERIES_VOCABULARY.tokenize("A Lannister always pays his debts.")
    assert words == ["a", "lannister", "always", "pays", "his", "debts"]
    ids = SERIES_VOCABULARY.encode(words)
    assert SERIES_VOCABULARY.decode(ids) == words
    assert "lannister" in GIVEAWAY_WORDS[SERIES.index("Game of Thrones")]


def test_vocabulary_layout():
    assert SERIES_VOCABULARY.tokens[0] == PAD
    assert len(SERIES_VOCABULARY) == 1 + len(FILLER_WORDS) + sum(map(len, GIVEAWAY_WORDS))
    assert len(set(SERIES_VOCABULARY.tokens)) == len(SERIES_VOCABULARY)


def test_make_batch_pads_and_masks():
    lines = make_lines(7, seed=8)
    batch = make_batch(lines)
    longest = max(len(line.words) for line in lines)
    assert batch.ids.shape == (7, longest) and batch.ids.dtype == torch.int64
    assert batch.lengths.tolist() == [len(line.words) for line in lines]
    assert torch.equal(batch.mask, padding_mask(batch.lengths, longest))
    assert torch.equal(batch.ids == 0, ~batch.mask)  # id 0 only on padding
    assert batch.labels.tolist() == [line.label for line in lines]
    assert batch.giveaway.tolist() == [line.giveaway for line in lines]
    for row, line in enumerate(lines):
        assert SERIES_VOCABULARY.decode(batch.ids[row, : len(line.words)]) == list(line.words)
    wider = make_batch(lines, max_len=12)
    assert wider.ids.shape == (7, 12) and torch.equal(wider.ids[:, :longest], batch.ids)


def test_make_batch_of_plain_word_lists_and_subset():
    batch = make_batch([["a", "jedi"], ["hogwarts", "the", "old"]])
    assert batch.labels.tolist() == [-1, -1] and batch.giveaway.tolist() == [-1, -1]
    part = batch.subset(torch.tensor([0]))
    assert part.ids.shape == (1, 2) and part.mask.all()


@pytest.mark.parametrize(
    "kwargs,error,pattern",
    [
        (dict(count=-1), ValueError, r"count must be non-negative, got -1"),
        (dict(count=2.0), TypeError, r"count must be an int, got float"),
        (dict(count=2, seed=-3), ValueError, r"seed must be non-negative"),
        (dict(count=2, min_length=1), ValueError, r"2 <= min_length <= max_length.*min_length=1"),
        (dict(count=2, min_length=6, max_length=5), ValueError, r"max_length=5"),
        (
            dict(count=2, fixed_position=4),
            ValueError,
            r"fixed_position=4 must be below min_length=4",
        ),
    ],
)
def test_make_lines_bad_arguments(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        make_lines(**kwargs)


def test_vocabulary_and_batch_bad_arguments():
    with pytest.raises(ValueError, match=r"unknown word 'winterfell'"):
        SERIES_VOCABULARY.tokenize("Winterfell is cold")
    with pytest.raises(ValueError, match=r"no words"):
        SERIES_VOCABULARY.tokenize("?!")
    with pytest.raises(TypeError, match=r"text must be a str"):
        SERIES_VOCABULARY.tokenize(["a"])
    with pytest.raises(TypeError, match=r"call tokenize on a str first"):
        SERIES_VOCABULARY.encode("a jedi")
    with pytest.raises(ValueError, match=r"id 99 is outside the vocabulary of 67 tokens"):
        SERIES_VOCABULARY.decode([99])
    with pytest.raises(ValueError, match=r"distinct"):
        Vocabulary(["a", "a"])
    with pytest.raises(ValueError, match=r"lines is empty"):
        make_batch([])
    with pytest.raises(TypeError, match=r"line 0 is a str"):
        make_batch(["a jedi"])
    with pytest.raises(TypeError, match=r"lines must be a sequence of lines, got Line"):
        make_batch(Line(("a", "jedi"), 1, 1))
    with pytest.raises(ValueError, match=r"line 1 is empty"):
        make_batch([["a"], []])
    with pytest.raises(
        ValueError, match=r"max_len=2 is shorter than the longest line \(3 words\)"
    ):
        make_batch([["a", "the", "jedi"]], max_len=2)
    with pytest.raises(TypeError, match=r"vocabulary must be a Vocabulary, got dict"):
        make_batch([["a"]], vocabulary={})
