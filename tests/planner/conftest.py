"""A synthetic PAK-like light-tailed stream (train trips: minutes, B = 1440, n = 25·10⁶)."""

from __future__ import annotations

import numpy as np
import pytest

N_TRIPS = 25_000_000
BOUND = 1440.0


@pytest.fixture(scope="session")
def trips() -> np.ndarray:
    """200,000 gamma(2, 15)-minute trips (mean 30 min, exponential tail), clipped to B."""
    rng = np.random.default_rng(20190224)
    return np.minimum(rng.gamma(2.0, 15.0, size=200_000), BOUND)
