"""The fixture's unit check (named so that the book's own test run skips it)."""

from mutfix.core import double


def test_double():
    assert double(3) == 6
