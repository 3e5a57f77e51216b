"""``dpstream release bt|pak --counter unbounded | unbounded_blt``: counters sized for no stream
length, pure ε (epochs of k-ary trees) and (ε, δ) (a time-invariant BLT calibrated for 2³² rows)
(issue 27 item 5). With one seed, the sums released for the first rows do not depend on the rows
after them (each run is still a new release, charged again; pak: with --parameters paper, as
planned parameters depend on the number of rows). ``dpstream query`` gives their exact standard
errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpstream.cli import cli, main
from dpstream.commands.query import read_release
from mechanisms import pak_release
from mechanisms.counting import (
    unbounded_blt_range_variance,
    unbounded_blt_release,
    unbounded_kary_range_variance,
    unbounded_kary_release,
)

B = 20.0
N = 900


def _write(tmp_path, x, name):
    stamps = pd.date_range("2007-01-01", periods=x.size, freq="min", name="time")
    path = tmp_path / name
    pd.DataFrame({"time": stamps, "kw": x}).to_csv(path, index=False)
    return path


def _run(args):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def x():
    return np.round(np.random.default_rng(0).exponential(2.0, N).clip(0, B), 3)


def _release(tmp_path, x, n, name, counter=("--counter", "unbounded")):
    path = _write(tmp_path, x[:n], f"{name}.csv")
    out = tmp_path / f"{name}_out.csv"
    args = ["release", "bt", str(path), "--bound", str(B), "--epsilon", "1", "--seed", "5"]
    _run([*args, *counter, "--out", str(out)])
    return out


def test_with_one_seed_appended_rows_leave_the_released_prefix_unchanged(tmp_path, x):
    short = read_release(_release(tmp_path, x, 300, "short"))[0]["cumulative"].to_numpy()
    long_out = _release(tmp_path, x, N, "long")
    frame, meta = read_release(long_out)
    whole = frame["cumulative"].to_numpy()
    np.testing.assert_array_equal(whole[:300], short)
    ref = unbounded_kary_release(x, epsilon=1.0, bound=B, seed=5)
    np.testing.assert_allclose(whole, ref.prefix_sums, rtol=1e-12, atol=1e-9)
    assert (
        meta["counter"] == "unbounded" and meta["privacy"]["parameters"]["counter"] == "unbounded"
    )
    assert meta["epsilon"] == 1.0 and meta["delta"] == 0.0


def test_query_gives_the_exact_standard_errors(tmp_path, x):
    out = _release(tmp_path, x, N, "q")
    args = ["query", str(out), "--range", "0", "899", "--range", "10", "500", "--json"]
    answers = json.loads(_run(args).output.splitlines()[-1])["answers"]
    for ans, (i, j) in zip(answers, [(0, 899), (10, 500)], strict=True):
        exact = unbounded_kary_range_variance(i + 1, j + 1, epsilon=1.0, bound=B) ** 0.5
        assert ans["std_error"] == pytest.approx(exact, rel=1e-12)


def test_gaussian_open_counter_leaves_the_released_prefix_unchanged(tmp_path, x):
    gaussian = ("--delta", "1e-6", "--counter", "unbounded_blt")
    short = read_release(_release(tmp_path, x, 300, "gs", gaussian))[0]["cumulative"].to_numpy()
    frame, meta = read_release(_release(tmp_path, x, N, "gl", gaussian))
    whole = frame["cumulative"].to_numpy()
    np.testing.assert_array_equal(whole[:300], short)
    ref = unbounded_blt_release(x, epsilon=1.0, delta=1e-6, bound=B, seed=5)
    np.testing.assert_allclose(whole, ref.prefix_sums, rtol=1e-12, atol=1e-9)
    assert meta["counter"] == "unbounded_blt"
    assert meta["epsilon"] == 1.0 and meta["delta"] == 1e-6


def test_query_gives_the_gaussian_open_counters_exact_standard_errors(tmp_path, x):
    out = _release(tmp_path, x, N, "gq", ("--delta", "1e-6", "--counter", "unbounded_blt"))
    args = ["query", str(out), "--range", "0", "899", "--range", "10", "500", "--json"]
    answers = json.loads(_run(args).output.splitlines()[-1])["answers"]
    for ans, (i, j) in zip(answers, [(0, 899), (10, 500)], strict=True):
        exact = unbounded_blt_range_variance(i + 1, j + 1, epsilon=1.0, delta=1e-6, bound=B)
        assert ans["std_error"] == pytest.approx(exact**0.5, rel=1e-12)


@pytest.mark.parametrize("counter", ["unbounded", "unbounded_blt"])
def test_unbounded_is_refused_for_tops_before_anything(tmp_path, x, capsys, counter):
    # pak takes the open counters too (tests/dpstream/test_cli_pak_open.py); tops has none
    path = _write(tmp_path, x, "p.csv")
    out = tmp_path / "p_out.csv"
    args = ["release", "tops", str(path), "--bound", str(B), "--epsilon", "1", "--delta", "1e-6"]
    code = main([*args, "--time-lag", "100", "--counter", counter, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "'--counter'" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


# -- pak: Mechanism 1 with an open suffix counter -------------------------------------------

LAG, DELTA = 400, 1e-6


def _release_pak(tmp_path, x, n, name, counter, *extra):
    path = _write(tmp_path, x[:n], f"{name}.csv")
    out = tmp_path / f"{name}_out.csv"
    args = ["release", "pak", str(path), "--bound", str(B), "--epsilon", "1", "--delta",
            str(DELTA), "--time-lag", str(LAG), "--seed", "5", "--counter", counter]  # fmt: skip
    _run([*args, *extra, "--out", str(out)])
    return out


@pytest.mark.parametrize("counter", ["unbounded", "unbounded_blt"])
def test_pak_with_an_open_counter_leaves_the_released_prefix_unchanged(tmp_path, x, counter):
    paper = ("--parameters", "paper")
    short = read_release(_release_pak(tmp_path, x, 600, "s", counter, *paper))[0]
    frame, meta = read_release(_release_pak(tmp_path, x, N, "l", counter, *paper))
    whole = frame["cumulative"].to_numpy()
    np.testing.assert_array_equal(whole[:600], short["cumulative"].to_numpy())  # NaN: withheld
    assert np.isnan(whole[:LAG]).all() and np.isfinite(whole[LAG:]).all()
    # the same release as Mechanism 1 in Python (Table I, the open counter, seed 5)
    ref = pak_release(x, bound=B, epsilon=1.0, delta=DELTA, time_lag=LAG, seed=5,
                      counter=counter)  # fmt: skip
    expect = ref.prefix_sums[LAG:] - ref.prefix_sums[LAG - 1]
    np.testing.assert_allclose(whole[LAG:], expect, rtol=1e-12, atol=1e-9)
    assert meta["counter"] == counter and meta["privacy"]["parameters"]["counter"] == counter
    assert meta["epsilon"] == 1.0 and meta["delta"] == DELTA
    assert meta["threshold"] == ref.threshold


@pytest.mark.parametrize("counter", ["unbounded", "unbounded_blt"])
def test_pak_query_gives_the_open_counters_exact_standard_errors(tmp_path, x, counter):
    out = _release_pak(tmp_path, x, N, "pq", counter)  # planned parameters (the default)
    meta = read_release(out)[1]
    assert meta["counter"] == counter and meta["privacy"]["parameters"]["parameters"] == "planned"
    tau = meta["threshold"]
    ranges = [(LAG, N - 1), (LAG + 10, 800), (LAG, LAG), (700, 701)]
    args = ["query", str(out), "--json"]
    for i, j in ranges:
        args += ["--range", str(i), str(j)]
    reply = json.loads(_run(args).output.splitlines()[-1])
    for ans, (i, j) in zip(reply["answers"], ranges, strict=True):
        a, b = i - LAG + 1, j - LAG + 1  # 1-based steps of the suffix counter
        exact = (
            unbounded_kary_range_variance(a, b, epsilon=1.0, bound=tau)
            if counter == "unbounded"
            else unbounded_blt_range_variance(a, b, epsilon=1.0, delta=DELTA, bound=tau)
        )
        assert ans["std_error"] == pytest.approx(exact**0.5, rel=1e-12)
    # and it is what the release itself says (PakRelease.range_sum)
    local = {
        k: meta["privacy"]["parameters"][k] for k in ("r", "lam", "p", "eps1_share", "beta_lt")
    }
    ref = pak_release(x, bound=B, epsilon=1.0, delta=DELTA, time_lag=LAG, seed=5,
                      counter=counter, **local)  # fmt: skip
    assert ref.threshold == tau
    got = ref.range_sum(LAG + 10, 800).std_error
    assert reply["answers"][1]["std_error"] == pytest.approx(got, rel=1e-12)


def test_help_says_what_the_open_counters_are_for():
    text = " ".join(_run(["release", "--help"]).output.split())
    assert "unbounded" in text and "not fixed in advance" in text
