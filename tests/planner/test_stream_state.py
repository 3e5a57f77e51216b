"""The in-stream planner's state is O(N w), the same at any look-back (issue 22.1)."""

from __future__ import annotations

import numpy as np
from _golden_autoplan import tree

import planner._stream_planner as sp
from dpstream.pipelines import _autoplan as ap
from dpstream.pipelines._period_steps import as_measurement
from planner._stream_planner import StreamPlanner
from postproc import Hierarchy, profile_prior
from postproc._prior import PriorState


def _planner_after(periods: int, look_back: int, *, streaming: bool, monkeypatch) -> StreamPlanner:
    """A planner (prior on) after ``periods`` planned and measured periods of a small tree,
    with both look-backs (variogram, prior) set to ``look_back``."""
    monkeypatch.setattr(sp, "PRIOR_DAYS", look_back)
    monkeypatch.setattr(sp, "LOOKBACK", look_back)
    h = Hierarchy(children=tree(2, 4))
    cfg = ap._config(
        epsilon=1.0, alpha=5.0, w=48, delta=None, noise="laplace", target="all",
        level_shares=None, hierarchy=h, nodes=list(h.nodes), prior=True,
    )  # fmt: skip
    planner = StreamPlanner(
        cfg, prior_model=profile_prior, prior_state=PriorState if streaming else None
    )
    rng = np.random.default_rng(0)
    profile = 50 + 20 * np.sin(np.arange(48) / 48 * 2 * np.pi)
    n = cfg.matrix.shape[0]
    plan, _ = planner.plan()  # one plan for every period (planning is not what is measured)
    for _ in range(periods):
        est = profile[None, :] * rng.uniform(0.5, 2.0, (n, 1)) + rng.normal(0, 3, (n, 48))
        planner.update(as_measurement(est, plan, cfg), plan)
    return planner


def test_the_planner_state_is_the_same_size_at_look_back_7_and_56(monkeypatch):
    sizes = {
        d: _planner_after(60, d, streaming=True, monkeypatch=monkeypatch).nbytes for d in (7, 56)
    }
    assert sizes[7] == sizes[56]
    assert sizes[56] > 0


def test_the_periods_state_grows_with_the_look_back(monkeypatch):
    # the guard above can fail: the exact state (periods held) is 8x larger at 56 than at 7
    sizes = {
        d: _planner_after(60, d, streaming=False, monkeypatch=monkeypatch).nbytes for d in (7, 56)
    }
    assert sizes[56] > 6 * sizes[7]
