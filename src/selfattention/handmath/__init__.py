"""The hand math of Part I, in numpy: one function per formula.

``similarity`` (cosine similarity, chapter 3), ``positional`` (the sinusoidal
encoding, chapter 4), ``softmax`` (chapter 7) and ``functional`` (scaled
dot-product attention, chapter 8). The functions are exported from
``selfattention`` itself.
"""
