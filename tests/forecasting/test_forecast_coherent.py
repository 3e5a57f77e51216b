"""Issue 28 item 3: coherent hierarchical forecasts (forecasting.reconcile, postproc)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from forecasting import forecast, reconcile
from mechanisms import ParameterError

DAY = 12
TREE = {"total": ["a", "b", "c"]}


def _frame(days: int, seed: int, *, small: float = 5.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = np.arange(days * DAY)
    cycle = np.sin(2 * np.pi * t / DAY)
    a = 100 + 30 * cycle + rng.normal(0, 3, t.size)
    b = 60 - 20 * cycle + rng.normal(0, 3, t.size)
    c = np.maximum(small + 4 * cycle + rng.normal(0, 3, t.size), 0.0)  # near 0: binds
    total = a + b + c + rng.normal(0, 6, t.size)  # observed with its own noise: incoherent
    return pd.DataFrame({"a": a, "b": b, "c": c, "total": total})


def test_reconciled_forecasts_add_up_and_stay_non_negative():
    frame = _frame(21, seed=1, small=1.0)
    base = forecast(frame, DAY, steps_per_day=DAY, model="harmonic")
    fc = forecast(frame, DAY, steps_per_day=DAY, model="harmonic", hierarchy=TREE, seed=3)
    assert fc.coherent and not base.coherent
    m = fc.mean
    np.testing.assert_allclose(m["total"], m["a"] + m["b"] + m["c"], rtol=0, atol=1e-9)
    gap = np.abs(base.mean["total"] - base.mean[["a", "b", "c"]].sum(axis=1))
    assert gap.max() > 1e-3  # the base forecasts were not coherent
    assert (m.to_numpy() >= -1e-9).all()
    iv = fc.interval(0.95)
    assert (iv["lower"].to_numpy() >= -1e-9).all()  # simulated: the bound holds in the band
    assert (iv["lower"].to_numpy() <= m.to_numpy() + 1e-9).all()
    assert (m.to_numpy() <= iv["upper"].to_numpy() + 1e-9).all()
    frame_out = fc.to_frame()
    assert {"lo-80", "hi-95"} <= set(frame_out.columns)


def test_coherent_forecasts_are_left_alone():
    """Forecasts that already add up and are positive are a fixed point of the projection."""
    frame = _frame(21, seed=2, small=40.0)
    base = forecast(frame, DAY, steps_per_day=DAY, model="weekly-profile")
    mean = base.mean.copy()
    mean["total"] = mean[["a", "b", "c"]].sum(axis=1)
    coherent = dataclasses.replace(base, mean=mean)
    out = reconcile(coherent, TREE, seed=1)
    np.testing.assert_allclose(out.mean.to_numpy(), mean.to_numpy(), rtol=1e-9, atol=1e-7)


def test_reconciliation_weighs_by_forecast_variance():
    """The noisier node moves most: the total (std 10×) absorbs the discrepancy."""
    frame = _frame(21, seed=3, small=40.0)
    base = forecast(frame, DAY, steps_per_day=DAY, model="weekly-profile")
    std = base.std.copy()
    std[["a", "b", "c"]] = 1.0
    std["total"] = 10.0
    base = dataclasses.replace(base, std=std, correlation=None)
    out = reconcile(base, TREE, seed=1)
    moved = (out.mean - base.mean).abs().mean()
    assert moved["total"] > 10 * moved[["a", "b", "c"]].max()


def test_simulated_intervals_are_calibrated_for_independent_gaussians():
    """No binding bound, independent base errors: reconciled bands = the GLS variances."""
    frame = _frame(21, seed=4, small=40.0)
    base = forecast(frame, DAY, steps_per_day=DAY, model="weekly-profile")
    std = pd.DataFrame(1.0, index=base.std.index, columns=base.std.columns)
    base = dataclasses.replace(base, std=std, correlation=None)
    out = reconcile(base, TREE, simulations=4000, seed=5)
    # GLS with unit variances: leaf variance 1 − 1/4, total variance 3·(1 − 3/4) = 3/4.
    np.testing.assert_allclose(out.std.to_numpy() ** 2, 0.75, rtol=0.1)


def test_bad_hierarchies_are_refused():
    frame = _frame(21, seed=5)
    base = forecast(frame, DAY, steps_per_day=DAY, model="weekly-profile")
    with pytest.raises(ParameterError, match="'hierarchy'"):
        reconcile(base, {"total": ["a", "zz"]})
    with pytest.raises(ParameterError, match="'hierarchy'"):
        reconcile(base, ["total"])
    with pytest.raises(ParameterError, match="'simulations'"):
        reconcile(base, TREE, simulations=1)
