"""The paged KV cache's and the prefix cache's contract (chapter 18).

Written against the survivors of `make mutate-package` in
`layers/paged_cache.py` and `layers/prefix_cache.py` (docs/mutation-score.md).
"""

from __future__ import annotations
