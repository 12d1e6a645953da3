"""The chapters' toy data, models and training.

``catalogue`` (chapter 2's videos), ``toy_text`` (the sentences and
embeddings of chapters 4-5), ``images`` (chapter 8's synthetic image), and
chapter 11's corpus (``data``), classifier (``models``) and training loop
(``training``).
"""
