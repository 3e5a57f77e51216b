"""OptStream's measurements: Example 3, samplers, sensitivities, budget split, Theorem 12."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanisms import (
    DomainError,
    ParameterError,
    WAlphaIndistinguishability,
    bit_source,
    feature_answers,
    feature_noise,
    optstream_estimates,
    optstream_split,
    perturb_noise,
)
from mechanisms.optstream._sampling import (
    interpolation_matrix,
    interpolation_weights,
    l1_score,
    l1_sensitivity,
    null_rate_threshold,
    reconstruct,
    sample_equal,
    sample_l1,
)
from postproc import FeatureSet, Hierarchy, project_consistent

EXAMPLE_3 = np.array([10, 15, 20, 23, 41, 72, 55, 50, 88, 72, 40, 18], dtype=float)


def test_example_3_feature_query():
    # [FV19] Example 3: F2 = {{1..4}, {5..9}, {10..12}} (1-based) answers (68, 306, 130).
    fs = FeatureSet(
        w=12, partitions=[[[t] for t in range(12)], [range(4), range(4, 9), range(9, 12)]]
    )
    assert feature_answers(EXAMPLE_3, fs.partitions[1]).tolist() == [68.0, 306.0, 130.0]
    assert feature_answers(EXAMPLE_3, fs.partitions[0]).tolist() == EXAMPLE_3.tolist()


def test_example_3_noisy_feature_query_is_centred_with_sensitivity_w_alpha():
    x = np.broadcast_to(EXAMPLE_3, (20_000, 1, 12))
    parts = [[[t] for t in range(12)], [list(range(4)), list(range(4, 9)), list(range(9, 12))]]
    est = optstream_estimates(
        x, epsilon=3.0, k=12, sampling="equal", features=parts, windows="aligned", seed=5
    )
    noisy = est.estimates[:, 0, 12:]
    assert np.allclose(noisy.mean(axis=0), [68, 306, 130], atol=0.6)
    # ε_o = 1.5 on one feature, sensitivity w·α = 12: Laplace scale 8, variance 128.
    assert np.allclose(noisy.var(axis=0), 128.0, rtol=0.05)


def test_sample_equal():
    assert sample_equal(48, 10).tolist() == [0, 5, 10, 16, 21, 26, 31, 37, 42, 47]
    assert sample_equal(5, 5).tolist() == [0, 1, 2, 3, 4]
    assert sample_equal(5, 9).tolist() == [0, 1, 2, 3, 4]
    assert sample_equal(7, 1).tolist() == [0]


def test_l1_score_matches_eq_3():
    x = EXAMPLE_3[None, None, :]
    a, b = 2, 7
    line = x[0, 0, a] + (np.arange(12) - a) * (x[0, 0, b] - x[0, 0, a]) / (b - a)
    want = np.abs(line - x[0, 0])[a : b + 1].sum()
    assert l1_score(x, np.array([a]), b)[0] == pytest.approx(want)
    assert l1_score(np.arange(12.0)[None, None], np.array([0]), 11)[0] == 0.0  # a straight line


@settings(max_examples=200, deadline=None)
@given(
    st.integers(3, 12),
    st.data(),
)
def test_l1_score_sensitivity_theorem_6(w, data):
    # Under (w, α) neighbours (every value moves by at most α) |ΔL1^[a,b]| <= 2α(b − a − 1).
    alpha = 2.5
    x = np.array(data.draw(st.lists(st.floats(0, 100), min_size=w, max_size=w)))
    d = np.array(data.draw(st.lists(st.floats(-alpha, alpha), min_size=w, max_size=w)))
    a = data.draw(st.integers(0, w - 2))
    b = data.draw(st.integers(a + 1, w - 1))
    s1 = l1_score(x[None, None], np.array([a]), b)[0]
    s2 = l1_score((x + d)[None, None], np.array([a]), b)[0]
    assert abs(s2 - s1) <= 2 * alpha * max(b - a - 1, 0) + 1e-9


def test_l1_sampler_takes_exactly_k_samples():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1000, size=(400, 2, 24))
    for theta in (0.0, 1e9):
        mask = sample_l1(x, k=6, epsilon=0.5, alpha=1.0, theta=theta, bits=bit_source(1))
        assert (mask.sum(axis=1) == 6).all() and mask[:, 0].all()
        gaps = [np.diff(np.flatnonzero(m)).max() for m in mask]
        # Queries span at most w − k steps; the forced fill starts one step after the last.
        assert max(gaps) <= 24 - 6 + 1
    # θ huge: nothing accepted, the forced fill takes the last k − 1 steps.
    assert mask[:, 19:].all() and not mask[:, 1:19].any()


def test_l1_sampler_follows_the_signal_at_large_epsilon():
    # A kink at step 11: with little noise the score first crosses θ at step 12.
    x = np.concatenate([np.zeros(12), np.arange(1.0, 13.0) * 100.0])[None, None, :]
    x = np.repeat(x, 200, axis=0)
    mask = sample_l1(x, k=3, epsilon=1e6, alpha=1.0, theta=50.0, bits=bit_source(2))
    second = np.array([np.flatnonzero(m)[1] for m in mask])
    assert (second == 12).mean() > 0.95  # the first step off the line


def test_null_rate_threshold_gives_the_equally_spaced_rate():
    x = np.zeros((20_000, 1, 48))  # no signal: every score is 0
    th = null_rate_threshold(w=48, k=10, epsilon=0.3, alpha=1.0)
    mask = sample_l1(x, k=10, epsilon=0.3, alpha=1.0, theta=th, bits=bit_source(3))
    first_gap = np.array([np.flatnonzero(m)[1] for m in mask])
    # Acceptance ≈ k/w per step (ρ adds a little spread): mean first gap ≈ w/k.
    assert 3.5 < first_gap.mean() < 6.5
    assert null_rate_threshold(w=20, k=10, epsilon=1.0, alpha=1.0) == 0.0


@settings(max_examples=40, deadline=None)
@given(r=st.integers(1, 30), k=st.integers(1, 30), seed=st.integers(0, 2**16))
def test_interpolation_matrix_is_numpy_interp(r, k, seed):
    """Row t of M interpolates linearly between the samples around t, holds after the last."""
    rng = np.random.default_rng(seed)
    k = min(k, r)
    mask = np.zeros((3, r), dtype=bool)
    for p in range(3):
        mask[p, np.r_[0, rng.choice(np.arange(1, r), size=k - 1, replace=False)]] = True
    y = rng.normal(size=(3, 2, k))
    steps = np.arange(r, dtype=float)
    ref = np.array(
        [[np.interp(steps, np.flatnonzero(mask[p]), y[p, a]) for a in range(2)] for p in range(3)]
    )
    assert np.allclose(reconstruct(mask, y), ref, rtol=0, atol=1e-12)
    m = interpolation_matrix(mask)
    assert np.allclose(m.sum(axis=2), 1.0) and (m >= 0).all()
    assert np.allclose(interpolation_weights(mask), (m**2).sum(axis=2))


def test_reconstruct_interpolates_and_holds_after_last_sample():
    mask = np.zeros((1, 8), dtype=bool)
    mask[0, [0, 2, 5]] = True
    out = reconstruct(mask, np.array([[[0.0, 4.0, 1.0]]]))
    assert np.allclose(out[0, 0], [0.0, 2.0, 4.0, 3.0, 2.0, 1.0, 1.0, 1.0], rtol=0, atol=1e-12)


def test_sensitivities_scale_with_alpha():
    assert l1_sensitivity(48, 10, 3.0) == 228.0
    p = perturb_noise(k=10, alpha=2.0, epsilon=0.5)
    assert p.scale == pytest.approx(40.0, rel=1e-6)
    f = feature_noise(window=48, alpha=2.0, epsilon=0.5, n_coords=4)
    assert f.scale == pytest.approx(192.0, rel=1e-5)  # w·α/ε, not α/ε (Theorem 9 is wrong)
    # Exactly w(α + γ)/ε: one lattice rounding per step of the window (straddling windows).
    assert f.scale == 48 * (2.0 + f.granularity) / 0.5


@pytest.mark.parametrize("h", [1, 2, 3])
def test_split_any_window_worst_case_is_epsilon_per_level(h):
    s = optstream_split(0.9, sampling="l1", n_levels=h)
    assert s.features + 2 * (s.sample + s.perturb) == pytest.approx(0.9 / h)
    assert s.features + 2 * (s.sample + s.perturb) <= 0.9 / h
    e = optstream_split(0.9, sampling="equal", n_levels=h)
    assert e.sample == 0 and e.perturb + e.features == pytest.approx(0.9 / h)
    a = optstream_split(0.9, sampling="l1", n_levels=h, windows="aligned")
    assert a.sample == pytest.approx(0.3 / h) and a.features == pytest.approx(0.3 / h)
    n = optstream_split(0.9, sampling="equal", has_features=False)
    assert n.perturb == pytest.approx(0.9) and n.features == 0


def test_estimates_layout_and_guarantee():
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 50, size=(3, 3, 48))
    x[:, 0] = x[:, 1] + x[:, 2]
    fs = FeatureSet.default(48)
    est = optstream_estimates(
        x, epsilon=1.0, alpha=2.0, features=fs.partitions, levels=[[0], [1, 2]], seed=4
    )
    assert est.estimates.shape == (3, 3, 53) and est.variances.shape == (3, 3, 53)
    assert est.samples.shape == (3, 2, 48) and (est.samples.sum(axis=2) == 10).all()
    assert est.guarantee.unit == WAlphaIndistinguishability(w=48, alpha=2.0)
    assert est.guarantee.budget.epsilon == 1.0
    assert est.split.n_levels == 2
    again = optstream_estimates(
        x, epsilon=1.0, alpha=2.0, features=fs.partitions, levels=[[0], [1, 2]], seed=4
    )
    assert np.array_equal(est.estimates, again.estimates)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"k": 49}, ParameterError),
        ({"k": 0}, ParameterError),
        ({"epsilon": 0.0}, ParameterError),
        ({"alpha": -1.0}, ParameterError),
        ({"sampling": "random"}, ParameterError),
        ({"theta": -1.0}, ParameterError),
        ({"levels": [[0]]}, ParameterError),
    ],
)
def test_bad_parameters_raise_before_noise(kwargs, error):
    class Spy:
        calls = 0

        def random_raw(self, size):
            Spy.calls += 1
            return np.zeros(size, dtype=np.uint64)

        def spawn(self, n):
            return [self] * n

    args = {"epsilon": 1.0, "k": 10, "alpha": 1.0} | kwargs
    with pytest.raises(error):
        optstream_estimates(np.ones((2, 2, 48)), seed=Spy(), **args)
    assert Spy.calls == 0


def test_nan_values_raise_domain_error():
    x = np.ones((2, 1, 48))
    x[1, 0, 3] = np.nan
    with pytest.raises(DomainError, match="finite numbers only") as info:
        optstream_estimates(x, epsilon=1.0, seed=0)
    assert "1 entries" not in str(info.value)  # issue 11 §5: no count of private values


@pytest.mark.parametrize("sampling", ["l1", "equal"])
def test_theorem_12_bound_holds(sampling):
    # ||x* − x||_λ <= 2 ||c̃ − x||_λ for the true (consistent, non-negative) values.
    rng = np.random.default_rng(7)
    leaves = np.abs(100 + np.cumsum(rng.normal(0, 10, size=(6, 2, 48)), axis=2))
    h = Hierarchy(children={"t": ["a", "b"]})
    x = np.concatenate([leaves.sum(axis=1, keepdims=True), leaves], axis=1)
    fs = FeatureSet.default(48)
    est = optstream_estimates(
        x,
        epsilon=0.5,
        alpha=5.0,
        sampling=sampling,
        features=fs.partitions,
        levels=[[0], [1, 2]],
        seed=8,
    )
    rel = project_consistent(est.estimates, hierarchy=h, features=fs)
    truth = x @ fs.matrix.T  # every (node, part) of the truth
    wts = fs.paper_weights()
    lhs = np.sqrt((wts * (rel.parts - truth) ** 2).sum(axis=(1, 2)))
    rhs = np.sqrt((wts * (est.estimates - truth) ** 2).sum(axis=(1, 2)))
    assert (lhs <= 2 * rhs).all()
    assert (lhs <= rhs + 1e-9).all()  # a projection onto a convex set: factor 1 suffices


# -- the tail (issue 11 §1): every window of w steps, across the last full period and the tail --


def _stream_samples(w: int, k: int, r: int, sampling: str, n_full: int = 2) -> list[np.ndarray]:
    """Sample steps of a stream of ``n_full`` full periods and a tail of ``r`` steps, per run,
    through ``optstream_estimates`` exactly as ``release_optstream`` calls it."""
    rng = np.random.default_rng(w * 1000 + k * 10 + r)
    x = np.abs(100 + np.cumsum(rng.normal(0, 20, size=(8, n_full * w + r)), axis=1))
    args = {"epsilon": 1.0, "k": k, "alpha": 1.0, "sampling": sampling, "seed": 3}
    full = optstream_estimates(
        x[:, : n_full * w].reshape(8 * n_full, 1, w),
        features=[[[t] for t in range(w)]],
        **args,
    )
    masks = full.samples[:, 0].reshape(8, n_full * w)
    tails = [
        optstream_estimates(
            row[None, None, n_full * w :], features=[[[t] for t in range(r)]], window=w, **args
        ).samples[0, 0]
        for row in x
    ]
    return [np.flatnonzero(np.concatenate([m, t])) for m, t in zip(masks, tails, strict=True)]


@settings(max_examples=60)
@given(w=st.integers(2, 30), data=st.data())
def test_equal_sampling_puts_at_most_k_samples_in_every_window_with_a_tail(w, data):
    k = data.draw(st.integers(1, w))
    r = data.draw(st.integers(1, w - 1))
    steps = _stream_samples(w, k, r, "equal", n_full=2)[0]
    n_steps = 2 * w + r
    counts = [((steps >= s) & (steps < s + w)).sum() for s in range(n_steps - w + 1)]
    assert max(counts) <= k  # Perturb is calibrated for k samples per window
    assert steps[steps < 2 * w].size == 2 * min(k, w)


@pytest.mark.parametrize(("w", "k", "r"), [(48, 10, 10), (4, 2, 2), (48, 10, 47), (12, 5, 1)])
def test_l1_sampling_keeps_at_most_k_samples_in_the_tail(w, k, r):
    # The "any" split covers two periods' samplers and 2k samples; the tail must not add more.
    for steps in _stream_samples(w, k, r, "l1", n_full=1):
        assert steps[steps >= w].size <= min(k, r)
        assert steps[steps < w].size == k


def test_the_tail_keeps_the_full_periods_equal_pattern():
    # [FV19] §3.1 pattern of w = 48, k = 10, cut at r = 10: steps 0 and 5 (not 10 steps).
    est = optstream_estimates(
        np.ones((1, 1, 10)), epsilon=1.0, k=10, sampling="equal", window=48, seed=1
    )
    assert np.flatnonzero(est.samples[0, 0]).tolist() == [0, 5]


@pytest.mark.parametrize("sampling", ["l1", "equal"])
def test_several_short_periods_are_refused_before_noise(sampling):
    class Spy:
        calls = 0

        def random_raw(self, size):
            Spy.calls += 1
            return np.zeros(size, dtype=np.uint64)

        def spawn(self, n):
            return [self] * n

    with pytest.raises(ParameterError, match="short period"):
        optstream_estimates(
            np.ones((3, 1, 10)), epsilon=1.0, k=4, sampling=sampling, window=48, seed=Spy()
        )
    assert Spy.calls == 0
