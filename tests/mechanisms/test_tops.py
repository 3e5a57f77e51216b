"""ToPS perturber, stream and batch ([ToPS21]): shape, consistency, online = offline, range sums,
streaming, budgets and bad inputs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _recording_bits import RecordingBits as _RecordingBits
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanisms import (
    SMOOTHERS,
    Budget,
    BudgetExceededError,
    BudgetLedger,
    DomainError,
    ParameterError,
    ToPSStream,
    binary_tree_release,
    bit_source,
    consistent_tree,
    tops_leaf_size,
    tops_levels,
    tops_perturb,
    tops_release,
    tops_threshold,
)
from mechanisms.tops._variance import leaf_variance_units, mean_query_units

B = 20.0


class RecordingBits(_RecordingBits):
    """Recording bits that refuse to spawn (every draw is counted here)."""

    def __init__(self, seed: int = 0, *, refuse: bool = False) -> None:
        super().__init__(seed, refuse=refuse, spawn=False)


def _stream(seed: int = 0, n: int = 3000) -> np.ndarray:
    return np.random.default_rng(seed).exponential(2.0, n).clip(0, B)


def _check_consistent(nodes, fanout):
    """Every released parent equals the sum of its (released) children, exactly."""
    for h in range(1, len(nodes)):
        parents = nodes[h]
        kids = nodes[h - 1][: parents.size * fanout].reshape(-1, fanout).sum(axis=1)
        assert np.array_equal(kids, parents), h


KW = {"bound": B, "epsilon_threshold": 1.0, "epsilon_perturb": 1.0, "time_lag": 500}


# -- shape: the pruning rule and the levels ------------------------------------------------------


def test_leaf_size_is_the_best_power_of_the_fanout():
    for r, eps, f in itertools.product(
        [1, 15, 16, 300, 5000, 2**20], [0.01, 0.05, 1.0, 10.0], [2, 4, 16]
    ):
        g = tops_leaf_size(r, eps, f)
        powers = [f**k for k in range(40) if f**k <= r]
        obj = [2 * (f - 1) * math.log(r / x, f) ** 3 / eps**2 + x * x / 36 for x in powers]
        assert g == powers[int(np.argmin(obj))] and g <= r
    assert (tops_leaf_size(2**20, 0.05), tops_leaf_size(2**20, 1.0)) == (256, 16)


def test_levels_minimise_the_noise_of_a_random_query():
    for r, g, f in [(1, 1, 16), (17, 1, 16), (4096, 16, 16), (100, 2, 4), (2**20, 256, 16)]:
        levels = tops_levels(r, g, f)
        one_tree = next(h for h in range(1, 40) if g * f ** (h - 1) >= r)
        cost = [h * h * mean_query_units(r, g, f, h) for h in range(1, one_tree + 1)]
        assert 1 <= levels <= one_tree and levels == int(np.argmin(cost)) + 1
    # [ToPS21]'s settings: 3 levels of g = 256 (16 trees of 2^16 steps), not one 4-level tree
    assert tops_levels(2**20, 256) == 3 and tops_levels(2**20, 16) == 4


def test_consistent_tree_is_the_least_squares_fit():
    rng = np.random.default_rng(0)
    for f, levels in [(2, 1), (2, 4), (3, 3), (4, 3), (16, 2)]:
        sizes = [f ** (levels - 1 - h) for h in range(levels)]
        noisy = [rng.normal(size=s) for s in sizes]
        # A maps the leaves to every node; OLS = BLUE for equal variances.
        a = np.vstack([np.kron(np.eye(s), np.ones(sizes[0] // s)) for s in sizes])
        x, *_ = np.linalg.lstsq(a, np.concatenate(noisy), rcond=None)
        got = consistent_tree(noisy, f)
        assert np.allclose(got[0], x, atol=1e-10)
        for h in range(levels):
            assert np.allclose(got[h], x.reshape(-1, sizes[0] // sizes[h]).sum(axis=1))


def test_leaf_variance_closed_form_matches_the_inverse_normal_matrix():
    for f, levels in [(2, 3), (4, 3), (16, 2), (3, 1)]:
        sizes = [f ** (levels - 1 - h) for h in range(levels)]
        a = np.vstack([np.kron(np.eye(s), np.ones(sizes[0] // s)) for s in sizes])
        assert leaf_variance_units(levels, f) == pytest.approx(np.linalg.inv(a.T @ a)[0, 0])


# -- the release ---------------------------------------------------------------------------------


def test_release_shapes_threshold_and_noise():
    x = _stream()
    rel = tops_release(x, **KW, seed=1)
    assert rel.n == rel.values.size == 2500 and rel.time_lag == 500
    assert rel.threshold in rel.threshold_release.candidates
    assert rel.leaf_size == tops_leaf_size(2500, 1.0) and rel.levels == tops_levels(2500, 16, 16)
    assert rel.tree_size == rel.leaf_size * 16 ** (rel.levels - 1)
    gamma = rel.noise.granularity
    assert rel.noise.scale == rel.levels * rel.threshold / 1.0 + gamma
    assert [a.size for a in rel.nodes] == [2500 // (16 * 16**h) for h in range(rel.levels)]
    assert not rel.values.flags.writeable and not rel.nodes[0].flags.writeable
    assert np.all(np.mod(rel.nodes[0] / gamma, 1) == 0)  # exact lattice values


@pytest.mark.parametrize(("fanout", "leaf"), [(16, None), (2, 1), (4, 2), (3, 5)])
def test_every_released_tree_is_consistent_and_blocks_sum_to_leaves(fanout, leaf):
    x = _stream(2, 4000)
    rel = tops_release(x, **KW, fanout=fanout, leaf_size=leaf, seed=2)
    _check_consistent(rel.nodes, fanout)
    g = rel.leaf_size
    full = rel.blocks.size * g
    sums = rel.values[:full].reshape(-1, g).sum(axis=1)
    assert np.allclose(sums, rel.blocks, rtol=1e-12, atol=1e-9)


def test_online_release_equals_the_offline_projection_with_the_same_noise():
    # Replay the draws: threshold first, then each tree's noise in turn; project P(truth + η)
    # offline tree by tree and compare with what the stream released node by node.
    x = _stream(3, 700)
    m, fanout, leaf = 200, 4, 3
    rel = tops_release(x, **dict(KW, time_lag=m), fanout=fanout, leaf_size=leaf, seed=9)
    bits = bit_source(9)
    th = tops_threshold(
        x[:m], bound=B, epsilon=1.0, horizon=500, epsilon_perturb=1.0, fanout=fanout, seed=bits
    )
    assert th.threshold == rel.threshold
    levels, gamma, size = rel.levels, rel.noise.granularity, rel.tree_size
    trees = -(-500 // size)
    assert trees >= 2  # a forest: the second tree starts when the first fills
    sizes = [fanout ** (levels - 1 - h) for h in range(levels)]
    cuts = np.cumsum([0, *sizes])
    units = np.clip(np.rint(x[m:] / gamma), 0, math.floor(rel.threshold / gamma))
    padded = np.zeros(trees * size)
    padded[: units.size] = units * gamma
    offline = [[] for _ in range(levels)]
    for t in range(trees):
        draws = rel.noise.sample(sum(sizes), bits)
        part = padded[t * size : (t + 1) * size]
        truth = [part.reshape(-1, leaf * fanout**h).sum(axis=1) for h in range(levels)]
        noisy = [truth[h] + draws[cuts[h] : cuts[h + 1]] for h in range(levels)]
        for h, level in enumerate(consistent_tree(noisy, fanout)):
            offline[h].append(level)
    for h in range(levels):
        got, ref = rel.nodes[h], np.concatenate(offline[h])
        assert got.size == 500 // (leaf * fanout**h)
        assert np.allclose(got, ref[: got.size], rtol=0, atol=fanout**h * gamma)
    truth0 = padded.reshape(-1, leaf).sum(axis=1)[: rel.blocks.size]
    assert not np.allclose(rel.blocks, truth0, atol=1.0)  # noisy


@pytest.mark.parametrize("smoother", SMOOTHERS)
def test_push_by_push_equals_chunks_equals_batch(smoother):
    x = _stream(4, 1200)
    rel = tops_release(x, **KW, smoother=smoother, fanout=4, leaf_size=4, seed=5)
    s = ToPSStream(**KW, horizon=700, smoother=smoother, fanout=4, leaf_size=4, seed=bit_source(5))
    out = [s.push(float(v)) for v in x]
    assert all(u.values.size == 0 for u in out[:499]) and out[499].threshold == rel.threshold
    assert all(u.values.size == 1 for u in out[500:])  # one final value per step, at once
    assert np.array_equal(np.concatenate([u.values for u in out]), rel.values)
    assert [u.start for u in out[500:503]] == [0, 1, 2]
    c = ToPSStream(**KW, horizon=700, smoother=smoother, fanout=4, leaf_size=4, seed=bit_source(5))
    cuts = [0, 17, 499, 500, 503, 800, 801, 1200]
    parts = [c.extend(x[a:b]) for a, b in itertools.pairwise(cuts)]
    assert np.array_equal(np.concatenate([p.values for p in parts]), rel.values)
    for a, b in zip(c.release().nodes, rel.nodes, strict=True):
        assert np.array_equal(a, b)


def test_nodes_are_released_when_their_interval_completes():
    s = ToPSStream(**dict(KW, time_lag=10), horizon=64, fanout=2, leaf_size=4, levels=5, seed=6)
    s.extend(_stream(5, 10))
    seen = {}
    for t, v in enumerate(_stream(6, 64)):
        u = s.push(float(v))
        for h, k, val in zip(u.node_levels, u.node_indices, u.node_values, strict=True):
            assert (k + 1) * 4 * 2**h == t + 1  # complete exactly now
            seen[(int(h), int(k))] = val
    assert len(seen) == 16 + 8 + 4 + 2 + 1
    rel = s.release()
    for (h, k), val in seen.items():
        assert rel.nodes[h][k] == val


def test_unbounded_stream_starts_new_trees_of_the_same_shape():
    bits = RecordingBits(7)
    s = ToPSStream(**dict(KW, time_lag=10), horizon=32, fanout=2, leaf_size=2, levels=5, seed=bits)
    s.extend(_stream(8, 10))
    after_threshold = bits.words
    s.extend(_stream(9, 100))  # 32-step trees: 4 trees (the last unfinished)
    nodes_per_tree = 16 + 8 + 4 + 2 + 1
    assert bits.words - after_threshold == 4 * 2 * nodes_per_tree  # noise drawn once per tree
    rel = s.release()
    assert rel.tree_size == 32 and [a.size for a in rel.nodes] == [50, 25, 12, 6, 3]
    _check_consistent(rel.nodes, 2)
    assert rel.range_sum(10, 109) == pytest.approx(rel.values.sum())  # input steps (m = 10)


# -- range sums ----------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(i=st.integers(0, 2499), length=st.integers(1, 2500))
def test_range_sum_equals_the_sum_of_the_smoothed_values(i, length):
    j = min(i + length - 1, 2499)
    rel = _cached_release()
    m = rel.time_lag  # range_sum counts input steps, values the released ones
    got = rel.range_sum(m + i, m + j)
    assert got == pytest.approx(rel.values[i : j + 1].sum(), rel=1e-9, abs=1e-6)


def _cached_release(cache={}):  # noqa: B006 - a module-level memo for the hypothesis test
    if "rel" not in cache:
        cache["rel"] = tops_release(_stream(10), **KW, fanout=4, leaf_size=3, seed=10)
    return cache["rel"]


def test_range_sum_brute_force_on_the_consistent_leaves():
    rel = _cached_release()
    g = rel.leaf_size
    for i, j in [(0, 2499), (0, 2), (3, 5), (1, 4), (7, 7), (2, 1502), (1500, 2499), (2496, 2499)]:
        lo, hi = -(-i // g), min((j + 1) // g, rel.blocks.size)
        if lo < hi:
            ref = rel.values[i : lo * g].sum() + rel.blocks[lo:hi].sum()
            ref += rel.values[hi * g : j + 1].sum()
        else:
            ref = rel.values[i : j + 1].sum()
        assert rel.range_sum(500 + i, 500 + j) == pytest.approx(ref, rel=1e-12, abs=1e-9)
    assert rel.time_lag == 500
    for bad in [(-1, 503), (505, 504), (500, 3000), (0, 3), (499, 503), (500.5, 503)]:
        with pytest.raises(ParameterError):
            rel.range_sum(*bad)


def test_an_almost_noiseless_release_recovers_the_clipped_range_sums():
    x = _stream(11, 5000)
    rel = tops_release(x, **dict(KW, epsilon_perturb=1e9), seed=11)
    clipped = np.minimum(x[500:], rel.threshold)
    for i, j in [(0, 4499), (100, 2000), (16, 31)]:
        assert rel.range_sum(500 + i, 500 + j) == pytest.approx(clipped[i : j + 1].sum(), abs=1e-3)


# -- accuracy and variance (statistical, seeded) -------------------------------------------------


@pytest.mark.statistical
def test_leaf_estimates_have_the_stated_variance():
    z = np.concatenate(
        [
            tops_perturb(np.zeros(4096), threshold=1.0, bound=1.0, epsilon=1.0, seed=s).blocks
            for s in range(40)
        ]
    )
    rel = tops_perturb(np.zeros(4096), threshold=1.0, bound=1.0, epsilon=1.0, seed=0)
    assert np.mean(z**2) / rel.leaf_variance == pytest.approx(1.0, abs=0.08)


@pytest.mark.statistical
def test_tops_beats_bt_with_the_bound_on_range_queries():
    x = _stream(12, 20_000)
    rng = np.random.default_rng(0)
    q = np.sort(rng.integers(0, 15_000, size=(200, 2)), axis=1)
    truth = np.concatenate([[0.0], np.cumsum(x[5000:])])
    tops_err, bt_err = [], []
    for s in range(5):
        rel = tops_release(x, **dict(KW, time_lag=5000), seed=s)
        bt = binary_tree_release(x[5000:], epsilon=1.0, bound=B, seed=s)
        for i, j in q:
            t = truth[j + 1] - truth[i]
            tops_err.append(rel.range_sum(5000 + int(i), 5000 + int(j)) - t)
            bt_err.append(bt.range_sum(int(i), int(j)) - t)
    assert np.mean(np.square(bt_err)) > 5 * np.mean(np.square(tops_err))


# -- budgets, guarantees and bad inputs ----------------------------------------------------------


def test_guarantee_is_the_parallel_composition_and_the_ledger_is_charged_once():
    ledger = BudgetLedger(Budget(1.0))
    rel = tops_release(
        _stream(), **dict(KW, epsilon_threshold=0.3, epsilon_perturb=0.7), seed=1, ledger=ledger
    )
    assert rel.guarantee.budget == Budget(0.7) and [c.budget for c in ledger.charges] == [
        Budget(0.7)
    ]
    fixed = tops_perturb(_stream(), threshold=5.0, bound=B, epsilon=0.5, seed=1)
    assert fixed.guarantee.budget == Budget(0.5) and fixed.threshold_release is None


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"values": [1.0, math.nan] * 300}, DomainError),
        ({"values": [1.0, math.inf] * 300}, DomainError),
        ({"values": [1.0, B + 1] * 300}, DomainError),
        ({"values": [1.0, -0.5] * 300}, DomainError),
        ({"values": np.ones((2, 600))}, DomainError),
        ({"values": [1.0]}, DomainError),
        ({"time_lag": 0}, ParameterError),
        ({"time_lag": 3000}, ParameterError),
        ({"time_lag": 2.0}, ParameterError),
        ({"bound": -1.0}, ParameterError),
        ({"epsilon_threshold": 0.0}, ParameterError),
        ({"epsilon_perturb": math.nan}, ParameterError),
        ({"fanout": 1}, ParameterError),
        ({"leaf_size": 0}, ParameterError),
        ({"levels": 0}, ParameterError),
        ({"levels": 100}, ParameterError),  # a tree of 16^99 leaves
        ({"smoother": "kalman"}, ParameterError),
        ({"smoothing": 2.0}, ParameterError),
        ({"candidates": [5.0, 1.0]}, ParameterError),
        ({"threshold_method": "gumbel"}, ParameterError),
        ({"shape_rule": "qardaji"}, ParameterError),
        ({"shape_share": 0.0}, ParameterError),
        ({"shape_share": 1.0}, ParameterError),
        ({"threshold_correction": "mean"}, ParameterError),
        ({"c": -1.0}, ParameterError),
        ({"ledger": "ledger"}, ParameterError),
        ({"ledger": BudgetLedger(Budget(0.5))}, BudgetExceededError),
    ],
)
def test_bad_input_raises_before_any_draw_or_charge(change, error):
    bits = RecordingBits(refuse=True)
    ledger = BudgetLedger(Budget(10.0))
    args = dict(KW, values=_stream(), seed=bits, ledger=ledger)
    args.update(change)
    with pytest.raises(error):
        tops_release(args.pop("values"), **args)
    assert bits.words == 0 and ledger.charges == ()
    if isinstance(args["ledger"], BudgetLedger):
        assert args["ledger"].charges == ()


def test_recording_bits_can_fail():  # the helper must be able to fail the test above
    with pytest.raises(AssertionError, match="bits were drawn"):
        tops_release(_stream(), **KW, seed=RecordingBits(refuse=True))


@pytest.mark.parametrize(
    ("threshold", "bound"), [(0.0, 1.0), (2.0, 1.0), (math.nan, 1.0), (True, 1.0)]
)
def test_perturb_with_a_bad_threshold_raises(threshold, bound):
    with pytest.raises(ParameterError):
        tops_perturb([0.5] * 10, threshold=threshold, bound=bound, epsilon=1.0, seed=1)


def test_stream_rejects_bad_values_without_changing_state():
    bits = RecordingBits(3)
    s = ToPSStream(**dict(KW, time_lag=5), horizon=50, seed=bits)
    s.extend([1.0] * 5)
    words, released = bits.words, s.released
    for bad in [math.nan, "x", True, 1j]:
        with pytest.raises(DomainError):
            s.push(bad)
    with pytest.raises(DomainError):
        s.extend([1.0, 2.0, math.nan])
    with pytest.raises(DomainError):
        s.extend(["1.0", "2.0"])
    assert bits.words == words and s.released == released
    assert s.push(1.0).values.size == 1


def test_stream_clamps_out_of_range_values_instead_of_raising():
    """Issue 11 §5: raising mid-stream on a value above B reveals the event; the value is
    clamped to [0, B] (the same release as pushing B) and only the analysis counts it."""
    a = ToPSStream(**dict(KW, time_lag=5), horizon=50, seed=3)
    b = ToPSStream(**dict(KW, time_lag=5), horizon=50, seed=3)
    a.extend([1.0] * 5)
    b.extend([1.0] * 5)
    out_a = [a.push(v).values for v in (-1.0, B + 1, math.inf, 2.0)]
    out_b = [b.push(v).values for v in (0.0, B, B, 2.0)]
    for x, y in zip(out_a, out_b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert a.analysis().clamped == 3 and b.analysis().clamped == 0 and a.analysis().steps == 9


def test_release_before_the_threshold_is_an_error():
    s = ToPSStream(**KW, horizon=100, seed=1)
    s.extend([1.0] * 10)
    with pytest.raises(DomainError, match="time_lag"):
        s.release()
    assert s.prediction is None and s.noise is None


def test_old_alpha_keyword_of_tops_release_and_stream_warns_and_still_works():
    new = tops_release(_stream(), **KW, smoother="exponential", smoothing=0.5, seed=4)
    with pytest.warns(DeprecationWarning, match="'alpha' parameter of tops_release is renamed"):
        old = tops_release(_stream(), **KW, smoother="exponential", alpha=0.5, seed=4)
    np.testing.assert_array_equal(old.values, new.values)
    default = tops_release(_stream(), **KW, smoother="exponential", seed=4)
    assert not np.array_equal(default.values, new.values)
    with pytest.warns(DeprecationWarning, match="'alpha' parameter of ToPSStream is renamed"):
        stream = ToPSStream(**KW, horizon=100, alpha=0.5, seed=1)
    assert stream.smoothing == 0.5
    with pytest.warns(DeprecationWarning, match="'alpha' attribute of ToPSStream"):
        assert stream.alpha == 0.5
    with pytest.raises(ParameterError, match="pass 'smoothing' only"):
        tops_release(_stream(), **KW, smoothing=0.5, alpha=0.5, seed=4)
