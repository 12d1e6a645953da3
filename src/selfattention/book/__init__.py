"""Helpers for the notebooks: ``notebook.setup`` and the figure style in ``plotting``."""
