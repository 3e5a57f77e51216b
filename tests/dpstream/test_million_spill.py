"""A million meters within 8 GB (issue 22.3): a subtree object of the k="auto" split keeps its
planner in a file between calls and its period's arrays out of memory during the elimination
(``dpstream.engine._auto_split.SPILL_BYTES``), so a worker holds one subtree's planner at a
time. The release and the planners' state are bitwise those of the objects that keep
everything in memory, past the prior's folds (more than 7 released periods)."""

from __future__ import annotations

import gc
import os
import pickle
import weakref

import numpy as np
import pytest
from _tree_helpers import DayTable, daily_loads, feeder_tree

from dpstream.engine import _auto_split
from dpstream.engine._auto_split import AutoSplit, release_auto_whole
from dpstream.pipelines._autoplan import _config, new_planner
from postproc import Hierarchy

W = 48
H = Hierarchy(children=feeder_tree())  # 72 leaves: split, every node planned on its own
DAYS = 10  # the prior holds 7 released periods; the 8th and later are folded into its sums
_ELIMINATION = {"scale", "summary", "descend", "gradient", "extent", "start", "infeasible",
                "swap", "node_values"}  # fmt: skip


def _loads(days: int, seed: int = 0) -> np.ndarray:
    return daily_loads(len(H.leaves), W, days, seed)


def _cfg():
    return _config(hierarchy=H, nodes=H.nodes, epsilon=1.0, alpha=0.5, w=W, delta=None,
                   noise="laplace", target="all", level_shares=None, prior=True)  # fmt: skip


def Table(loads: np.ndarray, day: int) -> DayTable:  # noqa: N802 (was a class)
    return DayTable(loads, day, H.leaves, W)


def _release(split: AutoSplit, loads: np.ndarray) -> list[np.ndarray]:
    return [split.release(Table(loads, d), ordinal=d, seed=7)[0] for d in range(DAYS)]


def _state(planner) -> dict:
    arrays, scalars = planner.export()
    return {"arrays": arrays, "scalars": scalars}


def test_spilled_parts_release_bitwise_what_parts_in_memory_release(monkeypatch):
    cfg, loads = _cfg(), _loads(DAYS, seed=3)
    monkeypatch.setattr(_auto_split, "SPILL_BYTES", 1 << 62)  # nothing spilled
    kept = AutoSplit(cfg, H, cut=1)
    want = _release(kept, loads)
    monkeypatch.setattr(_auto_split, "SPILL_BYTES", 0)  # every planner, every period
    spilled = AutoSplit(cfg, H, cut=1)
    got = _release(spilled, loads)
    for a, b in zip(want, got, strict=True):
        assert np.array_equal(a, b)
    assert any((g == 0).any() for g in got)  # the non-negativity was active
    for a, b in zip(kept._objects, spilled._objects, strict=True):
        sa, sb = _state(a.planner), _state(b.planner)
        assert sa["scalars"] == sb["scalars"]
        assert sa["arrays"].keys() == sb["arrays"].keys()
        for k in sa["arrays"]:
            assert np.array_equal(sa["arrays"][k], sb["arrays"][k]), k
        assert sb["scalars"]["prior"]["n_periods"] == DAYS  # folds happened
        assert np.any(b.planner._state.g)
        # a held period's arrays are written once (5 per period and prior state), not with
        # every write of the planner; the folded periods' files are gone
        files = [f for f in os.listdir(b._spill._dir) if f.startswith("held-")]
        assert 0 < b._spill._count <= 5 * 2 * DAYS and len(files) <= 5 * 2 * 7
    # and the whole tree in one process (the split's reference) to 1e-9
    planner = new_planner(cfg)
    for d in range(DAYS):
        vals = np.asarray(H.sparse_matrix @ loads[:, d * W : (d + 1) * W])
        ref = release_auto_whole(planner, cfg, H, vals, ordinal=d, seed=7)[0]
        assert np.abs(got[d] - ref).max() <= 1e-9 * np.abs(ref).max()


def test_no_planner_between_calls_and_no_period_arrays_in_the_elimination(monkeypatch):
    monkeypatch.setattr(_auto_split, "SPILL_BYTES", 0)
    cfg, loads = _cfg(), _loads(3, seed=4)
    split = AutoSplit(cfg, H, cut=1)
    box, seen, priors = {"inner": split.call, "objects": split._objects}, [], []

    def call(method, args, only=None):
        out = box["inner"](method, args, only)
        for o in box["objects"]:
            held = o._planner is not None
            period = any(x is not None for x in (o.measurement, o.plan_, o.prior))
            seen.append((method, held, period))
            priors.append((method, o.prior is not None, o._spill.has("prior")))
        return out

    split.call = call
    for d in range(3):
        split.release(Table(loads, d), ordinal=d, seed=2)
    assert {m for m, _, _ in seen} >= _ELIMINATION | {"scores", "plan", "setup", "finish"}
    assert not any(held for _, held, _ in seen)  # every planner in its file between calls
    assert not any(period for m, _, period in seen if m in _ELIMINATION | {"setup"})
    assert any(period for m, _, period in seen if m == "measure")  # (the check can fail)
    # while the other parts plan, the plan waits in a file for measure, and from the third
    # day the prior for setup
    assert not any(mem for m, mem, _ in priors if m in ("plan", "measure"))
    assert any(filed for m, _, filed in priors if m == "plan")
    assert not any(period for m, _, period in seen if m == "plan")
    # the prior's sums are zeros before the first fold: not written to the file
    o = split._objects[0]
    size = os.path.getsize(o._spill._paths["planner"])
    planner = o.planner
    zeros = sum(getattr(st, k).nbytes for st in _auto_split._prior_states(planner)
                for k in st._ARRAYS if _auto_split._is_zeros(getattr(st, k)))  # fmt: skip
    assert zeros > 0 and size <= len(pickle.dumps(planner, protocol=5)) - zeros + 4096
    del planner
    # written to its file and dropped, a planner's arrays are freed at once (nothing such as
    # a pickler's closure in a reference cycle keeps them until the cyclic collector runs)
    planner = o.planner
    refs = [weakref.ref(a) for a in planner._state._held[-1][:4]]
    gc.disable()
    try:
        o._rest(True)
        del planner
        assert o._planner is None and all(r() is None for r in refs)
    finally:
        gc.enable()
    folder = o._spill._dir
    assert os.path.isdir(folder)
    box.clear()
    del o, split, call
    gc.collect()
    assert not os.path.exists(folder)  # the files go with the objects


@pytest.mark.parametrize("value", [np.zeros(100), -np.zeros(100), np.ones(100)])
def test_only_positive_zeros_are_left_out_of_a_file(value):
    assert _auto_split._is_zeros(value) == (not value.any() and not np.signbit(value).any())
