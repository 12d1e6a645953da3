"""Shared test settings: float64 comparisons and a bounded hypothesis profile."""

import os

import torch
from hypothesis import HealthCheck, settings

torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2 or 1))

settings.register_profile(
    "book", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "book"))
