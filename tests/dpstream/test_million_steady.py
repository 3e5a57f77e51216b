"""A million meters at the steady state (issue 22.3, days 8 on: the prior's folds and seven
held periods): what a worker holds at once when it reads a subtree's planner back, folds a
held period into the prior, and hands the day's record to the client. Each change is bitwise
neutral: the same releases, records and planner states."""

from __future__ import annotations

import tracemalloc
import weakref
from dataclasses import replace

import numpy as np
from _tree_helpers import DayTable, daily_loads, feeder_tree

import postproc._prior as prior_mod
from dpstream.engine import _auto_split
from dpstream.engine._auto_split import AutoSplit, release_auto_whole
from dpstream.pipelines._autoplan import _config, new_planner
from dpstream.store import _planner_state as ps
from postproc import Hierarchy
from postproc._prior import PriorState

W = 48
H = Hierarchy(children=feeder_tree())  # 72 leaves: split, every node planned on its own
DAYS = 9  # past the prior's first fold (it holds 6 released periods, and the first)


def _cfg():
    return _config(hierarchy=H, nodes=H.nodes, epsilon=1.0, alpha=0.5, w=W, delta=None,
                   noise="laplace", target="all", level_shares=None, prior=True)  # fmt: skip


def _equal_states(a, b) -> None:
    (xa, sa), (xb, sb) = a.export(), b.export()
    assert sa == sb and xa.keys() == xb.keys()
    for k in xa:
        assert np.array_equal(xa[k], xb[k]), k
    ha, hb = a._state._held, b._state._held
    assert len(ha) == len(hb) == a._state.recent
    assert (a._state._pinned is None) == (b._state._pinned is None)
    for p, q in zip(ha, hb, strict=True):
        assert all(np.array_equal(x, y) for x, y in zip(p[:5], q[:5], strict=True))
        assert p[5] == q[5]


def test_a_saved_state_is_read_back_one_held_period_at_a_time():
    cfg, loads = _cfg(), daily_loads(len(H.leaves), W, DAYS, 5)
    planner, log = new_planner(cfg), []
    update = planner.update

    def logged(m, plan=None, **kw):
        log.append((m, plan))
        return update(m, plan, **kw)

    planner.update = logged
    for d in range(DAYS):
        vals = np.asarray(H.sparse_matrix @ loads[:, d * W : (d + 1) * W])
        release_auto_whole(planner, cfg, H, vals, ordinal=d, seed=3)
    del planner.update
    assert planner._state.n_periods == DAYS and np.any(planner._state.g)  # folded
    n = ps.held_count(planner)  # the default's held periods (six)
    assert n == planner._state.recent == 6
    blob = ps.dumps_part(planner, list(range(DAYS - n, DAYS)), digest="d")
    held, alive = log[-n:], []

    def read(ordinals):  # each plan a fresh copy, made when asked for
        assert list(ordinals) == list(range(DAYS - n, DAYS))
        for m, plan in held:
            # the earlier periods' plans are gone once their error variances are formed
            assert all(r() is None for r in alive)
            p = replace(plan, variances=plan.variances.copy())
            alive.append(weakref.ref(p.variances))
            yield m, p
            del p

    back = new_planner(cfg)
    assert ps.load_part(blob, back, read, digest="d") is not None
    assert len(alive) == n and all(r() is None for r in alive)
    _equal_states(planner, back)
    # the same from a list (the store's whole-tree path): emptied as it is read
    items = [(m, replace(p, variances=p.variances.copy())) for m, p in held]
    again = new_planner(cfg)
    assert ps.load_part(blob, again, lambda o: items, digest="d") is not None
    assert items == []
    _equal_states(planner, again)
    # a held period that cannot be read: None (the caller replays), as before
    assert ps.load_part(blob, new_planner(cfg), lambda o: iter([*held[:3], None]),
                        digest="d") is None  # fmt: skip


def test_restored_sums_are_the_arrays_read_back_not_copies():
    st = PriorState(10, 4, days=3, recent=1)
    rng = np.random.default_rng(0)
    for _ in range(3):
        st.add(rng.random((10, 4)), rng.random((10, 4)), np.ones((10, 4), bool),
               rng.random((10, 4)), np.ones(10, bool))  # fmt: skip
    arrays, scalars = st.export()
    arrays = {k: v.copy() for k, v in arrays.items()}
    held = [h[:5] for h in st._held]
    shared = PriorState.restore(arrays, scalars, held, copy=False)
    copied = PriorState.restore(arrays, scalars, held)
    assert shared.g is arrays["g"] and copied.g is not arrays["g"]
    assert all(np.array_equal(getattr(shared, k), getattr(copied, k)) for k in st._ARRAYS)


def _states(n: int, days: int = 9) -> PriorState:
    rng = np.random.default_rng(1)
    st = PriorState(n, W)
    for _ in range(days):
        sampled = np.zeros((n, W), dtype=bool)
        sampled[:, ::3] = True
        own = rng.random(n) > 0.1
        st.add(rng.random((n, W)) * 100, rng.random((n, W)), sampled, rng.random((n, W)) + 1, own)
    return st


def test_a_fold_runs_a_block_of_nodes_at_a_time_bitwise(monkeypatch):
    n = 3000
    whole = _states(n)
    monkeypatch.setattr(prior_mod, "_SHRINK_ROWS", 7)  # blocks that do not divide n
    blocks = _states(n)
    assert whole.n_periods == 9 and np.any(whole.g)
    for k in (*PriorState._ARRAYS, "count", "sigma2"):
        assert np.array_equal(getattr(whole, k), getattr(blocks, k)), k


def _fold_peak(st: PriorState) -> int:
    """The fold's temporaries: its peak less what it leaves allocated (the state's own
    arrays: the relative weights' reference, set at the first fold)."""
    tracemalloc.start()
    try:
        st._fold(st._held[0], st.sigma2)
        current, peak = tracemalloc.get_traced_memory()
        return peak - current
    finally:
        tracemalloc.stop()


def test_a_folds_temporaries_do_not_grow_with_the_nodes(monkeypatch):
    n = 20_000  # one (n, w) array: 7.7 MB
    a = n * W * 8
    st = _states(n, days=7)  # seven held: the next add folds
    blocked = _fold_peak(st)
    monkeypatch.setattr(prior_mod, "_SHRINK_ROWS", n)  # one block: the whole arrays at once
    whole = _fold_peak(st)
    assert whole > 4 * a  # (the check can fail: the whole fold's temporaries)
    assert blocked < a / 2


def test_the_record_is_gathered_after_the_update_and_no_period_waits_in_memory(monkeypatch):
    cfg, loads = _cfg(), daily_loads(len(H.leaves), W, 3, 6)
    records = {}
    for spill in (0, 1 << 62):  # every period in its file / none
        monkeypatch.setattr(_auto_split, "SPILL_BYTES", spill)
        split = AutoSplit(cfg, H, cut=1)
        inner, order, held = split.call, [], []

        def call(method, args, only=None, inner=inner, order=order, held=held, split=split):
            out = inner(method, args, only)
            order.append(method)
            if method == "export":
                held.append(any(o.measurement is not None for o in split._objects))
            return out

        split.call = call
        got = []
        for d in range(3):
            order.clear()
            values, _, record = split.release(DayTable(loads, d, H.leaves, W), ordinal=d,
                                              seed=4, pack=True)  # fmt: skip
            got.append((values, bytes(record)))
            finish, export = order.index("finish"), order.index("export")
            assert finish < export < order.index("drop_period")
            assert not any(o._spill.has("period") or o.measurement is not None
                           for o in split._objects)  # fmt: skip
        if spill == 0:
            assert held and not any(held)  # read for each export, not kept
        records[spill] = got
    for (va, ra), (vb, rb) in zip(records[0], records[1 << 62], strict=True):
        assert np.array_equal(va, vb) and ra == rb


def test_the_plans_own_errors_run_a_block_of_nodes_at_a_time(monkeypatch):
    from scipy import sparse

    import planner._candidate_scores as cs

    rng = np.random.default_rng(2)
    n = 20_000
    a = n * W * 8
    v = rng.random((1, n, W)) + 0.1
    v[0, :5] = np.inf  # a share-0 level: no estimate
    tau2 = rng.random((1, n, W)) + 0.5
    tau2[0, 5:9] = np.inf  # no prior
    matrix = sparse.identity(n, format="csr")
    bias = rng.random((n, W))

    def run():
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            out = cs._prior_errors(v, tau2, matrix, bias, tau2[0], combine=False)
            own = cs._node_errors(v, matrix, bias, combine=False)
            return out, own, tracemalloc.get_traced_memory()[1] - before
        finally:
            tracemalloc.stop()

    blocked = run()
    monkeypatch.setattr(cs, "_OWN_ROWS", n)  # one block: whole (C, N, r) temporaries
    whole = run()
    monkeypatch.setattr(cs, "_OWN_ROWS", 7)  # blocks that do not divide n
    small = run()
    for x in (whole, small):
        assert np.array_equal(blocked[0], x[0], equal_nan=True)
        assert np.array_equal(blocked[1], x[1], equal_nan=True)
    assert whole[2] > 2 * a and blocked[2] < a  # (the check can fail)


def test_a_subtrees_saved_state_is_fetched_in_small_parts(monkeypatch):
    cfg, loads = _cfg(), daily_loads(len(H.leaves), W, 3, 8)
    split = AutoSplit(cfg, H, cut=1)
    for d in range(3):
        split.release(DayTable(loads, d, H.leaves, W), ordinal=d, seed=5)

    def states():
        out = {}
        for _, root, data in split.saved_states([0, 1, 2]):
            out[root] = [bytes(np.asarray(p)) for p in data] if root else [bytes(data)]
        return out

    monkeypatch.setattr(_auto_split, "STATE_FETCH_BYTES", 1 << 40)
    whole = states()
    monkeypatch.setattr(_auto_split, "STATE_FETCH_BYTES", 5000)
    parts = states()
    assert whole.keys() == parts.keys() and len(whole) == 1 + split.n
    for root in whole:
        assert b"".join(parts[root]) == b"".join(whole[root])
        if root:
            assert len(whole[root]) == 1 and len(parts[root]) > 1
            assert all(len(p) <= 5000 for p in parts[root])
