"""ToPL ([ToPS21]): EMS distribution recovery ([SW20]), the threshold plan, the release.

EM recovers known distributions (and the check rejects a wrong one); θ is the exact minimiser
of the documented predicted error, sensible on known distributions and monotone in r and ε;
the predicted error matches the Monte Carlo range-query MSE (statistical); the release is
unbiased, reproducible and validates every input before drawing.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _recording_bits import RecordingBits
from scipy import stats

from mechanisms import (
    Budget,
    BudgetExceededError,
    BudgetLedger,
    DistributionFit,
    DomainError,
    HybridMechanism,
    LocalDP,
    ParameterError,
    SquareWave,
    bit_source,
    plan_topl_threshold,
    range_length_moments,
    square_wave_distribution,
    topl_release,
)


def test_recording_bits_records_draws():  # the helper must be able to fail the tests below
    bits = RecordingBits()
    topl_release(np.ones(20), bound=2.0, epsilon=1.0, time_lag=10, bins=4, seed=bits)
    assert bits.words > 0


def _fit(probabilities, edges=None) -> DistributionFit:
    p = np.asarray(probabilities, dtype=np.float64)
    return DistributionFit(
        edges=np.linspace(0.0, 1.0, p.size + 1) if edges is None else edges,
        probabilities=p / p.sum(),
        iterations=0,
        converged=True,
        log_likelihood=0.0,
        n_reports=0,
        smoothing=False,
    )


def _sample_fit(fit: DistributionFit, size: int, rng) -> np.ndarray:
    """Values in [0, 1] drawn from the fit's own model (uniform inside each bin)."""
    d = fit.probabilities.size
    k = rng.choice(d, size=size, p=fit.probabilities)
    return (k + rng.uniform(0.0, 1.0, size)) / d


# -- EM / EMS --------------------------------------------------------------------------------------


def _sup_cdf_gap(fit: DistributionFit, cdf) -> float:
    grid = np.linspace(0.0, 1.0, 201)
    return float(np.max(np.abs(fit.cdf(grid) - cdf(grid))))


@pytest.mark.statistical
@pytest.mark.parametrize("smoothing", [True, False])
def test_em_recovers_a_beta_distribution(smoothing):
    truth = stats.beta(2.0, 5.0)
    x = truth.rvs(size=50_000, random_state=np.random.default_rng(101))
    sw = SquareWave(epsilon=2.0)
    fit = square_wave_distribution(
        sw.report(x, bit_source(7)), mechanism=sw, bins=64, smoothing=smoothing
    )
    assert fit.converged and fit.smoothing is smoothing and fit.n_reports == x.size
    assert (fit.probabilities >= 0).all() and fit.probabilities.sum() == pytest.approx(1.0)
    assert _sup_cdf_gap(fit, truth.cdf) < 0.03
    assert abs(fit.mean() - truth.mean()) < 0.01
    # Power: the same check rejects the mirrored distribution and a uniform one.
    assert _sup_cdf_gap(fit, stats.beta(5.0, 2.0).cdf) > 0.3
    assert _sup_cdf_gap(fit, stats.uniform.cdf) > 0.1


@pytest.mark.statistical
def test_em_recovers_a_two_point_mixture_with_smoothing():
    rng = np.random.default_rng(102)
    x = np.where(rng.uniform(size=60_000) < 0.7, 0.2, 0.8) + rng.normal(0.0, 0.02, 60_000)
    x = np.clip(x, 0.0, 1.0)
    sw = SquareWave(epsilon=3.0)
    fit = square_wave_distribution(sw.report(x, bit_source(8)), mechanism=sw, bins=32)
    assert fit.cdf(0.5) == pytest.approx(0.7, abs=0.03)
    mid = 0.5 * (fit.edges[:-1] + fit.edges[1:])
    near = (np.abs(mid - 0.2) < 0.1) | (np.abs(mid - 0.8) < 0.1)
    assert fit.probabilities[near].sum() > 0.85


def test_em_on_reports_of_one_value_concentrates_there():
    sw = SquareWave(epsilon=4.0)
    y = sw.report(np.full(20_000, 0.95), bit_source(9))
    em = square_wave_distribution(y, mechanism=sw, bins=10, smoothing=False)
    assert int(np.argmax(em.probabilities)) == 9 and em.probabilities[9] > 0.8
    ems = square_wave_distribution(y, mechanism=sw, bins=10)  # smoothing spreads it a little
    assert int(np.argmax(ems.probabilities)) == 9 and ems.probabilities[8:].sum() > 0.8


def test_em_stops_at_max_iter_without_converging():
    sw = SquareWave(epsilon=1.0)
    y = sw.report(np.full(1000, 0.5), bit_source(10))
    fit = square_wave_distribution(y, mechanism=sw, bins=16, max_iter=3, tol=1e-12)
    assert fit.iterations == 3 and not fit.converged


def test_em_rejects_reports_that_are_not_square_wave_reports():
    sw = SquareWave(epsilon=1.0)
    with pytest.raises(DomainError, match="Square Wave reports"):
        square_wave_distribution([0.1 + 2**-30], mechanism=sw, bins=8)  # off the lattice
    with pytest.raises(DomainError):
        square_wave_distribution([1.0 + sw.b_lattice + 0.01], mechanism=sw, bins=8)
    with pytest.raises(ParameterError, match="'mechanism'"):
        square_wave_distribution([0.0], mechanism=HybridMechanism(epsilon=1.0), bins=8)
    for kw in ({"bins": 1}, {"bins": 5000}, {"smoothing": 1}, {"tol": 0}, {"max_iter": 0}):
        with pytest.raises(ParameterError):
            square_wave_distribution([0.0], mechanism=sw, **{"bins": 8, **kw})


# -- the threshold plan -------------------------------------------------------------------------


def test_range_length_moments_are_exact():
    for r in (1, 2, 7, 50):
        i, j = np.meshgrid(np.arange(r), np.arange(r))
        ell = np.abs(i - j) + 1.0
        e1, e2 = range_length_moments(r)
        assert e1 == pytest.approx(ell.mean(), rel=1e-12)
        assert e2 == pytest.approx((ell**2).mean(), rel=1e-12)


def _brute_error(fit, theta_u, *, bound, epsilon, steps, weight, sub=2000):
    """The documented predicted error by brute-force numerical integration over each bin."""
    hm = HybridMechanism(epsilon=epsilon)
    d = fit.probabilities.size
    u = (np.arange(d)[:, None] + (np.arange(sub)[None, :] + 0.5) / sub) / d  # midpoints
    w = fit.probabilities[:, None] / sub
    v = u * bound
    theta = theta_u * bound
    t = 2.0 * np.minimum(v, theta) / theta - 1.0
    noise = float(np.sum(w * theta**2 / 4.0 * hm.variance(t)))
    excess = np.maximum(v - theta, 0.0)
    bias = float(np.sum(w * excess))
    var_trunc = float(np.sum(w * excess**2)) - bias**2
    e1, _ = range_length_moments(steps)
    return e1 * (noise + var_trunc) + weight * steps**2 * bias**2


@pytest.mark.parametrize("eps", [0.3, 1.0])
def test_plan_error_matches_brute_force_integration(eps):
    fit = _fit(np.random.default_rng(3).uniform(0.0, 1.0, 12) ** 3)
    plan = plan_topl_threshold(fit, bound=7.0, epsilon=eps, steps=500, bias_weight=1 / 6)
    for k in (0, 3, 7, 11):
        brute = _brute_error(fit, fit.edges[k + 1], bound=7.0, epsilon=eps, steps=500, weight=1 / 6)
        assert plan.predicted_error[k] == pytest.approx(brute, rel=1e-5)
    assert plan.threshold == plan.candidates[int(np.argmin(plan.predicted_error))]
    assert np.allclose(plan.candidates, 7.0 * fit.edges[1:])


def test_plan_threshold_on_a_point_mass_is_the_edge_above_it():
    p = np.zeros(64)
    p[20] = 1.0  # all the mass in [20/64, 21/64)
    plan = plan_topl_threshold(_fit(p), bound=64.0, epsilon=1.0, steps=10_000)
    assert plan.threshold == 21.0  # no bias at 21, more noise above, bias below
    assert plan.bias[20] == 0.0 and plan.bias[19] == pytest.approx(0.5)


def test_plan_threshold_is_the_maximum_when_bias_dominates():
    p = np.full(16, 1.0)
    plan = plan_topl_threshold(_fit(p), bound=1.0, epsilon=5.0, steps=10**7)
    assert plan.threshold == 1.0


def _exponential_fit(d: int = 128, scale: float = 0.08) -> DistributionFit:
    edges = np.linspace(0.0, 1.0, d + 1)
    return _fit(np.diff(stats.expon(scale=scale).cdf(edges)))


def test_plan_threshold_grows_with_the_number_of_steps_and_with_epsilon():
    fit = _exponential_fit()
    by_r = [
        plan_topl_threshold(fit, bound=10.0, epsilon=1.0, steps=r).threshold
        for r in (10, 100, 1_000, 10_000, 100_000, 1_000_000)
    ]
    assert np.all(np.diff(by_r) >= 0) and by_r[-1] > by_r[0]
    by_eps = [
        plan_topl_threshold(fit, bound=10.0, epsilon=e, steps=100_000).threshold
        for e in (0.1, 0.3, 1.0, 2.0, 5.0, 20.0)
    ]
    assert np.all(np.diff(by_eps) >= 0) and by_eps[-1] > by_eps[0]
    # and it sits in the tail of the distribution: above its median, inside the domain
    assert 10.0 * 0.08 * math.log(2) < by_r[3] < 10.0


@pytest.mark.statistical
@pytest.mark.parametrize(("theta_k", "weight"), [(3, 1 / 6), (9, 1 / 6)])
def test_predicted_error_matches_monte_carlo_range_queries(theta_k, weight):
    """With i.i.d. values from the fit and uniform queries, the exact weight (E[ℓ²] ≈ r²/6)
    predicts the realised MSE; the notes' weight r²/24 does not when the bias matters."""
    p = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 1.0, 0.5, 0.5, 0.2, 0.2, 0.1, 0.1])
    fit = _fit(p)
    bound, eps, r, runs, queries = 12.0, 1.0, 400, 600, 40
    plan = plan_topl_threshold(fit, bound=bound, epsilon=eps, steps=r, bias_weight=weight)
    theta = plan.candidates[theta_k]
    hm = HybridMechanism(epsilon=eps)
    rng = np.random.default_rng(200 + theta_k)
    v = bound * _sample_fit(fit, runs * r, rng).reshape(runs, r)
    t = 2.0 * np.minimum(v, theta) / theta - 1.0
    est = theta * (hm.report(t.ravel(), bit_source(300 + theta_k)).reshape(runs, r) + 1) / 2
    cum_err = np.concatenate([np.zeros((runs, 1)), np.cumsum(est - v, axis=1)], axis=1)
    ij = np.sort(rng.integers(0, r, size=(runs, queries, 2)), axis=2)
    rows = np.arange(runs)[:, None]
    sq = (cum_err[rows, ij[..., 1] + 1] - cum_err[rows, ij[..., 0]]) ** 2
    per_run = sq.mean(axis=1)  # runs are independent; queries within a run are not
    mse, se = per_run.mean(), per_run.std() / math.sqrt(runs)
    predicted = plan.predicted_error[theta_k]
    exact_e2 = range_length_moments(r)[1]
    predicted += (exact_e2 - r * r / 6.0) * plan.bias[theta_k] ** 2  # finite-r correction
    assert abs(mse - predicted) < 4.5 * se
    notes = plan_topl_threshold(fit, bound=bound, epsilon=eps, steps=r).predicted_error[theta_k]
    if plan.bias[theta_k] > 0.1:  # power: the bias term's weight is visible
        assert abs(mse - notes) > 4.5 * se


# -- the release ---------------------------------------------------------------------------------


def _stream(n: int = 6000, seed: int = 0) -> np.ndarray:
    return np.minimum(np.random.default_rng(seed).exponential(1.0, n), 20.0)


KW = {"bound": 20.0, "epsilon": 1.0, "time_lag": 2000, "bins": 64}


def test_release_structure_and_guarantee():
    x = _stream()
    ledger = BudgetLedger(Budget(2.0))
    rel = topl_release(x, **KW, seed=1, ledger=ledger)
    assert rel.values.shape == (4000,) and rel.n == 6000 and rel.time_lag == 2000
    assert not rel.values.flags.writeable
    assert rel.threshold in rel.plan.candidates and 0 < rel.threshold <= 20.0
    assert rel.plan.steps == 4000 and rel.fit.n_reports == 2000
    assert isinstance(rel.guarantee.unit, LocalDP) and rel.guarantee.budget == Budget(1.0)
    assert ledger.remaining_epsilon == pytest.approx(1.0)
    assert ledger.charges[0].label == "topl_release"
    hm = HybridMechanism(epsilon=1.0)
    assert rel.variance == pytest.approx(rel.threshold**2 / 4 * hm.max_variance)
    assert rel.range_variance(2010, 2019) == pytest.approx(10 * rel.variance)  # input steps
    assert rel.range_sum(2010, 2019).std_error == pytest.approx(np.sqrt(10 * rel.variance))


def test_release_is_square_wave_then_hybrid_on_one_bit_source():
    x = _stream()
    rel = topl_release(x, **KW, seed=2)
    bits = bit_source(2)
    sw = SquareWave(epsilon=1.0)
    fit = square_wave_distribution(sw.report(x[:2000] / 20.0, bits), mechanism=sw, bins=64)
    plan = plan_topl_threshold(fit, bound=20.0, epsilon=1.0, steps=4000)
    assert plan.threshold == rel.threshold
    t = 2.0 * np.minimum(x[2000:], plan.threshold) / plan.threshold - 1.0
    expected = plan.threshold * (HybridMechanism(epsilon=1.0).report(t, bits) + 1.0) / 2.0
    assert np.array_equal(rel.values, expected)


def test_same_seed_same_release_and_range_sums_are_sums():
    x = _stream()
    a, b = topl_release(x, **KW, seed=3), topl_release(x, **KW, seed=3)
    assert np.array_equal(a.values, b.values) and a.threshold == b.threshold
    m = a.time_lag  # range_sum counts input steps, values the released ones
    for i, j in ((0, 0), (0, 3999), (17, 1234), (3999, 3999)):
        got = a.range_sum(m + i, m + j)
        assert got == pytest.approx(a.values[i : j + 1].sum(), rel=1e-9, abs=1e-9)
    assert not np.array_equal(a.values, topl_release(x, **KW, seed=4).values)


def test_smoothed_keeps_block_sums():
    rel = topl_release(_stream(), **KW, seed=5)
    s = rel.smoothed(48)
    assert s.shape == rel.values.shape
    assert np.allclose(
        s[:3984].reshape(-1, 48).sum(axis=1), rel.values[:3984].reshape(-1, 48).sum(1)
    )
    assert s[3984:].sum() == pytest.approx(rel.values[3984:].sum())  # the short last block
    assert np.all(s[:48] == s[0])
    assert np.array_equal(rel.smoothed(1), rel.values)


@pytest.mark.statistical
def test_release_estimates_are_unbiased_for_the_clipped_values():
    x = _stream(n=44_000, seed=6)
    rel = topl_release(x, **dict(KW, time_lag=4000), seed=6)
    clipped = np.minimum(x[4000:], rel.threshold)
    err = rel.values - clipped
    assert abs(err.mean()) < 4.5 * math.sqrt(rel.variance / err.size)
    assert np.mean(err**2) == pytest.approx(rel.variance, rel=0.03)  # ε > 0.61: exact
    assert rel.threshold > np.quantile(x, 0.9)


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"values": [1.0, np.nan, 2.0]}, DomainError, "finite"),
        ({"values": [1.0, 25.0, 2.0]}, DomainError, "lie in"),
        ({"values": [-0.5, 1.0, 2.0]}, DomainError, "lie in"),
        ({"values": [1.0]}, DomainError, "at least 2"),
        ({"values": [[1.0, 2.0]]}, DomainError, "one-dimensional"),
        ({"bound": 0.0}, ParameterError, "'bound'"),
        ({"epsilon": 0.0}, ParameterError, "'epsilon'"),
        ({"epsilon": 51.0}, ParameterError, "'epsilon'"),
        ({"time_lag": 0}, ParameterError, "'time_lag'"),
        ({"time_lag": 3}, ParameterError, "'time_lag'"),
        ({"time_lag": 1.5}, ParameterError, "'time_lag'"),
        ({"bins": 1}, ParameterError, "'bins'"),
        ({"smoothing": "yes"}, ParameterError, "'smoothing'"),
        ({"bias_weight": -1.0}, ParameterError, "'bias_weight'"),
        ({"ledger": 1.0}, ParameterError, "'ledger'"),
    ],
)
def test_bad_inputs_raise_before_drawing_or_charging(kw, error, match):
    args = {"values": [1.0, 2.0, 3.0], "bound": 20.0, "epsilon": 1.0, "time_lag": 1, "bins": 4}
    args.update(kw)
    bits = RecordingBits()
    with pytest.raises(error, match=match) as info:
        topl_release(**args, seed=bits)
    assert bits.words == 0
    assert "25" not in str(info.value)  # no data values in messages


def test_overspending_ledger_refuses_before_drawing():
    bits = RecordingBits()
    ledger = BudgetLedger(Budget(0.5))
    with pytest.raises(BudgetExceededError):
        topl_release([1.0, 2.0, 3.0], bound=5.0, epsilon=1.0, time_lag=1, seed=bits, ledger=ledger)
    assert bits.words == 0


def test_range_queries_and_plan_validate():
    rel = topl_release(_stream(300), **dict(KW, time_lag=100), seed=7)
    for i, j in ((-1, 3), (105, 104), (100, 300), (101.0, 103), (0, 103), (99, 103)):
        with pytest.raises(ParameterError):
            rel.range_sum(i, j)
    with pytest.raises(ParameterError, match="'window'"):
        rel.smoothed(0)
    with pytest.raises(ParameterError, match="'fit'"):
        plan_topl_threshold(np.ones(3), bound=1.0, epsilon=1.0, steps=10)
    with pytest.raises(ParameterError, match="'steps'"):
        plan_topl_threshold(rel.fit, bound=1.0, epsilon=1.0, steps=0)
