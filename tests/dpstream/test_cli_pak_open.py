"""``dpstream release pak --counter unbounded | unbounded_blt``: Mechanism 1 with a suffix
counter sized for no stream length (issue 27 item 5), and ``dpstream query``'s exact standard
errors for it. With ``--parameters paper`` and one seed, the sums released for the first rows
do not depend on the rows after them (planned parameters depend on the number of rows)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from dpstream.cli import cli
from dpstream.commands.query import read_release
from mechanisms import pak_release
from mechanisms.counting import unbounded_blt_range_variance, unbounded_kary_range_variance

B, N, LAG, DELTA = 20.0, 1200, 400, 1e-6


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


def _release(tmp_path, x, n, name, counter, *extra):
    path = _write(tmp_path, x[:n], f"{name}.csv")
    out = tmp_path / f"{name}_out.csv"
    args = ["release", "pak", str(path), "--bound", str(B), "--epsilon", "1", "--delta",
            str(DELTA), "--time-lag", str(LAG), "--seed", "5", "--counter", counter]  # fmt: skip
    _run([*args, *extra, "--out", str(out)])
    return out


@pytest.mark.parametrize("counter", ["unbounded", "unbounded_blt"])
def test_pak_with_an_open_counter_and_appended_rows(tmp_path, x, counter):
    paper = ("--parameters", "paper")
    short = read_release(_release(tmp_path, x, 700, "s", counter, *paper))[0]
    frame, meta = read_release(_release(tmp_path, x, N, "l", counter, *paper))
    whole = frame["cumulative"].to_numpy()
    np.testing.assert_array_equal(whole[:700], short["cumulative"].to_numpy())  # NaN: withheld
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
def test_query_gives_the_open_counters_exact_standard_errors(tmp_path, x, counter):
    out = _release(tmp_path, x, N, "q", counter)  # planned parameters (the default)
    meta = read_release(out)[1]
    assert meta["counter"] == counter and meta["privacy"]["parameters"]["parameters"] == "planned"
    tau = meta["threshold"]
    ranges = [(LAG, N - 1), (LAG + 10, 900), (LAG, LAG), (1000, 1001)]
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
    got = ref.range_sum(LAG + 10, 900).std_error
    assert reply["answers"][1]["std_error"] == pytest.approx(got, rel=1e-12)


def test_help_says_what_the_open_counters_are_for():
    text = " ".join(_run(["release", "--help"]).output.split())
    assert "unbounded" in text and "not fixed in advance" in text
