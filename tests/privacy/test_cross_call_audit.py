"""Audit of a window straddling two ``release_optstream(k="auto")`` calls (issue 24.1).

Call 1 releases a stream; call 2 continues it with call 1's release as ``history=``. The
window rule (:func:`planner.window_budget`) keeps every window of w steps within ε *inside* a
call; across calls, call 2's first period used to be planned with no previous plan, so it could
change k at the full budget: here call 1 ends with k = 2 (samples at steps 0 and 3, ε/2 each)
and, without the carried plan, call 2 begins with k = 1 at the full ε. The window [1, 5) then
holds call 1's sample at step 3 and call 2's sample at step 4: 1.5ε. With the carried plan
(``attrs["plan"]`` of call 1, :func:`planner.carried_previous`) call 2 keeps every window
within ε.

Both calls' plans come from the real pipeline (``release_optstream``: planner, history,
carry); the audit then draws the two periods' measurements through the real private step
(:func:`dpstream.pipelines._period_steps.measure_period`, Laplace through the noise module),
each of N runs one node of a flat configuration, on D and on D' (every value of the worst
straddling window moved by α, a (w, α)-neighbour, [FV19] Def. 3). The statistic is the
Laplace log-likelihood ratio of the window's samples.

Measured (``pytest -rP tests/privacy/test_cross_call_audit.py``, N = 200,000 a side): see the
``[audit]`` lines.
"""

from __future__ import annotations

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

EPS, ALPHA, W = 1.0, 1.0, 4
N = 200_000


def _calls(carry: bool) -> tuple[dict, dict]:
    """Call 1's last plan record and call 2's first, from the real pipeline."""
    x = 100.0 + np.cumsum(np.random.default_rng(0).normal(0.0, 0.1, 8 * W))
    idx = pd.RangeIndex(x.size)
    half = x.size // 2
    first = pd.DataFrame({"a": x[:half]}, index=idx[:half])
    second = pd.DataFrame({"a": x[half:]}, index=idx[half:])
    one = dpstream.release_optstream(first, epsilon=EPS, alpha=ALPHA, w=W, seed=1)
    history = one if carry else one.copy()
    if not carry:  # today's behaviour: the earlier release's plans not read
        history.attrs.clear()
    two = dpstream.release_optstream(second, epsilon=EPS, alpha=ALPHA, w=W, seed=2, history=history)
    return one.attrs["plan"][-1], two.attrs["plan"][0]


def _plan(rec: dict) -> PeriodPlan:
    return PeriodPlan(
        k=rec["k"], noise=rec["noise"], shares=tuple(rec["shares"]), budget=rec["budget"],
        predicted=0.0, predicted_nodes=np.zeros(1), variances=np.zeros((1, W)),
        sample_variance=np.zeros(1), basis="released",
    )  # fmt: skip


def _worst_window(p1: PeriodPlan, p2: PeriodPlan) -> tuple[int, float]:
    """(s, cost) of the costliest window [s, s + W) over the two periods (steps 0..2W)."""
    cost = np.zeros(2 * W)
    cost[sample_equal(W, p1.k)] = p1.budget / p1.k
    cost[W + sample_equal(W, p2.k)] = p2.budget / p2.k
    s = max(range(1, W), key=lambda s: cost[s : s + W].sum())
    return s, float(cost[s : s + W].sum())


def straddle(p1: PeriodPlan, p2: PeriodPlan):
    """The mechanism of the two periods on N runs; statistic: the window's Laplace LLR."""
    cfg = _config(
        epsilon=EPS, alpha=ALPHA, w=W, delta=None, noise="laplace", target="all",
        level_shares=None, hierarchy=None, nodes=list(range(N)), prior=False,
    )  # fmt: skip
    s, _ = _worst_window(p1, p2)
    pos = np.concatenate([sample_equal(W, p1.k), W + sample_equal(W, p2.k)])
    scales = np.concatenate(
        [np.full(p.k, perturb_noise(k=p.k, alpha=ALPHA, epsilon=p.budget).scale) for p in (p1, p2)]
    )
    inside = (pos >= s) & (pos < s + W)

    def statistic(x: np.ndarray, n: int, bits) -> np.ndarray:
        a = measure_period(np.broadcast_to(x[:W], (n, W)), p1, cfg, bits=bits).values
        b = measure_period(np.broadcast_to(x[W:], (n, W)), p2, cfg, bits=bits).values
        y = np.concatenate([a, b], axis=1)[:, pos[inside]]
        base, moved = BASE[pos[inside]], BASE[pos[inside]] + ALPHA
        return ((np.abs(y - moved) - np.abs(y - base)) / scales[inside]).sum(axis=1)

    d_prime = BASE + ALPHA * ((np.arange(2 * W) >= s) & (np.arange(2 * W) < s + W))
    return statistic, d_prime


BASE = np.array([100.0, 101.0, 99.0, 100.5, 100.2, 99.8, 100.1, 100.0])


@pytest.fixture(scope="module")
def plans():
    return {carry: tuple(_plan(r) for r in _calls(carry)) for carry in (False, True)}


def test_the_setting_changes_k_across_the_calls(plans):
    p1, p2 = plans[False]
    assert (p1.k, p2.k) == (2, 1) and p2.budget == pytest.approx(EPS)  # today: full budget
    assert _worst_window(p1, p2)[1] == pytest.approx(1.5 * EPS)
    q1, q2 = plans[True]
    assert _worst_window(q1, q2)[1] <= EPS * (1 + 1e-9)  # carried: every window within ε


@pytest.mark.statistical
def test_cross_call_window_audit_fails_without_the_carried_plan(plans):
    statistic, d_prime = straddle(*plans[False])
    result = audit(statistic, BASE, d_prime, n=N, seed=2401)
    assert not result.passes(EPS), result  # the audit has power: today's 1.5ε is seen


@pytest.mark.statistical
def test_cross_call_window_audit_passes_with_the_carried_plan(plans):
    statistic, d_prime = straddle(*plans[True])
    result = audit(statistic, BASE, d_prime, n=N, seed=2402)
    assert result.passes(EPS), result
    assert result.epsilon_lb > 0.7 * EPS, result  # tight enough to have power
