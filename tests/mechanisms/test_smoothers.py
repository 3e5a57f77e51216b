"""ToPS smoothers ([ToPS21] smoother): predictions, block sums, chunking, bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechanisms import SMOOTHERS, ParameterError, Smoother, smooth_blocks

# -- known answers ---------------------------------------------------------------------------


def test_recent_smoother_predicts_the_previous_block_and_absorbs_in_the_last_step():
    out = smooth_blocks([4.0, 8.0, 2.0], block=2, prior=1.0, length=7)
    # block 0: prior 1, last 4 − 1 = 3; block 1: 4/2 = 2, last 8 − 2 = 6; block 2: 8/2 = 4,
    # last 2 − 4 = −2; trailing partial block: the prediction 2/2 = 1.
    assert out.tolist() == [1.0, 3.0, 2.0, 6.0, 4.0, -2.0, 1.0]


@pytest.mark.parametrize(
    ("name", "predictions"),
    [
        ("recent", [0.5, 9 / 3, 3 / 3, 0 / 3]),  # the previous block / g
        ("mean", [0.5, 9 / 3, 6 / 3, 4 / 3]),  # means of {9}, {9, 3}, {9, 3, 0}, / g
        ("median", [0.5, 9 / 3, 6 / 3, 3 / 3]),  # medians of the same sets, / g
        ("exponential", [0.5, 9 / 3, 7.5 / 3, 5.625 / 3]),  # u = 9, .75·9 + .25·3, .75·7.5
    ],
)
def test_each_smoother_predicts_from_the_past_blocks_only(name, predictions):
    est = [9.0, 3.0, 0.0, 1.0]
    out = smooth_blocks(est, block=3, prior=0.5, smoother=name, smoothing=0.25).reshape(4, 3)
    assert np.allclose(out[:, 0], predictions, rtol=0, atol=1e-12)
    assert np.allclose(out[:, 1], predictions, rtol=0, atol=1e-12)
    assert np.allclose(out.sum(axis=1), est, rtol=0, atol=1e-12)


def test_median_matches_numpy_on_a_long_sequence():
    est = np.random.default_rng(1).normal(size=301)
    sm = Smoother("median", block=1, prior=0.0)
    out = sm.feed(est)
    ref = [np.median(est[: k + 1]) for k in range(est.size)]
    assert np.allclose(out, ref, rtol=0, atol=0)


# -- invariants ----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    est=st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=40),
    block=st.integers(1, 9),
    extra=st.integers(0, 8),
    name=st.sampled_from(SMOOTHERS),
    prior=st.floats(0, 100),
)
def test_every_complete_block_sums_to_its_estimate(est, block, extra, name, prior):
    extra = extra % block
    out = smooth_blocks(
        est, block=block, length=len(est) * block + extra, smoother=name, prior=prior
    )
    assert out.size == len(est) * block + extra
    sums = out[: len(est) * block].reshape(-1, block).sum(axis=1)
    assert np.allclose(sums, est, rtol=1e-12, atol=1e-6)
    if extra:  # the trailing partial block carries the prediction after the last block
        sm = Smoother(name, block=block, prior=prior)
        sm.feed(np.array(est))
        assert np.all(out[len(est) * block :] == sm.prediction)


@settings(max_examples=40, deadline=None)
@given(
    est=st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=60),
    cut=st.integers(0, 60),
    name=st.sampled_from(SMOOTHERS),
)
def test_feeding_in_chunks_gives_identical_floats(est, cut, name):
    cut = cut % len(est)
    whole = Smoother(name, block=4, prior=1.0).feed(np.array(est))
    sm = Smoother(name, block=4, prior=1.0)
    parts = np.concatenate([sm.feed(np.array(est[:cut])), sm.feed(np.array(est[cut:]))])
    assert np.array_equal(whole, parts)


def test_smoother_state_starts_at_the_prior_and_follows_feed():
    sm = Smoother("recent", block=5, prior=2.5)
    assert sm.prediction == 2.5
    assert sm.feed(np.empty(0)).size == 0 and sm.prediction == 2.5
    sm.feed(np.array([10.0, 20.0]))
    assert sm.prediction == 4.0


# -- bad inputs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"smoother": "kalman"},
        {"block": 0},
        {"block": 2.0},
        {"smoothing": 0.0},
        {"smoothing": 1.5},
        {"prior": math.nan},
        {"length": 3},  # fewer than 2 blocks of 2
        {"length": 6},  # a full extra block
        {"estimates": [1.0, math.inf]},
        {"estimates": [[1.0, 2.0]]},
    ],
)
def test_bad_inputs_raise_parameter_error(kwargs):
    args = {"estimates": [1.0, 2.0], "block": 2, "smoother": "mean", "prior": 0.0}
    args.update(kwargs)
    with pytest.raises(ParameterError):
        smooth_blocks(args.pop("estimates"), **args)


# -- renamed keyword (issue 12: α is the (w, α) unit's word) -----------------------------------


def test_old_alpha_keyword_still_works_with_a_deprecation_warning():
    est = [9.0, 3.0, 6.0]
    new = smooth_blocks(est, block=3, prior=0.5, smoother="exponential", smoothing=0.5)
    with pytest.warns(DeprecationWarning, match="'alpha'.*renamed 'smoothing'"):
        old = smooth_blocks(est, block=3, prior=0.5, smoother="exponential", alpha=0.5)
    np.testing.assert_array_equal(old, new)
    assert not np.array_equal(new, smooth_blocks(est, block=3, prior=0.5, smoother="exponential"))
    with pytest.warns(DeprecationWarning, match="'alpha'.*renamed 'smoothing'"):
        sm = Smoother("exponential", block=3, prior=0.0, alpha=0.5)
    assert sm.smoothing == 0.5
    with pytest.warns(DeprecationWarning, match="Smoother is renamed 'smoothing'"):
        assert sm.alpha == 0.5


def test_old_and_new_keyword_together_is_an_error():
    with pytest.raises(ParameterError, match="'alpha' parameter of smooth_blocks is the old name"):
        smooth_blocks([1.0], block=1, smoothing=0.5, alpha=0.5)


def test_old_default_constant_name_warns():
    from mechanisms.tops import _smoothers

    with pytest.warns(DeprecationWarning, match="DEFAULT_SMOOTHING"):
        assert _smoothers.DEFAULT_ALPHA == _smoothers.DEFAULT_SMOOTHING
