"""The ToPS shape statistic accounts one lattice step per rounded coordinate (issue 24)."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms.core._noise import lattice_granularity
from mechanisms.core._random import bit_source
from mechanisms.tops._shape import deviation_sensitivity, leaf_candidates, release_deviation


@pytest.mark.parametrize("m", [32, 256, 4096, 65536])
def test_shape_noise_scale_covers_every_rounded_coordinate(m):
    theta, eps = 3.0, 0.25
    sizes = leaf_candidates(m, 10**6)
    prefix = np.linspace(0.0, theta, m)
    _, noise = release_deviation(prefix, theta, sizes, eps, bit_source(0))
    delta = deviation_sensitivity(sizes, m, theta)
    gamma = lattice_granularity(delta / eps, float(sizes[-1]) * theta)
    rounded = int(np.count_nonzero(sizes > 1))
    assert noise.granularity == gamma
    # scale·ε = Δ + d·γ: Δ of the exact vector plus one γ for each coordinate snapped
    assert noise.scale * eps == pytest.approx(delta + rounded * gamma, rel=1e-12)
    assert noise.scale * eps > delta + gamma or rounded == 1


def test_rounding_adds_up_to_one_lattice_step_per_coordinate():
    # Why one γ is not enough: two vectors a hair apart on each side of a half-lattice point
    # are rounded a whole step apart in every coordinate.
    gamma, d = 2.0**-20, 7
    a = np.full(d, 0.5 * gamma - 1e-3 * gamma)
    b = np.full(d, 0.5 * gamma + 1e-3 * gamma)
    exact = np.abs(a - b).sum()
    snapped = np.abs(np.rint(a / gamma) - np.rint(b / gamma)).sum() * gamma
    assert snapped > exact + gamma
    assert snapped <= exact + d * gamma
