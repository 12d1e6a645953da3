"""MultiHeadAttention's contract beyond the chapters (chapters 8-15).

Written against the survivors of `make mutate-package` in
`layers/multi_head.py` (docs/mutation-score.md).
"""

from __future__ import annotations
