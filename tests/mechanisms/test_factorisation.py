"""The matrix-factorisation counters: the square root ([FHU23]; ``mechanisms.counting.
_factorisation``) and, where the two share a behaviour, the BLT ([DMRST24]; ``_blt``), in
parametrised tests. What only the BLT has (its strategies, push_many, the wide encoder) is in
``test_blt.py``."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.linalg import toeplitz

from mechanisms import DomainError, ParameterError
from mechanisms.core._noise import _gaussian_delta
from mechanisms.counting import _blt
from mechanisms.counting import _factorisation as fac
from mechanisms.counting._blt import BLTCounter, blt_release, blt_strategy, blt_variance
from mechanisms.counting._factorisation import (
    SqrtFactorisationCounter,
    sqrt_coefficients,
    sqrt_factorisation_noise,
    sqrt_factorisation_release,
    sqrt_factorisation_variance,
)
from mechanisms.counting._open_blt import UnboundedBLTCounter


@dataclass(frozen=True)
class _Family:
    """One factorisation counter's entry points, as the shared tests call them."""

    release: object
    counter: object
    variance: object
    coefficients: object
    calibrate: object


FAMILIES = {
    "sqrt_factorisation": _Family(
        release=sqrt_factorisation_release,
        counter=SqrtFactorisationCounter,
        variance=sqrt_factorisation_variance,
        coefficients=sqrt_coefficients,
        calibrate=fac._calibrate,
    ),
    "blt": _Family(
        release=blt_release,
        counter=BLTCounter,
        variance=blt_variance,
        coefficients=lambda n: blt_strategy(n).coefficients(n),
        calibrate=lambda n, e, d, b: _blt._calibrate(n, e, d, b, blt_strategy(n)),
    ),
}


# ---- the square root alone -------------------------------------------------------------


def test_coefficients_are_the_central_binomials_over_powers_of_four():
    coef = sqrt_coefficients(12)
    expected = [math.comb(2 * j, j) / 4**j for j in range(12)]
    np.testing.assert_allclose(coef, expected, rtol=1e-15)


def test_the_square_of_c_is_the_prefix_sum_matrix():
    c = np.tril(toeplitz(sqrt_coefficients(64)))
    np.testing.assert_allclose(c @ c, np.tril(np.ones((64, 64))), atol=1e-13)


def test_the_variance_known_answer_of_the_issue():
    # issue 27: the square root calibrated with the analytic Gaussian at (1, 1e-6) has
    # worst-step variance 191 at n = 2^10 and 308 at 2^14 (bound 1; ours adds the rounding)
    for n, worst in [(1 << 10, 191.0), (1 << 14, 308.0)]:
        var = sqrt_factorisation_variance(n, epsilon=1.0, delta=1e-6, bound=1.0)
        assert var[-1] == pytest.approx(worst, rel=0.005)
        assert np.all(np.diff(var) > 0)


def test_the_noise_refuses_a_bad_epsilon():
    with pytest.raises(ParameterError, match="'epsilon'"):
        sqrt_factorisation_noise(4, epsilon=-1.0, delta=1e-6, bound=1.0)


# ---- shared by the square root and the BLT ---------------------------------------------


@pytest.mark.parametrize(
    ("name", "n", "most"),
    [("sqrt_factorisation", 1024, 1.001)] + [("blt", n, 1.01) for n in (1, 5, 1 << 12, 1 << 20)],
)
def test_calibration_pays_the_rounding_at_the_analytic_gaussian(name, n, most):
    fam = FAMILIES[name]
    cal = fam.calibrate(n, 1.0, 1e-6, 1.0)
    coef = fam.coefficients(n)
    exact = cal.units_bound * math.sqrt(float(coef @ coef))
    assert cal.sensitivity_units >= exact + math.sqrt(n)  # the rounding of y is paid for
    assert cal.sensitivity_units <= exact * most
    assert 2**24 <= cal.sigma_units < 2**25  # the sampler's proven range
    assert _gaussian_delta(1.0, cal.sigma_units / cal.sensitivity_units) <= 1e-6


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("n", [1, 7, 1024, 1 << 14])
def test_every_n_lands_sigma_in_the_sampler_range(name, n):
    fam = FAMILIES[name]
    for eps, dlt, bound in [(0.01, 1e-9, 1e-3), (1.0, 1e-6, 1.0), (10.0, 0.1, 1e6)]:
        cal = fam.calibrate(n, eps, dlt, bound)
        assert 2**24 <= cal.sigma_units < 2**25
        # integers of C·u and of the noise stay exact doubles
        assert cal.units_bound * fam.coefficients(n).sum() + 64 * cal.sigma_units < 2**50


@pytest.mark.statistical
@pytest.mark.parametrize("name", FAMILIES)
def test_the_exact_variance_matches_1000_seeded_releases(name):
    fam = FAMILIES[name]
    n = 1 << 12
    x = np.random.default_rng(0).uniform(0.0, 1.0, n)
    truth = np.cumsum(x)
    err = np.stack(
        [
            fam.release(x, epsilon=1.0, delta=1e-6, bound=1.0, seed=s).prefix_sums - truth
            for s in range(1000)
        ]
    )
    var = fam.variance(n, epsilon=1.0, delta=1e-6, bound=1.0)
    ratio = (err**2).mean(axis=0) / var
    # chi-square with 1000 dof per step: ±4.5 sd is ±0.2; the mean over steps is tighter
    assert np.all(np.abs(ratio - 1.0) < 0.25)
    assert abs(float(np.mean((err**2).mean(axis=0)) / var.mean()) - 1.0) < 0.08
    assert abs(float(err.mean())) < 0.1 * math.sqrt(var.mean())


@pytest.mark.parametrize("name", FAMILIES)
def test_streaming_draws_the_same_noise_as_the_batch(name):
    fam = FAMILIES[name]
    x = np.random.default_rng(1).uniform(0.0, 3.0, 5000)  # crosses a block of 4096 draws
    rel = fam.release(x, epsilon=0.5, delta=1e-8, bound=3.0, seed=5)
    counter = fam.counter(5000, epsilon=0.5, delta=1e-8, bound=3.0, seed=5)
    sums = np.array([counter.push(v) for v in x])
    # equal up to one lattice step per coordinate of y where the two roundings differ (the
    # square root: carried by C, at most 8·γ per coordinate; the BLT: carried by B)
    if name == "sqrt_factorisation":
        atol, rel_var = 8 * rel.noise.granularity * 100, 1e-12
    else:
        atol, rel_var = 1e-3 * math.sqrt(rel.variance[-1]), 1e-9
    np.testing.assert_allclose(sums, rel.prefix_sums, rtol=0, atol=atol)
    assert counter.variance() == pytest.approx(float(rel.variance[-1]), rel=rel_var)


@pytest.mark.parametrize("name", FAMILIES)
def test_released_encoding_is_on_the_lattice(name):
    rel = FAMILIES[name].release(np.ones(100), epsilon=1.0, delta=1e-6, bound=1.0, seed=0)
    units = rel.encoded / rel.noise.granularity
    assert np.array_equal(units, np.rint(units))


@pytest.mark.parametrize("name", FAMILIES)
def test_bad_inputs_are_refused_before_any_draw(name):
    fam = FAMILIES[name]
    with pytest.raises(ParameterError, match="'delta'"):
        fam.release([1.0], epsilon=1.0, delta=0.0, bound=1.0, seed=0)
    with pytest.raises(ParameterError, match="'epsilon'"):
        fam.variance(4, epsilon=-1.0, delta=1e-6, bound=1.0)
    with pytest.raises(ParameterError, match="'bound'"):
        fam.counter(4, epsilon=1.0, delta=1e-6, bound=0.0)
    with pytest.raises(DomainError, match="'values'"):
        fam.release([2.0], epsilon=1.0, delta=1e-6, bound=1.0, seed=0)
    counter = fam.counter(1, epsilon=1.0, delta=1e-6, bound=1.0, seed=0)
    counter.push(0.5)
    with pytest.raises(ParameterError, match="sized for n=1"):
        counter.push(0.5)


@pytest.mark.parametrize(
    "make",
    [
        lambda: SqrtFactorisationCounter(3, epsilon=1.0, delta=1e-6, bound=1.0, seed=4),
        lambda: BLTCounter(3, epsilon=1.0, delta=1e-6, bound=1.0, seed=4),
        lambda: UnboundedBLTCounter(epsilon=1.0, delta=1e-6, bound=1.0, seed=4),
    ],
    ids=["sqrt_factorisation", "blt", "unbounded_blt"],
)
def test_push_clamps_out_of_range_values_and_refuses_nan(make):
    # a private value outside [0, B] is clamped, never an error (an error would reveal it)
    a, b = make(), make()
    assert a.push(5.0) == b.push(1.0)
    assert a.push(-2.0) == b.push(0.0)
    with pytest.raises(DomainError, match="NaN"):
        a.push(float("nan"))
    with pytest.raises(DomainError, match="real number"):
        a.push("1")
