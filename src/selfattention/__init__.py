"""selfattention: the shared package of *Attention, Step by Step*.

numpy functions hold the hand math the chapters derive; torch modules hold
the layers. Every mask in the package uses True = may attend.
"""

from .functional import scaled_dot_product_attention
from .masks import causal_mask
from .multi_head import MultiHeadAttention
from .positional import sinusoidal_positional_encoding
from .self_attention import SelfAttention
from .similarity import cosine_similarity
from .softmax import softmax
from .notebook import setup

__version__ = "0.1.0"

__all__ = [
    "MultiHeadAttention",
    "SelfAttention",
    "causal_mask",
    "cosine_similarity",
    "scaled_dot_product_attention",
    "sinusoidal_positional_encoding",
    "setup",
    "softmax",
]
