"""Shared test settings: float64 comparisons and a bounded hypothesis profile."""

import os

import pytest
import torch
from hypothesis import HealthCheck, settings

torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2 or 1))

settings.register_profile(
    "book", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
# scripts/mutate.py's: the same examples on every run, so that a property test
# named as a mutation's catcher gives the same verdict every time.
settings.register_profile("mutate", settings.get_profile("book"), derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "book"))


@pytest.fixture
def float64_and_seed():
    """Compute in float64 (tight tolerances) from seed 0; restore the default dtype afterwards.

    Test modules that compare with PyTorch at 1e-10 opt in with
    ``pytestmark = pytest.mark.usefixtures("float64_and_seed")``.
    """
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(0)
    yield
    torch.set_default_dtype(previous)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the tests of the kernels' compile check first.

    Their module fixture (``compiled`` in test_kernels.py) compiles every kernel
    for about 20 s of one core. At the front of the list all three go to one
    xdist worker at its start, so the compile runs once and early. Elsewhere,
    work stealing can split them over both workers near the end of the run, and
    each worker compiles for itself while the run waits on the last one.
    """
    items.sort(key=lambda item: "compiled" not in getattr(item, "fixturenames", ()))
