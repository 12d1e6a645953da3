"""Checkers for the coding exercises, one module per chapter.

Each ``check_*`` function takes the reader's function, runs it on several
cases against the package's reference, prints one line (or the first failing
case with expected and got values) and returns True or False.
"""

from ._runner import Case, run_checks
from .ch01 import check_weighted_average
from .ch02 import check_soft_lookup
from .ch03 import check_cosine_similarity
from .ch04 import check_positional_encoding
from .ch05 import check_qkv_scores
from .ch06 import check_scaled_scores
from .ch07 import check_stable_softmax
from .ch08 import check_attention_output

__all__ = [
    "Case",
    "run_checks",
    "check_weighted_average",
    "check_soft_lookup",
    "check_cosine_similarity",
    "check_positional_encoding",
    "check_qkv_scores",
    "check_scaled_scores",
    "check_stable_softmax",
    "check_attention_output",
]
