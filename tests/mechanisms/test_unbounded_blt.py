"""The open-stream Gaussian counter: a time-invariant BLT for a stated horizon (issue 27.5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechanisms import ParameterError
from mechanisms.counting import (
    UnboundedBLTCounter,
    unbounded_blt_range_variance,
    unbounded_blt_release,
    unbounded_blt_variance,
)
from mechanisms.counting._blt import blt_variance
from mechanisms.counting._factorisation import sqrt_factorisation_variance
from mechanisms.counting._open_blt import (
    _calibrate,
    column_norm,
    open_strategy,
    prefix_units,
)


def test_the_closed_form_prefix_variance_matches_the_coefficients():
    strat = open_strategy()
    b = np.cumsum(strat.inverse_coefficients(1 << 16))
    direct = np.cumsum(b * b)
    t = np.array([1, 2, 3, 100, 4097, 1 << 16])
    np.testing.assert_allclose(prefix_units(strat, t), direct[t - 1], rtol=1e-10)
    c = strat.coefficients(1 << 16)
    assert column_norm(strat) ** 2 > float(c @ c)  # the infinite column, longer than any prefix


def _best_sized(t: int) -> float:
    """Worst-step variance of the best Gaussian counter sized for t at (1, 10⁻⁶)."""
    sq = float(sqrt_factorisation_variance(t, epsilon=1.0, delta=1e-6, bound=1.0).max())
    return min(sq, float(blt_variance(t, epsilon=1.0, delta=1e-6, bound=1.0).max()))


@pytest.mark.parametrize("k", [10, 13, 16])
def test_within_1_5_of_the_best_counter_sized_for_t(k):
    t = 1 << k
    open_var = float(unbounded_blt_variance([t], epsilon=1.0, delta=1e-6, bound=1.0)[0])
    ratio = open_var / _best_sized(t)
    assert 1.0 < ratio <= 1.5


@pytest.mark.slow
@pytest.mark.parametrize("k", [18, 20, 22, 24])
def test_within_1_5_of_the_best_counter_sized_for_t_up_to_2_24(k):
    t = 1 << k
    open_var = float(unbounded_blt_variance([t], epsilon=1.0, delta=1e-6, bound=1.0)[0])
    assert open_var / _best_sized(t) <= 1.5


def test_calibration_pays_the_rounding_of_the_stated_horizon():
    norm = column_norm(open_strategy())
    for horizon, most in ((1 << 24, 0.002), (1 << 32, 0.02)):
        cal = _calibrate(1.0, 1e-6, 1.0, horizon)
        assert 2**24 <= cal.sigma_units < 2**25
        exact = cal.units_bound * norm
        assert exact + math.sqrt(horizon) <= cal.sensitivity_units <= exact * (1 + most)


def test_push_push_many_and_release_are_one_release():
    x = np.random.default_rng(3).uniform(-0.5, 3.5, 5000)  # clamped by the counters
    one = UnboundedBLTCounter(epsilon=0.5, delta=1e-8, bound=3.0, seed=9)
    many = UnboundedBLTCounter(epsilon=0.5, delta=1e-8, bound=3.0, seed=9)
    by_step = np.array([one.push(v) for v in x])
    mixed = np.concatenate(
        [many.push_many(x[:100]), [many.push(v) for v in x[100:200]], many.push_many(x[200:])]
    )
    assert many._enc == one._enc  # the extended-precision encoder agrees to the last bit
    sd = math.sqrt(one.variance())
    np.testing.assert_allclose(mixed, by_step, rtol=0, atol=1e-9 * sd)
    rel = unbounded_blt_release(np.clip(x, 0, 3), epsilon=0.5, delta=1e-8, bound=3.0, seed=9)
    np.testing.assert_allclose(rel.prefix_sums, by_step, rtol=0, atol=1e-9 * sd)
    assert rel.variance[-1] == pytest.approx(one.variance(), rel=1e-9)
    # an open stream: the first rows' sums do not depend on the rows after them
    head = unbounded_blt_release(np.clip(x[:777], 0, 3), epsilon=0.5, delta=1e-8, bound=3.0, seed=9)
    np.testing.assert_array_equal(head.prefix_sums, rel.prefix_sums[:777])


@pytest.mark.statistical
def test_the_exact_variance_matches_1000_seeded_releases():
    n = 512
    x = np.random.default_rng(0).uniform(0.0, 1.0, n)
    truth = np.cumsum(x)
    err = np.stack(
        [
            unbounded_blt_release(x, epsilon=1.0, delta=1e-6, bound=1.0, seed=s).prefix_sums - truth
            for s in range(1000)
        ]
    )
    var = unbounded_blt_variance(np.arange(1, n + 1), epsilon=1.0, delta=1e-6, bound=1.0)
    # a range i..j (1-based) is c̃(j) − c̃(i − 1): its exact variance, against the releases
    rng_var = unbounded_blt_range_variance(100, 400, epsilon=1.0, delta=1e-6, bound=1.0)
    assert float(((err[:, 399] - err[:, 98]) ** 2).mean()) / rng_var == pytest.approx(1.0, abs=0.2)
    assert unbounded_blt_range_variance(1, 400, epsilon=1.0, delta=1e-6, bound=1.0) == (
        pytest.approx(float(var[399]), rel=1e-12)
    )
    ratio = (err**2).mean(axis=0) / var
    assert np.all(np.abs(ratio - 1.0) < 0.25)
    assert abs(float(np.mean((err**2).mean(axis=0)) / var.mean()) - 1.0) < 0.08
    assert abs(float(np.mean((err**2).mean(axis=0)) / (1.3 * var.mean())) - 1.0) > 0.15


def test_bad_inputs_and_the_horizon_are_refused():
    with pytest.raises(ParameterError, match="'delta'"):
        UnboundedBLTCounter(epsilon=1.0, delta=0.0, bound=1.0)
    with pytest.raises(ParameterError, match="'horizon'"):
        UnboundedBLTCounter(epsilon=1.0, delta=1e-6, bound=1.0, horizon=(1 << 40) + 1)
    with pytest.raises(ParameterError, match="stated horizon"):
        unbounded_blt_release([0.5] * 4, epsilon=1.0, delta=1e-6, bound=1.0, horizon=3, seed=0)
    counter = UnboundedBLTCounter(epsilon=1.0, delta=1e-6, bound=1.0, horizon=2, seed=0)
    counter.push_many([0.5, 0.5])
    with pytest.raises(ParameterError, match="sized for n=2"):
        counter.push(0.5)
    with pytest.raises(ParameterError, match="'t'"):
        unbounded_blt_variance([0], epsilon=1.0, delta=1e-6, bound=1.0)
