"""Memory of OptStream releases (issue 22): what grows with the days is the release itself.

* Fixed k: Algorithm 4 runs a batch of periods at a time (``_period._BATCH_NUMBERS``) after
  the weights are estimated over all of them; the release is bitwise the one of a single batch.
* Default (``k="auto"``): ``attrs["planning"]`` keeps no array per period for its
  measurements (their values are rows of ``attrs["measurements"]``, their noise rebuilt from
  the plan when read), bitwise what the release measured; the periods are not stacked.
* Both: tracemalloc's peak of a release grows with the days by at most a few copies of the
  (T, N) output (it was ~15 copies for fixed k: every period's Algorithm 4 at once).
"""

from __future__ import annotations

import pickle
import tracemalloc

import numpy as np
import pandas as pd
import pytest

import dpstream
from dpstream.pipelines import _autoplan, _period, _period_steps
from dpstream.pipelines._period_steps import measure_period
from dpstream.pipelines._shared import KeptMeasurement, PeriodsView

LEAVES = [f"f{i}" for i in range(12)]
TREE = {"tot": ["a", "b", "c"], "a": LEAVES[:4], "b": LEAVES[4:8], "c": LEAVES[8:]}


def _frame(days: float, n: int = 12, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    t = np.arange(int(48 * days))
    shape = 20 + 10 * np.sin(2 * np.pi * t / 48)
    vals = shape[:, None] * rng.uniform(0.5, 2.0, n) + rng.normal(0, 3, (t.size, n)).cumsum(0)
    vals = np.clip(vals, 0.0, None)
    vals[rng.random(vals.shape) < 0.1] = 0.0  # non-negativity binds somewhere
    idx = pd.date_range("2016-01-01", periods=t.size, freq="30min")
    return pd.DataFrame(vals, index=idx, columns=[f"f{i}" for i in range(n)])


@pytest.mark.parametrize(
    ("sampling", "weights", "missing"),
    [("l1", "variance", "error"), ("equal", "noise", "unmeasured"), ("l1", "paper", "error")],
)
def test_fixed_k_algorithm_4_a_batch_of_periods_at_a_time_is_bitwise_the_same(
    monkeypatch, sampling, weights, missing
):
    frame = _frame(9.4)
    if missing == "unmeasured":
        frame.iloc[5:30, 2] = np.nan
        frame.iloc[200:260, 7] = np.nan
    kw = dict(epsilon=1.0, alpha=5.0, k=10, sampling=sampling, weights=weights, hierarchy=TREE)
    kw |= dict(seed=7, ledger=False, missing=missing)
    outs = []
    for batch in (10**9, 1, 16 * 53 * 2):  # all at once; one period; two periods a batch
        monkeypatch.setattr(_period, "_BATCH_NUMBERS", batch)
        outs.append(dpstream.release_optstream(frame, **kw))
    for out in outs[1:]:
        assert np.array_equal(out.to_numpy(), outs[0].to_numpy(), equal_nan=True)
        for mine, ref in zip(out.attrs["estimates"], outs[0].attrs["estimates"], strict=True):
            assert np.array_equal(mine["estimates"], ref["estimates"])


@pytest.mark.parametrize("missing", ["error", "unmeasured"])
def test_default_planning_record_is_bitwise_what_the_release_measured(monkeypatch, missing):
    made = []  # every Measurement the private step made, in order

    def measure(*args, **kwargs):
        made.append(measure_period(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(_autoplan, "measure_period", measure)
    frame = _frame(6.3)
    if missing == "unmeasured":
        frame = frame.mask(np.random.default_rng(0).random(frame.shape) < 0.05)
    out = dpstream.release_optstream(
        frame, epsilon=1.0, alpha=5.0, hierarchy=TREE, seed=2, ledger=False, missing=missing
    )
    planning = out.attrs["planning"]
    assert len(made) == len(planning.measured) == 7
    assert planning.matches(np.asarray(out.attrs["measurements"]))
    for kept, ref in zip(planning.measured, made, strict=True):
        assert isinstance(kept, KeptMeasurement)  # no arrays of its own
        assert np.shares_memory(kept._measurements, out.attrs["measurements"])
        for name in ("values", "noise", "sampled"):
            assert np.array_equal(getattr(kept, name), getattr(ref, name)), name
        assert (kept.observed is None) == (ref.observed is None)
        if ref.observed is not None:
            assert np.array_equal(kept.observed, ref.observed)
        assert kept.values.flags.c_contiguous
    assert missing == "error" or any(m.observed is not None for m in made)
    with pytest.raises(ValueError):
        planning.measured[0]._measurements[0, 0] = 1.0  # the record's rows are read-only
    back = pickle.loads(pickle.dumps(out)).attrs["planning"].measured[-1]  # still pickles
    assert np.array_equal(back.noise, made[-1].noise)
    assert np.array_equal(back.values, made[-1].values)


def test_periods_view_is_to_periods_without_the_copy():
    from dpstream.pipelines._frames import to_periods

    values = np.random.default_rng(1).random((48 * 3 + 7, 5))
    view, ref = PeriodsView(values, 48), to_periods(values, 48)
    assert view.shape == ref.full.shape
    for i in range(3):
        assert np.array_equal(view[i], ref.full[i]) and view[i].flags.c_contiguous
    with pytest.raises(IndexError):
        view[3]


def _peak(frame: pd.DataFrame, k) -> int:
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        dpstream.release_optstream(
            frame, epsilon=1.0, alpha=5.0, hierarchy=TREE_BIG, k=k, seed=1, ledger=False
        )
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


TREE_BIG = {"tot": [f"s{j}" for j in range(10)]} | {
    f"s{j}": [f"f{i}" for i in range(20 * j, 20 * j + 20)] for j in range(10)
}


@pytest.mark.parametrize(("k", "bound"), [(10, 10.0), ("auto", 8.0)])
def test_peak_grows_with_the_days_by_a_few_copies_of_the_output(monkeypatch, k, bound):
    # one period per batch of Algorithm 4, as at 100,000 feeders (the batches hold 2**21
    # numbers): what remains is what the release keeps and the copies of its output
    monkeypatch.setattr(_period, "_BATCH_NUMBERS", 1)
    monkeypatch.setattr(_period_steps, "_BATCH_NUMBERS", 1)
    short, long = _frame(4, n=200), _frame(16, n=200)
    unit = 12 * 48 * 211 * 8  # one (T, N) array of the 12 days between them
    slope = (_peak(long, k) - _peak(short, k)) / unit
    assert slope < bound, slope
