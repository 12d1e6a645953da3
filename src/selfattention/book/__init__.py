"""Helpers for the notebooks: ``notebook.setup``, the figure style in ``plotting``,
``measure.count_multiply_adds``, and in ``interactive`` the data of the website's
interactive figures."""
