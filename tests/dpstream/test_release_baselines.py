"""Release pipelines of the w-event baselines: dpstream.release_laplace / _dft / _pegasus."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpstream
from dpstream import (
    load_regional,
    regional_hierarchy,
    release_dft,
    release_laplace,
    release_pegasus,
)
from mechanisms import DomainError, ParameterError

RELEASES = [release_laplace, release_dft, release_pegasus]


class NoDraws:
    """A bit source that fails the test if anything is drawn."""

    def random_raw(self, size):
        raise AssertionError("noise was drawn before validation finished")

    def spawn(self, n):
        return [NoDraws() for _ in range(n)]


def frame(n=100, level=1000.0):
    index = pd.date_range("2016-06-01", periods=n, freq="30min", name="time")
    t = np.arange(n)
    return pd.DataFrame(
        {"a": level + 100 * np.sin(t / 7), "b": 2 * level + 50 * np.cos(t / 5)}, index=index
    )


@pytest.mark.parametrize("release", RELEASES)
def test_output_is_aligned_non_negative_and_has_one_column_per_node(release):
    f = frame(n=100)  # 2 full periods + a tail of 4 steps
    out = release(f, alpha=1.0, epsilon=1.0, hierarchy={"ab": ["a", "b"]}, seed=1)
    assert list(out.columns) == ["ab", "a", "b"]
    pd.testing.assert_index_equal(out.index, f.index)
    assert np.isfinite(out.to_numpy()).all() and (out.to_numpy() >= 0).all()
    assert out.attrs["dpstream"]["levels"] == 2 and out.attrs["dpstream"]["seeded"]
    assert "ε=1" in out.attrs["dpstream"]["guarantee"]


@pytest.mark.parametrize("release", RELEASES)
def test_seed_reproduces_and_no_seed_does_not(release):
    f = frame(n=60)
    a = release(f, alpha=1.0, epsilon=1.0, seed=3)
    pd.testing.assert_frame_equal(a, release(f, alpha=1.0, epsilon=1.0, seed=3))
    assert not np.array_equal(release(f, alpha=1.0, epsilon=1.0).to_numpy(), a.to_numpy())


@pytest.mark.parametrize("release", RELEASES)
def test_series_in_series_out(release):
    s = frame()["a"]
    out = release(s, alpha=1.0, epsilon=1.0, seed=0)
    assert isinstance(out, pd.Series) and out.name == "a" and len(out) == len(s)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 120),
    w=st.integers(1, 50),
    which=st.sampled_from(RELEASES),
    eps=st.sampled_from([0.01, 1.0]),
)
def test_any_length_and_window_releases_every_step_non_negative(n, w, which, eps):
    extra = {"k": min(10, w)} if which is release_dft else {}
    f = frame(n=n, level=150.0)
    out = which(f, epsilon=eps, alpha=1.0, w=w, hierarchy={"ab": ["a", "b"]}, seed=n, **extra)
    assert out.shape == (n, 3)
    assert (out.to_numpy() >= 0).all() and np.isfinite(out.to_numpy()).all()


def test_hierarchy_gets_epsilon_over_h_per_level():
    """Laplace per value at scale w·α·h/ε: check the spread of the released noise."""
    f = frame(n=48 * 40, level=1e6)  # far from 0: no truncation
    out = release_laplace(f, epsilon=2.0, w=48, hierarchy={"ab": ["a", "b"]}, alpha=5.0, seed=2)
    noise = (out["a"] - f["a"]).to_numpy()
    scale = 48 * 5.0 * 2 / 2.0
    assert np.mean(np.abs(noise)) == pytest.approx(scale, rel=0.08)
    flat = release_laplace(f, epsilon=2.0, w=48, alpha=5.0, seed=2)
    assert np.mean(np.abs(flat["a"] - f["a"])) == pytest.approx(scale / 2, rel=0.08)


def test_dft_noise_grows_with_the_streams_of_a_level():
    """[FV19] Def. 3: one stream moves per step, possibly a different one each step, so a level
    of n streams needs √(min(2n, w)/2) times the one-stream DFT noise (w = 8, n = 2: √2)."""
    f = frame(n=8 * 600) * 0.0 + 1e6  # columns a, b; constant (no low-pass bias), far from 0
    two = release_dft(f, alpha=1.0, epsilon=1.0, w=8, k=3, seed=3)
    one = release_dft(f[["a"]], alpha=1.0, epsilon=1.0, w=8, k=3, seed=3)
    ratio = (two["a"] - f["a"]).std() / (one["a"] - f["a"]).std()
    assert ratio == pytest.approx(np.sqrt(2.0), rel=0.08)


def test_plain_w_event_needs_a_bound_and_checks_it():
    f = frame()
    with pytest.raises(ParameterError, match="'bound' parameter of release_laplace"):
        release_laplace(f, epsilon=1.0, alpha=None)
    with pytest.raises(DomainError, match="declared bound"):
        release_laplace(f, epsilon=1.0, alpha=None, bound=10.0)
    out = release_laplace(f, epsilon=1.0, alpha=None, bound=5000.0, seed=0)
    assert "w-event" in out.attrs["dpstream"]["guarantee"]


@pytest.mark.parametrize(
    ("mutate", "kwargs", "error", "rule"),
    [
        (
            lambda f: f.assign(a=np.where(np.arange(100) == 3, np.nan, f["a"])),
            {},
            DomainError,
            "NaN",
        ),
        (lambda f: f.assign(b=-f["b"]), {}, DomainError, "negative"),
        (lambda f: f, {"w": 0}, ParameterError, "'w'"),
        (lambda f: f, {"epsilon": -1.0}, ParameterError, "'epsilon'"),
        (lambda f: f, {"hierarchy": {"ab": ["a", "nope"]}}, ParameterError, "nope"),
        (lambda f: f.assign(ab=1.0), {"hierarchy": {"ab": ["a", "b"]}}, DomainError, "parent"),
        (lambda f: f.iloc[::-1], {}, DomainError, "increasing"),
    ],
)
@pytest.mark.parametrize("release", RELEASES)
def test_bad_input_fails_before_any_noise(release, mutate, kwargs, error, rule):
    args = {"epsilon": 1.0, "alpha": 1.0} | kwargs
    with pytest.raises(error, match=rule):
        release(mutate(frame()), seed=NoDraws(), **args)


def test_dft_k_above_w_fails_before_any_noise():
    with pytest.raises(ParameterError, match="'k' parameter of release_dft"):
        release_dft(frame(), alpha=1.0, epsilon=1.0, w=8, k=9, seed=NoDraws())


def test_pegasus_parameters_fail_before_any_noise():
    with pytest.raises(ParameterError, match="'smoother'"):
        release_pegasus(frame(), alpha=1.0, epsilon=1.0, smoother="max", seed=NoDraws())
    with pytest.raises(ParameterError, match="'perturb_share'"):
        release_pegasus(frame(), alpha=1.0, epsilon=1.0, perturb_share=0.0, seed=NoDraws())


def test_progress_counts_every_period():
    seen = []
    release_laplace(frame(n=48 * 70 + 5), alpha=1.0, epsilon=1.0, seed=0, progress=seen.append)
    assert sum(seen) == 71


def test_exported():
    assert dpstream.release_laplace is release_laplace
    assert {"release_laplace", "release_dft", "release_pegasus"} <= set(dpstream.__all__)


def test_regional_june_errors_are_ordered_as_expected():
    """At α = 50 kW, ε = 1 on the bundled regional data (June): Laplace's mean error is that
    of its noise, scale b = w·α·h/ε = 4800, truncated at 0: E|max(x + Z, 0) − x| =
    b(1 − e^{−x/b}/2). On the national node (a level of one stream) DFT removes much of the
    noise; on the four regions its noise is twice as large (changes spread over 4 streams,
    ``WEventDFT(streams=4)``); PeGaSus beats Laplace on both levels."""
    f = load_regional().loc["2016-06"]
    errs = {}
    for release in RELEASES:
        out = release(f, epsilon=1.0, hierarchy=regional_hierarchy(), alpha=50.0, seed=11)
        errs[release.__name__] = (out - f[out.columns]).abs().mean()
    b = 48 * 50.0 * 2
    expected = float((b * (1 - np.exp(-f.to_numpy() / b) / 2)).mean())
    assert errs["release_laplace"].mean() == pytest.approx(expected, rel=0.03)
    regions = ["rural", "semiurban", "urban", "commercial"]
    assert errs["release_dft"]["national"] < 0.75 * errs["release_laplace"]["national"]
    for level in (["national"], regions):
        assert errs["release_pegasus"][level].mean() < errs["release_laplace"][level].mean()
