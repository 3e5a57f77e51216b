"""The OptStream release pipeline: consistency, non-negativity, alignment, errors before noise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpstream
from dpstream.pipelines._optstream_pipeline import OPTSTREAM_WEIGHTS, release_periods
from mechanisms import DomainError, ParameterError, bit_source
from postproc import FeatureSet, Hierarchy


class Spy:
    """A bit source that counts draws (errors must come before any)."""

    def __init__(self) -> None:
        self.calls = 0

    def random_raw(self, size):
        self.calls += 1
        return np.full(size, 12345, dtype=np.uint64)

    def spawn(self, n):
        return [self] * n


def frame(n=96, cols=("a", "b", "c"), seed=0):
    rng = np.random.default_rng(seed)
    idx = pd.date_range("2016-02-01", periods=n, freq="30min", name="time")
    return pd.DataFrame(rng.uniform(0, 100, size=(n, len(cols))), index=idx, columns=list(cols))


HIER = {"total": ["ab", "c"], "ab": ["a", "b"]}


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 80),
    w=st.sampled_from([4, 12, 24]),
    k=st.integers(1, 4),
    epsilon=st.sampled_from([0.01, 0.5, 5.0]),
    sampling=st.sampled_from(["l1", "equal"]),
    alpha=st.sampled_from([0.5, 50.0]),
    weights=st.sampled_from(OPTSTREAM_WEIGHTS),
    seed=st.integers(0, 2**16),
)
def test_every_output_is_consistent_and_non_negative(
    n, w, k, epsilon, sampling, alpha, weights, seed
):
    f = frame(n, seed=seed)
    out = dpstream.release_optstream(
        f,
        epsilon=epsilon,
        w=w,
        k=k,
        sampling=sampling,
        hierarchy=HIER,
        alpha=alpha,
        weights=weights,
        seed=seed,
    )
    assert list(out.columns) == ["total", "ab", "c", "a", "b"]
    assert out.index.equals(f.index)
    assert np.isfinite(out.to_numpy()).all() and (out.to_numpy() >= 0).all()
    tol = 1e-7 * max(1.0, float(out["total"].abs().max()))
    assert np.allclose(out["ab"], out["a"] + out["b"], atol=tol, rtol=0)
    assert np.allclose(out["total"], out["ab"] + out["c"], atol=tol, rtol=0)


def test_day_parts_and_days_are_consistent_on_the_regional_data():
    data = dpstream.load_regional()
    month = data[data.index.month == 2].drop(columns="national")
    out = dpstream.release_optstream(
        month, epsilon=1.0, hierarchy=dpstream.regional_hierarchy(), alpha=10.0, seed=1
    )
    regions = ["rural", "semiurban", "urban", "commercial"]
    assert np.allclose(out["national"], out[regions].sum(axis=1), rtol=1e-9, atol=1e-6)
    assert (out.to_numpy() >= 0).all()
    err = (out[regions] - month[regions]).abs().mean().mean()
    assert err < 0.2 * month[regions].mean().mean()  # informative, not noise


def test_without_hierarchy_each_column_is_released_and_series_work():
    f = frame(50)
    out = dpstream.release_optstream(f, alpha=1.0, epsilon=1.0, w=12, k=3, seed=2)
    assert list(out.columns) == ["a", "b", "c"] and out.index.equals(f.index)
    s = dpstream.release_optstream(f["a"], alpha=1.0, epsilon=1.0, w=12, k=3, seed=2)
    assert isinstance(s, pd.Series) and s.name == "a" and (s >= 0).all()


def test_seed_reproduces_and_none_uses_the_secure_source():
    f = frame(48)
    a = dpstream.release_optstream(f, alpha=1.0, epsilon=1.0, hierarchy=HIER, seed=3)
    b = dpstream.release_optstream(f, alpha=1.0, epsilon=1.0, hierarchy=HIER, seed=3)
    c = dpstream.release_optstream(f, alpha=1.0, epsilon=1.0, hierarchy=HIER)
    assert a.equals(b) and not a.equals(c)


def test_more_budget_means_less_error():
    data = dpstream.load_regional()
    month = data[data.index.month == 6][["urban"]]
    errs = [
        (dpstream.release_optstream(month, epsilon=e, alpha=50.0, seed=4) - month)
        .abs()
        .to_numpy()
        .mean()
        for e in (0.05, 5.0)
    ]
    assert errs[1] < errs[0]


def test_pipeline_is_release_periods_on_validated_periods():
    """The protocol script calls ``release_periods`` on stacked periods: same draws, same
    output as the public pipeline for the same seed."""
    f = frame(96)
    out = dpstream.release_optstream(f, alpha=1.0, epsilon=1.0, w=48, k=10, hierarchy=HIER, seed=9)
    tree = Hierarchy(children=HIER)
    x = out.copy()
    x[["a", "b", "c"]] = f[["a", "b", "c"]]
    x["ab"], x["total"] = f["a"] + f["b"], f.sum(axis=1)
    periods = x[list(tree.nodes)].to_numpy().reshape(2, 48, 5).transpose(0, 2, 1)
    core = release_periods(
        periods, epsilon=1.0, w=48, k=10, alpha=1.0, sampling="l1", theta=None,
        hierarchy=tree, nodes=tree.nodes, features=FeatureSet.default(48), bits=bit_source(9),
    )  # fmt: skip
    assert np.allclose(core.transpose(0, 2, 1).reshape(96, 5), out[list(tree.nodes)])


@pytest.mark.parametrize("weights", OPTSTREAM_WEIGHTS)
def test_weights_change_only_the_post_processing(weights):
    """Same seed, same measurements: the weights move the release, never its consistency."""
    f = frame(96)
    out = dpstream.release_optstream(
        f, alpha=1.0, epsilon=1.0, k=10, hierarchy=HIER, weights=weights, seed=4
    )
    ref = dpstream.release_optstream(
        f, alpha=1.0, epsilon=1.0, k=10, hierarchy=HIER, weights="paper", seed=4
    )
    assert np.allclose(out["ab"], out["a"] + out["b"], atol=1e-6)
    assert (weights == "paper") == np.allclose(out.to_numpy(), ref.to_numpy())


def test_variance_weights_beat_the_papers_on_the_regional_data():
    """[FV19] Alg. 4's 1/m_i trusts the day total 48x more than a step although, with the
    feature sensitivity wα, it is about as noisy as the sum of the interpolated steps."""
    data = dpstream.load_regional()
    month = data[data.index.month == 2].drop(columns="national")
    truth = data[data.index.month == 2]
    errs = {}
    for weights in ("variance", "paper"):
        errs[weights] = np.mean(
            [
                (
                    dpstream.release_optstream(
                        month,
                        epsilon=1.0,
                        alpha=10.0,
                        k=10,
                        sampling="equal",
                        weights=weights,
                        hierarchy=dpstream.regional_hierarchy(),
                        seed=s,
                    )  # fmt: skip
                    - truth
                )
                .abs()
                .to_numpy()
                .mean()
                for s in (1, 2)
            ]
        )
    assert errs["variance"] < errs["paper"]


def test_custom_features_and_shares():
    f = frame(96)
    single = [[[t] for t in range(48)]]  # singletons only: no feature query, ε_o = 0
    out = dpstream.release_optstream(
        f, alpha=1.0, epsilon=1.0, k=10, features=single, hierarchy=HIER, seed=1
    )
    assert np.allclose(out["total"], out["ab"] + out["c"], atol=1e-6) and (out >= 0).all().all()
    fs = FeatureSet.from_breaks(48, [(0, 24, 48)])
    out = dpstream.release_optstream(
        f, alpha=1.0, epsilon=1.0, k=10, features=fs, shares=(1, 2, 1), hierarchy=HIER, seed=1
    )
    assert out.shape == (96, 5) and (out >= 0).all().all()


def test_tail_shorter_than_w_is_released():
    f = frame(100)
    out = dpstream.release_optstream(f, alpha=1.0, epsilon=1.0, w=48, hierarchy=HIER, seed=5)
    assert out.shape == (100, 5) and (out.to_numpy()[96:] >= 0).all()


def bad_cases():
    f = frame(96)
    nan = f.copy()
    nan.iloc[3, 1] = np.nan
    neg = f.copy()
    neg.iloc[5, 0] = -1.0
    unsorted = f.iloc[::-1]
    dup = f.copy()
    dup.index = f.index[[0, *range(95)]]
    return [
        ("nan", nan, {}, DomainError, "NaN"),
        ("negative", neg, {}, DomainError, "negative"),
        ("unsorted", unsorted, {}, DomainError, "backwards"),
        ("duplicated", dup, {}, DomainError, "duplicated"),
        ("k>w", f, {"k": 49}, ParameterError, "'k'"),
        ("w<=0", f, {"w": 0}, ParameterError, "'w'"),
        ("epsilon", f, {"epsilon": -1.0}, ParameterError, "'epsilon'"),
        ("alpha", f, {"alpha": 0.0}, ParameterError, "'alpha'"),
        ("sampling", f, {"sampling": "cubic"}, ParameterError, "'sampling'"),
        ("theta", f, {"theta": -5.0}, ParameterError, "'theta'"),
        ("weights", f, {"weights": "uniform"}, ParameterError, "'weights'"),
        ("features w", f, {"features": FeatureSet.default(24)}, ParameterError, "'features'"),
        ("features", f, {"features": [[[0, 1]]]}, ParameterError, "'partitions'"),
        ("shares", f, {"shares": (1.0, 0.0, 1.0)}, ParameterError, "'shares'"),
        (
            "no feature share",
            f,
            {"shares": (0.0, 1.0, 0.0), "sampling": "equal"},
            ParameterError,
            "singletons",
        ),
        ("unknown name", f, {"hierarchy": {"total": ["a", "b", "zz"]}}, ParameterError, "zz"),
        (
            "parent listed as a leaf",
            f,
            {"hierarchy": {"total": ["a", "b", "c"], "c": ["c1", "c2"]}},
            ParameterError,
            "c1",
        ),
        (
            "not a tree",
            f,
            {"hierarchy": {"x": ["a"], "y": ["a", "b", "c"]}},
            ParameterError,
            "tree",
        ),
    ]


@pytest.mark.parametrize(("label", "f", "kwargs", "error", "match"), bad_cases())
def test_bad_input_raises_before_any_noise(label, f, kwargs, error, match):
    spy = Spy()
    args = {"epsilon": 1.0, "alpha": 1.0, "k": 10} | kwargs  # fixed k (auto: test_release_autoplan)
    with pytest.raises(error, match=match):
        dpstream.release_optstream(f, seed=spy, **args)
    assert spy.calls == 0, label
