"""Checkers for the coding exercises, one module per chapter.

Each ``check_*`` function takes the reader's function, runs it on several
cases against the package's reference, prints one line (or the first failing
case with expected and got values) and returns True or False. ``Case`` and
``run_checks`` build new checkers.

Examples
--------
>>> from selfattention import softmax
>>> from selfattention.exercises import check_stable_softmax
>>> check_stable_softmax(softmax)  # doctest: +ELLIPSIS
✓ check_stable_softmax: all ... cases pass
True
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
from .ch09 import check_expand_kv_heads, check_split_heads
from .ch10 import check_additive_mask
from .ch11 import check_masked_mean
from .ch12 import check_online_softmax_update
from .ch13 import check_rotary_embedding
from .ch14 import check_window_mask
from .ch15 import check_prefix_matching_score
from .ch16 import check_causal_key_blocks, check_kv_head_offset
from .ch17 import check_dv_update
from .ch18 import check_blocks_for_batch, check_blocks_for_samples
from .ch19 import check_causal_scores, check_ring_bytes, check_ring_step

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
    "check_split_heads",
    "check_expand_kv_heads",
    "check_additive_mask",
    "check_masked_mean",
    "check_online_softmax_update",
    "check_prefix_matching_score",
    "check_rotary_embedding",
    "check_window_mask",
    "check_kv_head_offset",
    "check_causal_key_blocks",
    "check_dv_update",
    "check_blocks_for_batch",
    "check_blocks_for_samples",
    "check_causal_scores",
    "check_ring_bytes",
    "check_ring_step",
]
