"""Helpers for the notebooks: ``notebook.setup``, the figure style in ``plotting``, and
``measure.count_multiply_adds``."""
