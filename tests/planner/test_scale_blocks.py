"""The default release's hot loops in blocks (issue 22): the planner's candidate sums, the
prior's σ̂² and forecast a block of nodes at a time, Algorithm 4 a batch of periods at a time,
and the identity feature map skipped. Each must give bitwise what the one-pass form gives
(the golden releases are checked to 1e-9 elsewhere; here the blocks themselves)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import sparse

import dpstream
from dpstream.pipelines import _period_steps
from planner import _candidate_scores
from postproc import _prior, _problem
from postproc._prior import PriorState


def _level_sums_one_pass(svar, m2, bias):
    """The form before issue 22's blocks: whole chunks of ``_CHUNK_NUMBERS`` numbers."""
    u, (n, r) = svar.size, bias.shape
    out = np.zeros(u)
    step = max(1, _candidate_scores._CHUNK_NUMBERS // (u * r))
    for j in range(0, n, step):
        v = svar[:, None, None] * m2[None, None, :] + bias[None, j : j + step]
        np.sqrt(v, out=v)
        out += (_candidate_scores._SQRT_2_PI * v.mean(axis=2)).sum(axis=1)
    return out


@pytest.mark.parametrize("cache", [1, 48 * 5, 2**16])
def test_level_sums_in_cache_blocks_are_the_one_pass_sums(monkeypatch, cache):
    rng = np.random.default_rng(0)
    svar, m2 = rng.uniform(1, 100, 5), rng.uniform(0, 1, 48)
    bias = rng.uniform(0, 50, (3_001, 48))
    monkeypatch.setattr(_candidate_scores, "_CHUNK_NUMBERS", 5 * 48 * 700)  # several chunks
    want = _level_sums_one_pass(svar, m2, bias)
    monkeypatch.setattr(_candidate_scores, "_CACHE_NUMBERS", cache)
    got = _candidate_scores._level_sums(svar, m2, bias)
    np.testing.assert_array_equal(got, want)


def _fed_state(n, w, periods, *, history=2, seed=4):
    rng = np.random.default_rng(seed)
    st = PriorState(n, w, days=9, recent=3)  # folds from the 4th released period, forgets
    profile = 40 + 10 * np.sin(np.arange(w) / w * 2 * np.pi)
    for q in range(periods):
        y = profile * rng.uniform(0.5, 2, (n, 1)) + rng.normal(0, 3, (n, w))
        public = q < history
        s = np.ones((n, w), dtype=bool) if public else np.zeros((n, w), dtype=bool)
        for g in range(0, n, 6):  # groups of nodes sampled at different steps
            s[g : g + 6, (g // 6) % 2 :: 4 + q % 3] = True
        rv = np.zeros((n, w)) if public else np.full((n, w), rng.uniform(2, 30))
        e = rv * rng.uniform(1, 3, (n, w))
        own = rng.uniform(size=n) > 0.1
        st.add(y + rng.normal(0, 1, (n, w)) * np.sqrt(rv), rv, s, e, own, public=public)
    return st


def test_prior_state_by_blocks_of_nodes_is_the_whole(monkeypatch):
    whole = _fed_state(23, 12, 14)
    p_whole, s_whole = whole.prior(12, period=12), whole.sigma2.copy()
    tail_whole = whole.prior(7, period=12)
    monkeypatch.setattr(_prior, "_SHRINK_ROWS", 4)  # σ̂², the forecast and its shrinkage
    blocks = _fed_state(23, 12, 14)
    np.testing.assert_array_equal(blocks.sigma2, s_whole)
    for got, want in ((blocks.prior(12, period=12), p_whole), (blocks.prior(7, period=12),
                                                              tail_whole)):  # fmt: skip
        np.testing.assert_array_equal(got.mean, want.mean)
        np.testing.assert_array_equal(got.variance, want.variance)


def _tree_frame(days, *, leaves=70, seed=5):
    rng = np.random.default_rng(seed)
    names = [f"f{i}" for i in range(leaves)]
    t = np.arange(48 * days + 17)  # and a tail
    base = 30 + 10 * np.sin(2 * np.pi * t / 48)
    values = base[:, None] * rng.uniform(0.5, 2, leaves) + rng.uniform(0, 5, (t.size, leaves))
    idx = pd.date_range("2016-03-01", periods=t.size, freq="30min")
    children = {"all": ["a", "b"], "a": names[:35], "b": names[35:]}
    return pd.DataFrame(values, index=idx, columns=names), children


@pytest.mark.parametrize("missing", [False, True])
def test_algorithm_4_by_batches_of_periods_is_all_at_once(monkeypatch, missing):
    frame, children = _tree_frame(5)
    kw = dict(epsilon=1.0, alpha=5.0, hierarchy=children, seed=2)
    if missing:  # the pinned readings' variance is the smallest over every period's
        frame.iloc[[60, 150, 200], [3, 40]] = np.nan
        kw["missing"] = "unmeasured"
    monkeypatch.setattr(_period_steps, "_BATCH_NUMBERS", 2**40)
    whole = dpstream.release_optstream(frame, **kw)
    monkeypatch.setattr(_period_steps, "_BATCH_NUMBERS", 1)  # one period at a time
    batched = dpstream.release_optstream(frame, **kw)
    np.testing.assert_array_equal(batched.to_numpy(), whole.to_numpy())


def test_identity_feature_map_is_the_sparse_product():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 5, 6))
    eye = sparse.identity(6, format="csr")
    assert _problem._identity(eye, 6)
    np.testing.assert_array_equal(
        _problem._cols(x, eye), (eye @ x.reshape(15, 6).T).T.reshape(x.shape)
    )
    other = sparse.csr_matrix(np.vstack([np.eye(6), np.ones((1, 6))]))  # a whole-period part
    assert not _problem._identity(other, 6)
    perm = sparse.csr_matrix(np.eye(6)[::-1])
    assert not _problem._identity(perm, 6)
    np.testing.assert_allclose(_problem._cols(x, other), x @ other.toarray().T, rtol=1e-12)
    np.testing.assert_array_equal(_problem._cols(x, perm), x[..., ::-1])
