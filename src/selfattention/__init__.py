"""selfattention: the shared package of *Attention, Step by Step*.

numpy functions hold the hand math the chapters derive; torch modules hold
the layers. Every mask in the package uses True = may attend.
"""

from .catalogue import Catalogue, video_catalogue
from .chunked import chunked_attention
from .data import SERIES, SERIES_VOCABULARY, make_batch, make_lines
from .functional import scaled_dot_product_attention
from .images import patchify, synthetic_image
from .kv_cache import KVCache
from .masks import (
    causal_mask,
    from_additive,
    from_attention_mask,
    padding_mask,
    to_additive,
    to_key_padding_mask,
    to_mha_attn_mask,
)
from .models import AttentionClassifier
from .multi_head import MultiHeadAttention
from .notebook import setup
from .positional import sinusoidal_positional_encoding
from .self_attention import SelfAttention
from .similarity import cosine_similarity
from .softmax import softmax
from .toy_text import (
    VOCABULARY,
    embedding_table,
    position_aware_embeddings,
    token_ids,
    tokenize,
    toy_embeddings,
)
from .training import train_classifier

__version__ = "0.1.0"

__all__ = [
    "Catalogue",
    "KVCache",
    "MultiHeadAttention",
    "SelfAttention",
    "causal_mask",
    "chunked_attention",
    "padding_mask",
    "from_additive",
    "from_attention_mask",
    "to_additive",
    "to_key_padding_mask",
    "to_mha_attn_mask",
    "cosine_similarity",
    "patchify",
    "scaled_dot_product_attention",
    "sinusoidal_positional_encoding",
    "setup",
    "softmax",
    "VOCABULARY",
    "embedding_table",
    "position_aware_embeddings",
    "token_ids",
    "tokenize",
    "toy_embeddings",
    "video_catalogue",
    "synthetic_image",
    "AttentionClassifier",
    "SERIES",
    "SERIES_VOCABULARY",
    "make_batch",
    "make_lines",
    "train_classifier",
]
