"""Attention as torch layers: the modules, the key/value cache, chunked attention.

``attention_torch`` (the formula and the input checks the modules share),
``self_attention`` (one head, chapter 8), ``multi_head`` (heads, grouped-query
attention, masks and the cache, chapters 9-10), ``kv_cache`` (chapter 10),
``cache_sizes`` (a cache's bytes from a model's configuration), ``chunked``
(the online softmax, chapter 12), ``rotary`` (RoPE, chapter 13) and
``latent_attention`` (multi-head latent attention, chapter 14); ``paged_cache``,
``paged_decode`` and ``prefix_cache`` (a paged cache for a batch of requests,
chapter 18).
"""
