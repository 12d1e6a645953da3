"""selfattention: the shared package of *Attention, Step by Step*.

Every mask in the package uses True = may attend. The code is grouped by job:

- ``selfattention.handmath``: the formulas of Part I in numpy (similarity,
  positional encoding, softmax, scaled dot-product attention);
- ``selfattention.layers``: attention as torch layers (``SelfAttention``,
  ``MultiHeadAttention``, ``MultiHeadLatentAttention``, ``KVCache``, chunked
  attention, the paged cache of chapter 18);
- ``selfattention.masks``: building and converting masks, for numpy and torch;
- ``selfattention.toys``: the toy data, models and training of the chapters;
- ``selfattention.book``: notebook setup and the book's figure style;
- ``selfattention.exercises``: the checkers of the chapters' exercises.

The names the chapters use most are exported here, so ``from selfattention
import MultiHeadAttention`` works wherever the class lives.
"""

from .book.notebook import setup
from .handmath.functional import scaled_dot_product_attention
from .handmath.positional import sinusoidal_positional_encoding
from .handmath.similarity import cosine_similarity
from .handmath.softmax import softmax
from .layers.attention_torch import attend
from .layers.chunked import chunked_attention
from .layers.kv_cache import KVCache
from .layers.latent_attention import MultiHeadLatentAttention
from .layers.multi_head import MultiHeadAttention
from .layers.paged_cache import BlockAllocator, OutOfBlocksError, PagedKVCache, paged_attention
from .layers.paged_decode import paged_forward
from .layers.prefix_cache import PrefixCachingAllocator, block_hashes
from .layers.rotary import permute_rotary_rows, rotary_embedding, rotary_frequencies
from .layers.self_attention import SelfAttention
from .masks import (
    causal_mask,
    from_additive,
    from_attention_mask,
    padding_mask,
    to_additive,
    to_key_padding_mask,
    to_mha_attn_mask,
)
from .toys.catalogue import Catalogue, video_catalogue
from .toys.data import SERIES, SERIES_VOCABULARY, make_batch, make_lines
from .toys.decoder import TinyDecoder, generate
from .toys.images import patchify, synthetic_image
from .toys.induction import (
    RepeatTask,
    copy_losses,
    prefix_matching_score,
    previous_token_score,
    train_induction,
)
from .toys.models import AttentionClassifier
from .toys.toy_text import (
    VOCABULARY,
    embedding_table,
    position_aware_embeddings,
    token_ids,
    tokenize,
    toy_embeddings,
)
from .toys.training import train_classifier

__version__ = "0.1.0"

__all__ = [
    "Catalogue",
    "KVCache",
    "MultiHeadAttention",
    "MultiHeadLatentAttention",
    "SelfAttention",
    "causal_mask",
    "chunked_attention",
    "padding_mask",
    "permute_rotary_rows",
    "rotary_embedding",
    "rotary_frequencies",
    "attend",
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
    "RepeatTask",
    "TinyDecoder",
    "copy_losses",
    "generate",
    "prefix_matching_score",
    "previous_token_score",
    "train_induction",
    "BlockAllocator",
    "OutOfBlocksError",
    "PagedKVCache",
    "PrefixCachingAllocator",
    "block_hashes",
    "paged_attention",
    "paged_forward",
]
