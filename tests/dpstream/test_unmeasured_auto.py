"""``release_optstream(k="auto", missing="unmeasured")`` (issue 25): the in-stream planner treats
unmeasured readings as missing data.

A sample at an unmeasured reading is dropped from its node's reconstruction, the planner's
variogram and prior skip those readings, Algorithm 4 pins them to 0 (aggregates sum the observed
leaves) and the release publishes them as NaN; the plans can still be recomputed from the
release alone (with the public mask). The privacy audit is
``tests/privacy/test_unmeasured_auto_audit.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpstream
from dpstream import load_regional, regional_hierarchy
from dpstream.pipelines import _autoplan as ap
from dpstream.pipelines._frames import prepare_frame
from planner import RoughnessStats, period_roughness, variogram
from planner._stream_planner import Measurement, _unmeasured

REGIONS = ["rural", "semiurban", "urban", "commercial"]


@pytest.fixture(scope="module")
def holed():
    truth = load_regional().loc["2016-02-01":"2016-02-10", REGIONS]
    gaps = np.random.default_rng(25).random(truth.shape) < 0.05
    return truth, gaps, truth.mask(gaps)


def _release(frame, **kw):
    kw = {"epsilon": 1.0, "alpha": 50.0, "hierarchy": regional_hierarchy(), "seed": 3, **kw}
    return dpstream.release_optstream(frame, **kw)


def test_gaps_are_empty_and_aggregates_sum_the_observed_leaves(holed):
    truth, gaps, frame = holed
    out = _release(frame, missing="unmeasured")
    np.testing.assert_array_equal(out[REGIONS].isna().to_numpy(), gaps)
    assert not out["national"].isna().any()
    leaves = out[REGIONS].fillna(0.0).sum(axis=1)
    np.testing.assert_allclose(out["national"], leaves, rtol=1e-9, atol=1e-6)
    params = out.attrs["privacy"]["parameters"]
    assert params["missing"] == "unmeasured" and params["k"] == "auto"
    assert len(out.attrs["plan"]) == 10


def test_plans_are_recomputed_from_the_release_and_the_public_mask(holed):
    _, _, frame = holed
    out = _release(frame, missing="unmeasured")
    sf = prepare_frame(frame, owner="t", hierarchy=regional_hierarchy(), missing="unmeasured")
    cfg = ap._config(
        epsilon=1.0, alpha=50.0, w=48, delta=None, noise="laplace", target="all",
        level_shares=None, hierarchy=sf.hierarchy, nodes=sf.nodes, prior=True,
    )  # fmt: skip
    observed = ~out.isna().to_numpy()  # the public mask, read off the release
    meas = np.asarray(out.attrs["measurements"])
    plans, priors = ap.replan(meas, cfg, observed=observed)
    starts = [sf.index[i * 48] for i in range(len(plans))]
    assert ap.records(plans, priors, starts) == out.attrs["plan"]
    measured = [
        ap.as_measurement(
            meas[i * 48 : (i + 1) * 48].T, p, cfg, observed=observed[i * 48 : (i + 1) * 48].T
        )
        for i, p in enumerate(plans)
    ]
    released = ap.post_process_periods(measured, plans, priors, sf.hierarchy)
    got = np.where(observed, np.concatenate([r.T for r in released]), np.nan)
    np.testing.assert_allclose(got, out.to_numpy(), atol=1e-9)
    # without the mask the planner reads the dropped samples: not the release's plans
    blind, blind_priors = ap.replan(meas, cfg)
    assert ap.records(blind, blind_priors, starts) != out.attrs["plan"]


def test_without_a_gap_unmeasured_is_the_plain_release(holed):
    truth, _, _ = holed
    plain = _release(truth)
    same = _release(truth, missing="unmeasured")
    pd.testing.assert_frame_equal(plain, same)


def test_unmeasured_beats_zero_where_the_samples_are_few(holed):
    """α = 50 kW: few samples per day, so a fake 0 at a sample bends a whole stretch of the
    leaf's line under `zero`; `unmeasured` draws it through the observed samples."""
    truth, gaps, frame = holed
    errs = {}
    for policy in ("zero", "unmeasured"):
        out = _release(frame, missing=policy)
        errs[policy] = np.abs(out[REGIONS].to_numpy() - truth.to_numpy())[~gaps].mean()
    assert errs["unmeasured"] < errs["zero"], errs


def test_roughness_skips_unmeasured_steps_node_by_node():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 12)).cumsum(axis=1)
    sampled = np.zeros((3, 12), dtype=bool)
    sampled[:, ::3] = True
    sampled[1, 6] = False  # node 1's sample at step 6 was an unmeasured reading
    a = period_roughness(x, np.ones_like(x), sampled)
    y = x.copy()
    y[1, 6] = 1e6  # whatever stands there is never read
    b = period_roughness(y, np.ones_like(x), sampled)
    np.testing.assert_array_equal(a.squares, b.squares)
    assert a.counts.shape == (3, 12)
    assert a.counts[0, 3] == 3 and a.counts[1, 3] == 1  # node 1 lost the pairs (3, 6), (6, 9)
    # per-node counts equal to the shared ones give the shared variogram
    full = period_roughness(x, np.ones_like(x), np.broadcast_to(sampled[0], (3, 12)))
    per_node = RoughnessStats(
        squares=full.squares, noise=full.noise, counts=np.tile(full.counts, (3, 1))
    )
    np.testing.assert_allclose(variogram(per_node), variogram(full))
    summed = full + a  # a shared count plus a per-node one: per node
    assert summed.counts.shape == (3, 12) and variogram(summed).shape == (3, 12)


def test_the_prior_gives_an_unmeasured_reading_no_weight():
    n, r = 2, 4
    observed = np.ones((n, r), dtype=bool)
    observed[0, 1] = False
    sampled = np.zeros((n, r), dtype=bool)
    sampled[:, [0, 2]] = True
    sampled2 = sampled.copy()
    sampled2[1] = False  # node 1: no observed sample this period
    m = Measurement(
        values=np.zeros((n, r)), noise=np.ones((n, r)), sampled=sampled2, observed=observed
    )
    error, own = _unmeasured(m, np.full((n, r), 2.0), np.ones(n, dtype=bool))
    assert error[0, 1] >= 1e8 and (error[observed] == 2.0).all()
    assert own.tolist() == [True, False]
