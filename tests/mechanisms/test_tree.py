"""The binary-tree (BT) counter: structure, known answers, variances, consistency, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _recording_bits import RecordingBits as _RecordingBits
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from mechanisms import (
    BinaryTreeCounter,
    Budget,
    DomainError,
    EventLevel,
    ParameterError,
    TreeRelease,
    binary_tree_final_sums,
    binary_tree_noise,
    binary_tree_prefix_sums,
    binary_tree_release,
    dyadic_cover,
)
from mechanisms.counting._tree import (
    _consistent_nodes,
    _consistent_variance_units,
    _online_nodes,
    _prefix_from_nodes,
    _tree_release,
)


class RecordingBits(_RecordingBits):
    """Recording bits that refuse to spawn (every draw is counted here)."""

    def __init__(self, seed: int = 0, *, refuse: bool = False) -> None:
        super().__init__(seed, refuse=refuse, spawn=False)


class ConstantBits:
    """Zero-noise probe: both geometric draws of every discrete Laplace are equal, so K = 0."""

    def random_raw(self, size: int) -> np.ndarray:
        # Equal words give equal geometric draws G1 = G2 (here both 0), so K = 0.
        return np.full(int(size), 0xFFFF_FFFF_FFFF_F800, dtype=np.uint64)

    def spawn(self, n_children: int) -> list:
        return [ConstantBits() for _ in range(n_children)]


def _dense_design(n: int) -> np.ndarray:
    """Rows: the indicator vectors of every node (h, k), level by level."""
    rows = []
    for h in range(n.bit_length()):
        for k in range(n >> h):
            row = np.zeros(n)
            row[k << h : (k + 1) << h] = 1.0
            rows.append(row)
    return np.array(rows)


def _split_levels(flat: np.ndarray, n: int) -> tuple[np.ndarray, ...]:
    out, start = [], 0
    for h in range(n.bit_length()):
        out.append(flat[start : start + (n >> h)])
        start += n >> h
    return tuple(out)


# -- structure --------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "levels"), [(1, 1), (2, 2), (7, 3), (8, 4), (9, 4), (1000, 10)])
def test_levels_are_floor_log2_n_plus_one_and_scale_is_l_b_over_eps(n, levels):
    noise = binary_tree_noise(n, epsilon=0.5, bound=3.0)
    assert noise.sensitivity == levels * 3.0
    assert noise.scale == (levels * 3.0 + noise.granularity) / 0.5
    rel = binary_tree_release(np.ones(n), epsilon=0.5, bound=3.0, seed=1)
    assert rel.levels == levels == len(rel.nodes)
    assert [a.size for a in rel.nodes] == [n >> h for h in range(levels)]


def test_eight_steps_need_four_levels_not_log2_8():
    # Step 1 lies in [1..1], [1..2], [1..4], [1..8]: four node sums move when it changes.
    containing = [(h, k) for h in range(4) for k in range(8 >> h) if k << h < 1 <= (k + 1) << h]
    assert containing == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert binary_tree_release(np.ones(8), epsilon=1.0, bound=1.0, seed=0).levels == 4


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5000))
def test_dyadic_cover_tiles_the_prefix_exactly_once(i):
    cover = dyadic_cover(i)
    assert len(cover) == i.bit_count()
    steps = sorted(s for h, k in cover for s in range((k << h) + 1, ((k + 1) << h) + 1))
    assert steps == list(range(1, i + 1))


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 3000))
def test_each_step_lies_in_at_most_l_nodes_and_step_one_in_exactly_l(n):
    counts = np.zeros(n + 1, dtype=int)
    for h in range(n.bit_length()):
        counts[1 : ((n >> h) << h) + 1] += 1
    assert counts[1:].max() == n.bit_length() == counts[1]


def test_pak_fig1_seven_is_the_sum_of_nodes_1_4_and_5_6_and_7():
    assert dyadic_cover(7) == [(2, 0), (1, 2), (0, 6)]
    rel = binary_tree_release(np.arange(8) % 3, epsilon=1.0, bound=2.0, seed=5)
    assert rel.prefix_sums[6] == rel.nodes[2][0] + rel.nodes[1][2] + rel.nodes[0][6]
    # The zero-noise probe shows which true sums those nodes hold.
    probe = _tree_release(np.arange(8) % 3, epsilon=1.0, bound=2.0, bits=ConstantBits())
    assert (probe.nodes[2][0], probe.nodes[1][2], probe.nodes[0][6]) == (3.0, 3.0, 0.0)
    assert probe.prefix_sums[6] == 6.0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=300))
def test_zero_noise_probe_gives_exact_sums_for_every_estimate(xs):
    rel = _tree_release(xs, epsilon=1.0, bound=50.0, bits=ConstantBits())
    exact = np.cumsum(xs, dtype=np.float64)
    np.testing.assert_array_equal(rel.prefix_sums, exact)
    np.testing.assert_allclose(rel.online_prefix_sums(), exact, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(rel.consistent_prefix_sums(), exact, rtol=1e-12, atol=1e-9)


def test_inputs_off_the_lattice_are_snapped_with_bounded_error():
    xs = np.full(64, 1.0 / 3.0)
    rel = _tree_release(xs, epsilon=1.0, bound=1.0, bits=ConstantBits())
    gamma = rel.noise.granularity
    err = np.abs(rel.prefix_sums - np.cumsum(xs))
    assert np.all(err <= np.arange(1, 65) * gamma / 2)
    assert np.all(rel.prefix_sums / gamma == np.round(rel.prefix_sums / gamma))


def test_release_declares_event_level_epsilon_and_is_read_only():
    rel = binary_tree_release([0.5, 1.0, 0.0], epsilon=0.7, bound=1.0, seed=2)
    assert isinstance(rel, TreeRelease)
    assert rel.guarantee.unit == EventLevel() and rel.guarantee.budget == Budget(0.7)
    assert (rel.epsilon, rel.bound, rel.n, rel.scale) == (0.7, 1.0, 3, rel.noise.scale)
    with pytest.raises(ValueError):
        rel.prefix_sums[0] = 0.0
    with pytest.raises(ValueError):
        rel.nodes[0][0] = 0.0


def test_prefix_sums_function_and_range_sum():
    xs = np.linspace(0, 1, 50)
    rel = binary_tree_release(xs, epsilon=1.0, bound=1.0, seed=9)
    np.testing.assert_array_equal(
        binary_tree_prefix_sums(xs, epsilon=1.0, bound=1.0, seed=9), rel.prefix_sums
    )
    assert rel.range_sum(0, 4) == rel.prefix_sums[4]
    assert rel.range_sum(10, 19) == rel.prefix_sums[19] - rel.prefix_sums[9]
    for bad in [(-1, 3), (5, 4), (0, 50)]:
        with pytest.raises(ParameterError):
            rel.range_sum(*bad)


def test_variance_is_popcount_times_node_variance():
    rel = binary_tree_release(np.ones(100), epsilon=2.0, bound=1.0, seed=0)
    expected = [i.bit_count() * rel.noise.variance for i in range(1, 101)]
    np.testing.assert_array_equal(rel.variance, expected)
    counter = BinaryTreeCounter(100, epsilon=2.0, bound=1.0, seed=0)
    assert [counter.variance(i) for i in range(1, 101)] == expected


# -- streaming form ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 7, 8, 100, (1 << 15) + 3])
def test_streaming_and_batch_forms_release_identical_values(n):
    xs = np.random.default_rng(n).uniform(0.0, 4.0, n)
    rel = binary_tree_release(xs, epsilon=0.5, bound=4.0, seed=n)
    online = rel.online_prefix_sums()
    counter = BinaryTreeCounter(n, epsilon=0.5, bound=4.0, seed=n)
    got, got_online = np.empty(n), np.empty(n)
    for t, x in enumerate(xs):
        got[t] = counter.push(float(x))
        got_online[t] = counter.online_estimate()
    np.testing.assert_array_equal(got, rel.prefix_sums)
    np.testing.assert_allclose(got_online, online, rtol=1e-12, atol=1e-9 * rel.scale)
    assert counter.variance() == rel.variance[-1]


def test_counter_refuses_push_n_plus_one_without_drawing():
    bits = RecordingBits(1)
    counter = BinaryTreeCounter(3, epsilon=1.0, bound=1.0, seed=bits)
    for _ in range(3):
        counter.push(0.5)
    bits.refuse = True
    with pytest.raises(DomainError, match="n=3"):
        counter.push(0.5)


@pytest.mark.parametrize("x", [math.nan, "1", True, None, 1j])
def test_counter_rejects_non_numbers_before_drawing(x):
    counter = BinaryTreeCounter(4, epsilon=1.0, bound=1.0, seed=RecordingBits(refuse=True))
    with pytest.raises(DomainError):
        counter.push(x)
    assert counter.steps == 0


@pytest.mark.parametrize(
    ("x", "clamped"), [(math.inf, 1.0), (-math.inf, 0.0), (-0.1, 0.0), (1.5, 1.0)]
)
def test_counter_clamps_out_of_range_values_instead_of_raising(x, clamped):
    """Issue 11 §5: an exception mid-stream would reveal the event; the value is clamped to
    [0, B] and only the analysis object counts it."""
    stream = [0.25, x, 0.5]
    counter = BinaryTreeCounter(3, epsilon=1.0, bound=1.0, seed=5)
    out = [counter.push(v) for v in stream]
    ref = BinaryTreeCounter(3, epsilon=1.0, bound=1.0, seed=5)
    assert out == [ref.push(v) for v in (0.25, clamped, 0.5)]
    assert counter.analysis().clamped == 1 and ref.analysis().clamped == 0
    assert counter.analysis().steps == 3


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n": 0, "epsilon": 1.0, "bound": 1.0},
        {"n": 2.5, "epsilon": 1.0, "bound": 1.0},
        {"n": 4, "epsilon": 0.0, "bound": 1.0},
        {"n": 4, "epsilon": 1.0, "bound": -1.0},
        {"n": 4, "epsilon": math.nan, "bound": 1.0},
    ],
)
def test_counter_rejects_bad_parameters(kwargs):
    with pytest.raises(ParameterError):
        BinaryTreeCounter(kwargs.pop("n"), seed=RecordingBits(refuse=True), **kwargs)


# -- bad input to the batch forms -------------------------------------------------------------

_BAD = [
    ([1.0, math.nan], 1.0, 1.0, DomainError),
    ([1.0, math.inf], 1.0, 1.0, DomainError),
    ([-math.inf, 0.0], 1.0, 1.0, DomainError),
    ([0.5, -0.01], 1.0, 1.0, DomainError),
    ([0.5, 1.01], 1.0, 1.0, DomainError),
    ([], 1.0, 1.0, DomainError),
    ([[0.5, 0.5]], 1.0, 1.0, DomainError),
    ([0.5], 0.0, 1.0, ParameterError),
    ([0.5], -1.0, 1.0, ParameterError),
    ([0.5], math.inf, 1.0, ParameterError),
    ([0.5], 1.0, 0.0, ParameterError),
    ([0.5], 1.0, -2.0, ParameterError),
]


@pytest.mark.parametrize(("values", "eps", "bound", "error"), _BAD)
@pytest.mark.parametrize(
    "fn", [binary_tree_release, binary_tree_prefix_sums, binary_tree_final_sums]
)
def test_bad_input_raises_typed_error_before_any_bits_are_drawn(fn, values, eps, bound, error):
    bits = RecordingBits(refuse=True)
    with pytest.raises(error):
        fn(values, epsilon=eps, bound=bound, seed=bits)


def test_error_messages_do_not_contain_data_values():
    with pytest.raises(DomainError) as info:
        binary_tree_release([0.123456, 7.654321], epsilon=1.0, bound=1.0, seed=0)
    # Issue 11 §5: the rule, never the values nor a count of offending private values.
    assert "7.654321" not in str(info.value) and "entries" not in str(info.value)
    assert "must lie in [0, 1]" in str(info.value)


def test_the_refusing_probe_does_refuse():
    # Guard for the tests above: a valid call on the probe must fail.
    with pytest.raises(AssertionError, match="bits were drawn"):
        binary_tree_release([0.5], epsilon=1.0, bound=1.0, seed=RecordingBits(refuse=True))


# -- the final-sum shortcut -------------------------------------------------------------------


def test_final_sums_draw_only_the_popcount_n_nodes_and_match_the_full_release():
    n, reps = 1000, 2000  # popcount(1000) = 6
    xs = np.random.default_rng(3).uniform(0.0, 2.0, n)
    bits = RecordingBits(4)
    fast = binary_tree_final_sums(xs, epsilon=1.0, bound=2.0, repetitions=reps, seed=bits)
    assert bits.words == 2 * reps * 6  # two geometric words per discrete Laplace draw
    probe = _tree_release(xs, epsilon=1.0, bound=2.0, bits=ConstantBits())
    no_noise = binary_tree_final_sums(xs, epsilon=1.0, bound=2.0, seed=ConstantBits())
    assert no_noise[0] == pytest.approx(probe.prefix_sums[-1], rel=1e-15)
    full = np.array(
        [
            binary_tree_release(xs, epsilon=1.0, bound=2.0, seed=s).prefix_sums[-1]
            for s in range(1000)
        ]
    )
    assert stats.ks_2samp(fast, full).pvalue > 1e-3
    assert stats.ks_2samp(fast, full * 1.5 - 0.5 * probe.prefix_sums[-1]).pvalue < 1e-3


# -- the stated variance is the real one ------------------------------------------------------


def _variance_z(errors: np.ndarray, variance: float, excess_kurtosis: float) -> float:
    """z-score of the sample variance (known mean 0): Var(S²) = σ⁴(2 + κ)/N."""
    s2 = float(np.mean(errors**2))
    return (s2 - variance) / (variance * math.sqrt((2.0 + excess_kurtosis) / errors.size))


@pytest.mark.statistical
def test_final_sum_error_matches_stated_variance_2000_runs():
    n, runs = 1000, 2000
    xs = np.random.default_rng(0).uniform(0.0, 1.0, n)
    seeds = np.random.SeedSequence(20240501).spawn(runs)
    errors = (
        np.array(
            [binary_tree_release(xs, epsilon=1.0, bound=1.0, seed=s).prefix_sums[-1] for s in seeds]
        )
        - _tree_release(xs, epsilon=1.0, bound=1.0, bits=ConstantBits()).prefix_sums[-1]
    )
    stated = binary_tree_release(xs, epsilon=1.0, bound=1.0, seed=0).variance[-1]
    kurt = 3.0 / n.bit_count()  # sum of popcount(n) i.i.d. Laplace draws
    assert abs(np.mean(errors)) < 4 * math.sqrt(stated / runs)
    assert abs(_variance_z(errors, stated, kurt)) < 4.0
    # Power: the same test rejects a variance off by 30 % either way.
    assert abs(_variance_z(errors, 1.3 * stated, kurt)) > 4.0
    assert abs(_variance_z(errors, 0.7 * stated, kurt)) > 4.0


# -- variance reduction -----------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200), st.integers(0, 2**32 - 1))
def test_consistent_nodes_sum_to_their_parents_and_are_least_squares(n, seed):
    rel = binary_tree_release(np.zeros(n), epsilon=1.0, bound=1.0, seed=seed)
    nodes = rel.consistent_nodes()
    for h in range(1, rel.levels):
        m = nodes[h].size
        np.testing.assert_allclose(
            nodes[h], nodes[h - 1][: 2 * m].reshape(m, 2).sum(axis=1), rtol=1e-9, atol=1e-6
        )
    if n <= 64:
        design = _dense_design(n)
        lsq = np.linalg.lstsq(design, np.concatenate(rel.nodes), rcond=None)[0]
        np.testing.assert_allclose(nodes[0], lsq, rtol=1e-9, atol=1e-6 * rel.scale)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 16, 31, 45, 64])
def test_stated_variances_equal_those_of_the_linear_estimators(n):
    # Both estimators are linear in the noisy nodes: push each unit vector through them.
    size = 2 * n - n.bit_count()
    online_map, consistent_map = np.empty((n, size)), np.empty((n, size))
    for j in range(size):
        unit = _split_levels(np.eye(size)[j], n)
        online = _online_nodes(unit, 1.0)
        online_map[:, j] = _prefix_from_nodes(online, n)
        consistent_map[:, j] = np.cumsum(_consistent_nodes(online)[0])
    rel = binary_tree_release(np.zeros(n), epsilon=1.0, bound=1.0, seed=0)
    v = rel.noise.variance
    np.testing.assert_allclose(rel.online_variance(), v * (online_map**2).sum(1), rtol=1e-12)
    np.testing.assert_allclose(rel.consistent_variance(), v * (consistent_map**2).sum(1), rtol=1e-9)
    # ... and the closed form of the BLUE variance is the dense (AᵀA)⁻¹ one.
    design = _dense_design(n)
    tri = np.tril(np.ones((n, n)))
    dense = np.einsum("ij,jk,ik->i", tri, np.linalg.inv(design.T @ design), tri)
    np.testing.assert_allclose(_consistent_variance_units(n, n.bit_length()), dense, rtol=1e-10)
    assert np.all(rel.consistent_variance() <= rel.online_variance() * (1 + 1e-12))
    assert np.all(rel.online_variance() <= rel.variance * (1 + 1e-12))


@pytest.mark.statistical
def test_consistency_gain_is_real_over_many_runs():
    n, runs = 1024, 600
    xs = np.random.default_rng(1).uniform(0.0, 1.0, n)
    truth = _tree_release(xs, epsilon=1.0, bound=1.0, bits=ConstantBits()).prefix_sums
    err_bt, err_on, err_cons = (np.empty((runs, n)) for _ in range(3))
    for r, seed in enumerate(np.random.SeedSequence(77).spawn(runs)):
        rel = binary_tree_release(xs, epsilon=1.0, bound=1.0, seed=seed)
        err_bt[r] = rel.prefix_sums - truth
        err_on[r] = rel.online_prefix_sums() - truth
        err_cons[r] = rel.consistent_prefix_sums() - truth
    for err, stated in [
        (err_bt, rel.variance),
        (err_on, rel.online_variance()),
        (err_cons, rel.consistent_variance()),
    ]:
        ratio = np.mean(err**2) / np.mean(stated)  # pooled over i; correlated, hence 10 %
        assert 0.9 < ratio < 1.1
        assert abs(np.mean(err)) < 0.05 * math.sqrt(np.mean(stated))  # unbiased
    gain = np.mean(err_bt**2) / np.mean(err_cons**2)
    assert gain == pytest.approx(rel.variance.mean() / rel.consistent_variance().mean(), rel=0.1)
    assert gain > 2.0


def test_blocks_of_steps_streaming_equals_batch_and_zero_noise_is_exact():
    # Three full blocks of 2^16 steps and a partial one: block ends complete levels above the
    # block (tz(2^17) = 17), which the batch computes from per-level state.
    n = 3 * (1 << 16) + 12_345
    xs = np.random.default_rng(5).integers(0, 4, n).astype(float)
    rel = binary_tree_release(xs, epsilon=1.0, bound=3.0, seed=9)
    counter = BinaryTreeCounter(n, epsilon=1.0, bound=3.0, seed=9)
    streamed = np.array([counter.push(x) for x in xs])
    np.testing.assert_array_equal(streamed, rel.prefix_sums)
    exact = binary_tree_release(xs, epsilon=1.0, bound=3.0, seed=ConstantBits())
    np.testing.assert_array_equal(exact.prefix_sums, np.cumsum(xs))
    for h, level in enumerate(exact.nodes):
        m = n >> h
        np.testing.assert_array_equal(level, xs[: m << h].reshape(m, 1 << h).sum(axis=1))
