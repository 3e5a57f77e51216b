"""Audit of ``release_optstream(k="auto", missing="unmeasured")`` with a gap inside the window.

The missingness pattern is public (``docs/privacy.md``, "Missing readings"): D and D' share it,
and D' moves every *observed* value of the window by α ([FV19] Def. 3). The plan comes from the
real pipeline (the planner of a ``k="auto"`` release of a stream with a missing reading at a
sampled step of its first period: k = 3, samples at steps 0, 2 and 5, step 2 missing); the
audit then runs the real private step with the public mask
(:func:`dpstream.pipelines._period_steps.measure_period` with ``observed``, Laplace through the
noise module), each of N runs one node of a flat configuration. The statistic is the Laplace
log-likelihood ratio of the node's released estimates at its observed samples (the sample at
the gap measured the constant 0 and was dropped; the estimate at the gap is 0 in D and D').

The under-noised twin is the same path with a plan that spends k times the budget (each sample
calibrated as if it were the window's only one): it must fail at ε.

Measured (``pytest -rP tests/privacy/test_unmeasured_auto_audit.py``, N = 100,000 a side):
see the ``[audit]`` lines (ε_lb 0.59 at ε = 1; the twin 1.87).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from _audit import audit

import dpstream
from dpstream.pipelines._autoplan import _config
from dpstream.pipelines._period_steps import measure_period
from mechanisms.optstream._estimates import perturb_noise
from mechanisms.optstream._sampling import sample_equal
from planner import PeriodPlan

EPS, ALPHA, W = 1.0, 1.0, 6
N = 100_000
GAP = 2  # a sampled step of the first period whose reading is missing
BASE = np.array([100.0, 101.0, 0.0, 100.5, 100.2, 99.8])  # 0 at the gap (the public constant)
OBSERVED = np.arange(W) != GAP
NEIGHBOUR = np.where(OBSERVED, BASE + ALPHA, 0.0)  # the gap stays a gap


@pytest.fixture(scope="module")
def plan() -> PeriodPlan:
    """The first period's plan of a real k='auto' release with the gap."""
    x = 100.0 + np.cumsum(np.random.default_rng(0).normal(0.0, 3.0, 8 * W))
    frame = pd.DataFrame({"a": x, "b": x[::-1].copy()})
    frame.iloc[GAP, 0] = np.nan
    out = dpstream.release_optstream(
        frame, epsilon=EPS, alpha=ALPHA, w=W, seed=1, missing="unmeasured"
    )
    assert np.isnan(out.iloc[GAP, 0]) and not np.isnan(out.iloc[GAP, 1])
    rec = out.attrs["plan"][0]
    return PeriodPlan(
        k=rec["k"], noise=rec["noise"], shares=tuple(rec["shares"]), budget=rec["budget"],
        predicted=0.0, predicted_nodes=np.zeros(1), variances=np.zeros((1, W)),
        sample_variance=np.zeros(1), basis="released",
    )  # fmt: skip


def _statistic(plan: PeriodPlan):
    cfg = _config(
        epsilon=EPS, alpha=ALPHA, w=W, delta=None, noise="laplace", target="all",
        level_shares=None, hierarchy=None, nodes=list(range(N)), prior=False,
    )  # fmt: skip
    pos = sample_equal(W, plan.k)
    kept = pos[OBSERVED[pos]]  # the observed samples: the only steps that carry the data
    scale = perturb_noise(k=plan.k, alpha=ALPHA, epsilon=plan.budget).scale

    def statistic(x: np.ndarray, n: int, bits) -> np.ndarray:
        mask = np.broadcast_to(OBSERVED, (n, W))
        m = measure_period(np.broadcast_to(x, (n, W)), plan, cfg, bits=bits, observed=mask)
        assert (m.values[:, GAP] == 0.0).all()  # the gap: the constant, in D and in D'
        y = m.values[:, kept]
        return ((np.abs(y - NEIGHBOUR[kept]) - np.abs(y - BASE[kept])) / scale).sum(axis=1)

    return statistic


def test_the_plan_samples_the_gap(plan):
    assert plan.k == 3 and plan.budget == pytest.approx(EPS)
    assert GAP in sample_equal(W, plan.k)


@pytest.mark.statistical
def test_unmeasured_auto_audit_passes_at_epsilon(plan):
    result = audit(_statistic(plan), BASE, NEIGHBOUR, n=N, seed=2501)
    assert result.passes(EPS), result
    assert result.epsilon_lb > 0.4 * EPS, result  # two of three samples moved: ~2ε/3


@pytest.mark.statistical
def test_unmeasured_auto_audit_fails_under_noised(plan):
    twin = dataclasses.replace(plan, budget=plan.budget * plan.k)  # k times the budget
    result = audit(_statistic(twin), BASE, NEIGHBOUR, n=N, seed=2501)
    assert not result.passes(EPS), result
