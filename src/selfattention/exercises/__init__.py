"""Checkers for the coding exercises, one module per chapter.

Each ``check_*`` function takes the reader's function, runs it on several
cases against the package's reference, prints one line (or the first failing
case with expected and got values) and returns True or False.
"""

from ._runner import Case, run_checks
from .ch01 import check_weighted_average

__all__ = [
    "Case",
    "run_checks",
    "check_weighted_average",
]
