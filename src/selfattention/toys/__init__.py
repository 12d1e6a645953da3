"""The chapters' toy data, models and training.

``catalogue`` (chapter 2's videos), ``toy_text`` (the sentences and
embeddings of chapters 4-5), ``images`` (chapter 8's synthetic image),
chapter 11's corpus (``data``), classifier (``models``) and training loop
(``training``), and chapter 15's repeated-token task, metrics and training
(``induction``) with its small decoder-only model (``decoder``).
"""
