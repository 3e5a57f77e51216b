"""planner.StreamPlanner (issue 22.1): state, plan, update; subtrees; no dense n x n; exact shares;
the window rule across calls (issue 24.1)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from _golden_autoplan import frame, tree

import dpstream
from dpstream.pipelines import _autoplan as ap
from dpstream.pipelines._period_steps import as_measurement
from mechanisms import ParameterError
from mechanisms.optstream._sampling import sample_equal
from planner import PeriodPlan
from planner._roughness import period_roughness
from planner._stream_plan import share_grid, window_budget, within_budget
from planner._stream_planner import (
    LOOKBACK,
    Measurement,
    StreamPlanner,
    carried_previous,
    subtree_config,
)
from postproc import Hierarchy


def _cfg(children: dict | None, nodes: list, **kw):
    h = None if children is None else Hierarchy(children=children)
    base = dict(epsilon=1.0, alpha=5.0, w=48, delta=None, noise="laplace", target="all",
                level_shares=None, prior=False)  # fmt: skip
    return h, ap._config(hierarchy=h, nodes=nodes if h is None else list(h.nodes), **{**base, **kw})


def _periods(h: Hierarchy | None, df: pd.DataFrame) -> np.ndarray:
    """(P, N, 48) true values of every node."""
    x = df.to_numpy()
    if h is not None:
        x = np.asarray(h.sparse_matrix @ x[:, [h.leaves.index(c) for c in df.columns]].T).T
    p = x.shape[0] // 48
    return x[: p * 48].reshape(p, 48, -1).transpose(0, 2, 1)


# -- exact level shares (issue 24.4) ------------------------------------------------------------


@pytest.mark.parametrize("levels", [2, 3, 4, 5])
def test_every_grid_share_sums_to_at_most_one_exactly(levels):
    for shares in share_grid(levels):
        assert sum(map(Fraction, shares)) <= 1
        assert shares[-1] > 0
    assert sum(map(Fraction, (0.1, 0.1, 0.8))) > 1  # the floats themselves do not
    assert sum(map(Fraction, within_budget((0.1, 0.1, 0.8)))) <= 1
    assert sum(map(Fraction, within_budget((0.2,) * 5))) <= 1


def test_level_shares_above_one_by_any_amount_are_refused():
    df = frame(8, 1)
    with pytest.raises(ParameterError, match="'level_shares'.*at most 1 exactly"):
        dpstream.release_optstream(
            df, epsilon=1.0, alpha=5.0, hierarchy=tree(2, 4), level_shares=(0.2, 0.3, 0.5 + 1e-9)
        )
    out = dpstream.release_optstream(  # decimal shares whose exact sum is 1 + 2^-54: lowered
        df, epsilon=1.0, alpha=5.0, hierarchy=tree(2, 4), level_shares=(0.1, 0.1, 0.8), seed=1
    )
    assert sum(map(Fraction, out.attrs["plan"][0]["shares"])) <= 1


# -- no dense nodes x nodes matrix ----------------------------------------------------------------

BIG = 3_000


@pytest.fixture
def no_square(monkeypatch):
    """np.eye/identity/zeros/ones/empty/full raise for a (n, n) array with n >= BIG."""
    for name in ("eye", "identity", "zeros", "ones", "empty", "full"):
        real = getattr(np, name)

        def guarded(*args, _real=real, _name=name, **kwargs):
            shape = kwargs.get("shape", kwargs.get("N", args[0] if args else None))
            if _name == "eye":
                shape = (args[0], kwargs.get("M", args[1] if len(args) > 1 else None) or args[0])
            if _name == "identity":
                shape = (args[0], args[0])
            if isinstance(shape, tuple) and len(shape) == 2 and min(shape) >= BIG:
                raise AssertionError(f"a dense {shape} matrix was built (np.{_name})")
            return _real(*args, **kwargs)

        monkeypatch.setattr(np, name, guarded)


def test_the_square_guard_can_fail(no_square):
    with pytest.raises(AssertionError, match="dense"):
        np.eye(BIG)
    with pytest.raises(AssertionError, match="dense"):
        np.zeros((BIG, BIG))
    from scipy import sparse

    with pytest.raises(AssertionError, match="dense"):
        sparse.identity(BIG, format="csr").toarray()


@pytest.mark.parametrize("hierarchy", [None, tree(30, BIG // 30)])
def test_an_auto_release_never_builds_a_dense_square(no_square, hierarchy):
    idx = pd.date_range("2016-03-01", periods=48 * 3, freq="30min")
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        rng.uniform(10, 20, (idx.size, BIG)), index=idx, columns=[f"f{i}" for i in range(BIG)]
    )
    out = dpstream.release_optstream(df, epsilon=1.0, alpha=5.0, seed=1, hierarchy=hierarchy)
    assert out.shape[0] == df.shape[0] and len(out.attrs["plan"]) == 3  # prior from day 3


# -- state: running sums, plan/update ------------------------------------------------------------


def test_running_variogram_sums_equal_the_sum_of_the_last_lookback_periods():
    h, cfg = _cfg(None, list(range(3)))
    planner = StreamPlanner(cfg)
    rng = np.random.default_rng(1)
    pos = sample_equal(48, 6)
    stats = []
    for _ in range(LOOKBACK + 7):
        sampled = np.zeros((3, 48), dtype=bool)
        sampled[:, pos] = True
        m = Measurement(values=rng.normal(50, 5, (3, 48)), noise=np.full((3, 48), 2.0),
                        sampled=sampled)  # fmt: skip
        planner.update(m)
        stats.append(period_roughness(m.values, m.noise, m.sampled))
    want = stats[-LOOKBACK]
    for s in stats[-LOOKBACK + 1 :]:
        want = want + s
    np.testing.assert_allclose(planner._rough.squares, want.squares, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(planner._rough.noise, want.noise, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(planner._rough.counts, want.counts)


def test_extend_equals_update_one_by_one():
    h, cfg = _cfg(None, list(range(4)))
    rng = np.random.default_rng(2)
    items = []
    for q in range(LOOKBACK + 9):
        sampled = np.zeros((4, 48), dtype=bool)
        sampled[:, sample_equal(48, (6, 12, 48)[q % 3])] = True
        m = Measurement(values=rng.normal(50, 5, (4, 48)), noise=np.full((4, 48), 2.0),
                        sampled=sampled)  # fmt: skip
        items.append((m, None))
    one, bulk = StreamPlanner(cfg), StreamPlanner(cfg)
    for m, plan in items:
        one.update(m, plan)
    bulk.extend(items)
    np.testing.assert_allclose(bulk._rough.squares, one._rough.squares, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(bulk._rough.counts, one._rough.counts)
    assert bulk.n_measured == one.n_measured


@pytest.mark.parametrize("k", [1, 2, 6, 48])
def test_roughness_of_shared_sampled_steps_equals_the_general_form(k):
    rng = np.random.default_rng(k)
    x, v = rng.normal(size=(30, 48)), rng.uniform(size=(30, 48))
    s = np.zeros((30, 48), dtype=bool)
    s[:, sample_equal(48, k)] = True
    fast = period_roughness(x, v, s)
    # one extra row measured elsewhere forces the general form; the others' sums are the same
    general = period_roughness(np.vstack([x, x[:1]]), np.vstack([v, v[:1]]),
                               np.vstack([s, ~s[:1]]))  # fmt: skip
    np.testing.assert_allclose(fast.squares, general.squares[:-1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(fast.noise, general.noise[:-1], rtol=1e-12, atol=1e-12)
    # the general form counts each node's own pairs (N, w): the shared count on every row
    np.testing.assert_array_equal(general.counts[:-1], np.broadcast_to(fast.counts, (30, 48)))


# -- subtrees --------------------------------------------------------------------------------------


def test_subtrees_scored_apart_and_added_choose_as_the_whole_tree():
    children = tree(4, 20)  # 80 leaves: no cross-level combination
    h, cfg = _cfg(children, [])
    periods = _periods(h, frame(80, 4))
    subs = [np.array([h.index(x) for x in [f"s{i}"] + children[f"s{i}"]]) for i in range(4)]
    top = np.array([h.index("national")])
    parts = [top, *subs]
    whole = StreamPlanner(cfg)
    planners = [StreamPlanner(subtree_config(cfg, p)) for p in parts]
    for day in range(periods.shape[0]):
        plan, _ = whole.plan()
        total = planners[0].scores()
        for p in planners[1:]:
            total = total + p.scores()
        got = [p.plan(scores=total)[0] for p in planners]
        for g, nodes in zip(got, parts, strict=True):
            assert (g.k, g.shares, g.noise) == (plan.k, plan.shares, plan.noise)
            assert g.budget == plan.budget
            assert g.predicted == pytest.approx(plan.predicted, rel=1e-12)
            np.testing.assert_allclose(g.variances, plan.variances[nodes], rtol=1e-12)
            np.testing.assert_allclose(g.predicted_nodes, plan.predicted_nodes[nodes], rtol=1e-12)
        m = as_measurement(periods[day] + 3.0 * (day % 2), plan, cfg)  # a public stand-in
        whole.update(m, plan)
        for p, g, nodes in zip(planners, got, parts, strict=True):  # the same measurement
            part = Measurement(values=m.values[nodes], noise=m.noise[nodes],
                               sampled=m.sampled[nodes])  # fmt: skip
            p.update(part, g)


def test_a_small_tree_cannot_be_split():
    h, cfg = _cfg(tree(2, 4), [])
    with pytest.raises(ParameterError, match="plan it whole"):
        subtree_config(cfg, np.arange(3))


# -- the window rule across calls (issue 24.1) ---------------------------------------------------


def _window_max(costs: np.ndarray, w: int) -> float:
    return max(costs[s : s + w].sum() for s in range(costs.size - w + 1))


@pytest.mark.parametrize("gap", [0, 5])
def test_carried_samples_keep_every_window_across_a_tail_and_a_gap(gap):
    w = 48
    # earlier call: a full period at k = 48, then a tail of 20 steps at k = 16 (its budget
    # by the window rule inside that call), then a gap; the new call starts at k = 2
    tail_budget = window_budget((sample_equal(w, 48), 1.0 / 48), sample_equal(20, 16), 1.0)
    plans = [
        {"k": 48, "budget": 1.0, "noise": "laplace"},
        {"k": 16, "budget": tail_budget, "noise": "laplace"},
    ]
    prev = carried_previous(plans, [w, 20], w, gap=gap)
    nxt = sample_equal(w, 2)
    budget = window_budget((prev[0], prev[1]), nxt, 1.0)
    costs = np.zeros(w + 20 + gap + w)
    costs[sample_equal(w, 48)] += 1.0 / 48
    costs[w + sample_equal(20, 16)] += tail_budget / 16
    costs[w + 20 + gap + nxt] += budget / 2
    assert _window_max(costs, w) <= 1.0 + 1e-9
    costs[w + 20 + gap + nxt] *= 1.01 / (1 - 1e-12)  # and tight
    assert _window_max(costs, w) > 1.0


def test_a_second_call_after_an_earlier_release_respects_the_window():
    df = frame(8, 6)
    kw = dict(epsilon=20.0, alpha=1.0, hierarchy=tree(2, 4))
    one = dpstream.release_optstream(df.iloc[: 48 * 3], seed=1, **kw)
    two = dpstream.release_optstream(df.iloc[48 * 3 :], seed=2, history=one, **kw)
    costs = np.concatenate(
        [np.where(np.isin(np.arange(48), sample_equal(48, p["k"])), p["budget"] / p["k"], 0.0)
         for p in one.attrs["plan"] + two.attrs["plan"]]
    )  # fmt: skip
    assert _window_max(costs, 48) <= 20.0 * (1 + 1e-9)
    assert two.attrs["plan_config"]["carried"]["noise"] == "laplace"
    # replayable: the plans follow from the published measurements and the carried samples
    _, cfg = _cfg(tree(2, 4), [], **{k: v for k, v in kw.items() if k != "hierarchy"},
                  prior=True)  # fmt: skip
    carried = two.attrs["plan_config"]["carried"]
    hist = np.asarray(one[list(two.columns)].to_numpy())
    plans, _ = ap.replan(
        two.attrs["measurements"],
        cfg,
        history=hist,
        carried=(np.array(carried["steps"]), np.array(carried["cost"]), carried["noise"]),
    )
    assert [p.k for p in plans] == [p["k"] for p in two.attrs["plan"]]
    assert [p.budget for p in plans] == pytest.approx([p["budget"] for p in two.attrs["plan"]])


def test_an_earlier_release_of_another_noise_is_refused_before_any_work():
    df = frame(8, 4)
    kw = dict(epsilon=1.0, alpha=5.0, hierarchy=tree(2, 4))
    one = dpstream.release_optstream(df.iloc[:96], seed=1, noise="gaussian", delta=1e-6, **kw)
    with pytest.raises(ParameterError, match="'noise'.*gaussian"):
        dpstream.release_optstream(df.iloc[96:], seed=2, history=one, **kw)
    sliced = one.iloc[10:]  # attrs kept, periods no longer where the plans say
    with pytest.raises(ParameterError, match="'history'.*do not match its index"):
        dpstream.release_optstream(df.iloc[96:], seed=2, history=sliced, noise="auto",
                                   delta=1e-6, **kw)  # fmt: skip
    assert PeriodPlan  # the public plan type stays importable from planner


def test_a_call_whose_epsilon_the_earlier_release_already_spent_is_refused():
    df = frame(8, 4)
    kw = dict(alpha=1.0, hierarchy=tree(2, 4))
    one = dpstream.release_optstream(df.iloc[:96], epsilon=20.0, seed=1, **kw)
    with pytest.raises(ParameterError, match="'epsilon'.*earlier release"):
        dpstream.release_optstream(df.iloc[96:], epsilon=1.0, seed=2, history=one, **kw)
