"""Regression audit of the tail leak (issue 11 §1) through the public ``release_optstream``.

A stream of T = 6 steps with w = 4, k = 2 and equally spaced samples is one full period
(samples at steps 0 and 3) and a tail of r = 2 steps. The neighbour D' moves the values of the
window [2, 6) by +α (a (w, α)-neighbour, [FV19] Def. 3). That window straddles the full period
and the tail:

* the fixed rule (:func:`mechanisms.optstream._sampling.sample_equal_window`) samples the tail
  at the full pattern's steps below r, i.e. step 4 only: the window holds steps 3 and 4, k = 2
  samples, and Perturb's calibration kα/ε covers it (loss ε);
* the old rule (the tail's own pattern ``sample_equal(r, k)``) samples steps 4 and 5: the
  window holds 3 samples, each moved by α under noise of scale 2α/ε, a loss of 1.5ε.

The whole budget goes to Perturb (singletons only: no feature query; equal sampling costs
nothing), and every column of the frame is an independent run (columns without a hierarchy
are released one stream each, with ``weights="noise"`` so that no weight is pooled across
columns). The statistic is the Laplace privacy-loss statistic of the released steps 3, 4, 5:
``Σ clip(y_t − x_t, 0, α)``. Released values are post-processed; the audit bounds the loss of
what a user receives.

Measured (``pytest -rP tests/privacy/test_tail_audit.py -m "statistical or slow"``): see the
``[audit]`` lines; the slow tier's figures are in the report of issue 11.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _audit import audit

import dpstream
import mechanisms.optstream._estimates as estimates_module
from mechanisms.optstream._sampling import sample_equal
from postproc import FeatureSet

EPS = 1.0
ALPHA = 2.0
W, K = 4, 2
BASE = np.array([50.0, 40.0, 45.0, 60.0, 55.0, 52.0])  # T = 6: one period of 4 and a tail of 2
NEIGHBOUR = BASE + ALPHA * (np.arange(BASE.size) >= 2)  # +α on the window [2, 6)
WATCHED = [3, 4, 5]  # every step of the window an equally spaced sample may sit on
N_FAST, N_SLOW = 20_000, 100_000


def tail_statistic(x: np.ndarray, n: int, bits) -> np.ndarray:
    """``n`` runs of ``release_optstream`` on ``x`` (one column each): the loss statistic."""
    frame = pd.DataFrame(np.repeat(x[:, None], n, axis=1), columns=[f"s{i}" for i in range(n)])
    out = dpstream.release_optstream(
        frame,
        epsilon=EPS,
        w=W,
        k=K,
        sampling="equal",
        alpha=ALPHA,
        features=FeatureSet.from_breaks(W, []),  # singletons: the whole ε on Perturb
        weights="noise",
        seed=bits,
    ).to_numpy()
    y = out[WATCHED].T  # (n, 3)
    return np.clip(y - BASE[WATCHED], 0.0, ALPHA).sum(axis=1)


def _old_tail_rule(r: int, k: int, window: int) -> np.ndarray:
    """The rule before the fix: the tail's own equally spaced pattern (NOT private)."""
    return sample_equal(r, min(k, r))


def test_the_counter_example_has_three_samples_in_one_window_under_the_old_rule():
    """Exact, not statistical: where the samples of the stream fall under each rule."""
    full = sample_equal(W, K)
    fixed = np.concatenate([full, W + estimates_module.sample_equal_window(2, K, W)])
    old = np.concatenate([full, W + _old_tail_rule(2, K, W)])
    for start in range(BASE.size - W + 1):  # every window of w steps of the stream
        assert ((fixed >= start) & (fixed < start + W)).sum() <= K
    assert ((old >= 2) & (old < 6)).sum() == 3


@pytest.mark.statistical
def test_tail_audit_passes_at_epsilon():
    result = audit(tail_statistic, BASE, NEIGHBOUR, n=N_FAST, seed=61)
    assert result.passes(EPS), result
    assert result.epsilon_lb > 0.4 * EPS, result  # the statistic has power at this N


@pytest.mark.statistical
def test_tail_audit_fails_for_the_old_tail_rule(monkeypatch):
    monkeypatch.setattr(estimates_module, "sample_equal_window", _old_tail_rule)
    result = audit(tail_statistic, BASE, NEIGHBOUR, n=N_FAST, seed=61)
    assert not result.passes(EPS), result


@pytest.mark.slow
def test_tail_audit_full_size(monkeypatch):
    fixed = audit(tail_statistic, BASE, NEIGHBOUR, n=N_SLOW, seed=62)
    assert fixed.passes(EPS), fixed
    monkeypatch.setattr(estimates_module, "sample_equal_window", _old_tail_rule)
    old = audit(tail_statistic, BASE, NEIGHBOUR, n=N_SLOW, seed=62)
    assert old.epsilon_lb > 1.3 * EPS, old  # true loss 1.5ε
