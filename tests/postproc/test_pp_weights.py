"""Error variances of OptStream's estimates for Algorithm 4: noise + interpolation bias."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms import ParameterError
from mechanisms.optstream._sampling import interpolation_matrix, sample_equal
from postproc import FeatureSet, bias_aware_variances, interpolation_bias_variance

W = 12
FS = FeatureSet.from_breaks(W, [(0, 4, 8, 12), (0, 12)])


def synthetic(b=4000, n=2, tau=3.0, sigma_p=2.0, sigma_f=5.0, seed=0):
    """Estimates with known structure: linear truth (interpolation exact), x̃ = M(x_S + noise)
    plus an iid bias N(0, τ²) on unsampled steps; feature parts = exact sums + noise of
    variance σ_f²."""
    rng = np.random.default_rng(seed)
    mask = np.zeros((b, W), dtype=bool)
    mask[:, sample_equal(W, 4)] = True
    t = np.arange(W)
    x = rng.uniform(50, 100, (b, n, 1)) + rng.uniform(-2, 2, (b, n, 1)) * t  # linear: no bias

    m = interpolation_matrix(mask)
    noisy = np.where(mask[:, None, :], x + rng.normal(0, sigma_p, x.shape), 0.0)
    xt = np.einsum("btj,bnj->bnt", m, noisy)
    xt += np.where(mask[:, None, :], 0.0, rng.normal(0, tau, x.shape))
    parts = x @ FS.matrix[W:].T + rng.normal(0, sigma_f, (b, n, FS.n_parts - W))
    est = np.concatenate([xt, parts], axis=2)
    var = np.concatenate(
        [
            np.broadcast_to((m**2).sum(axis=2)[:, None, :] * sigma_p**2, (b, n, W)),
            np.full((b, n, FS.n_parts - W), sigma_f**2),
        ],
        axis=2,
    )
    return est, var, mask[:, None, :]


def test_method_of_moments_recovers_the_bias_variance():
    est, var, mask = synthetic(tau=3.0, sigma_p=1.0, sigma_f=2.0)
    tau2 = interpolation_bias_variance(est, var, mask, levels=[[0, 1]], features=FS)
    assert tau2 == pytest.approx([9.0, 9.0], rel=0.1)
    est0, var0, mask0 = synthetic(tau=0.0, seed=1)
    tau2 = interpolation_bias_variance(est0, var0, mask0, levels=[[0, 1]], features=FS)
    assert (tau2 < 0.5).all()  # clipped at 0 on average-zero residual excess


def test_hand_solved_example():
    fs = FeatureSet.from_breaks(4, [(0, 4)])
    c = np.array([[[1.0, 2.0, 3.0, 4.0, 14.0]]])
    v = np.array([[[1.0, 5 / 9, 5 / 9, 1.0, 2.0]]])
    mask = np.array([[[True, False, False, True]]])
    # r = 14 − 10 = 4; known = 2 + 1·((1 + 2/3 + 1/3)² + (1/3 + 2/3 + 1)²) = 10; τ̂² = 6/2
    assert interpolation_bias_variance(c, v, mask, levels=[[0]], features=fs) == [3.0]
    out = bias_aware_variances(c, v, mask, levels=[[0]], features=fs)
    assert np.allclose(out, [[[1.0, 5 / 9 + 3, 5 / 9 + 3, 1.0, 2.0]]])


def test_only_unsampled_steps_change_and_per_level_masks():
    est, var, mask = synthetic(b=50, n=3, tau=4.0)
    masks = np.concatenate([mask, np.ones_like(mask)], axis=1)  # level 1 samples every step
    out = bias_aware_variances(est, var, masks, levels=[[0, 2], [1]], features=FS)
    assert (out >= var).all()
    assert np.array_equal(out[:, :, W:], var[:, :, W:])  # feature parts untouched
    assert np.array_equal(out[:, 1], var[:, 1])  # every step sampled: no bias
    gap = ~mask[:, 0]
    assert (out[:, 0][:, :W][gap] > var[:, 0][:, :W][gap]).all()
    assert np.array_equal(out[:, 0][:, :W][~gap], var[:, 0][:, :W][~gap])


def test_without_feature_queries_nothing_is_added():
    fs = FeatureSet.from_breaks(W, [])
    est, var, mask = synthetic(b=10)
    out = bias_aware_variances(est[:, :, :W], var[:, :, :W], mask, levels=[[0, 1]], features=fs)
    assert np.array_equal(out, var[:, :, :W])


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ("shape", "'estimates' and 'variances'"),
        ("mask0", "'samples'"),
        ("levels", "'levels'"),
        ("features", "'features'"),
    ],
)
def test_bad_inputs(change, match):
    est, var, mask = synthetic(b=5)
    kw = {"levels": [[0, 1]], "features": FS}
    if change == "shape":
        var = var[:, :, :-1]
    elif change == "mask0":
        mask = mask.copy()
        mask[:, :, 0] = False
    elif change == "levels":
        kw["levels"] = [[0]]
    else:
        kw["features"] = "default"
    with pytest.raises(ParameterError, match=match):
        bias_aware_variances(est, var, mask, **kw)
