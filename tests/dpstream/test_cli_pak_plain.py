"""``dpstream release pak`` where the planned default is the plain counter (no threshold).

``planner.pak_defaults`` returns ``threshold=False`` where θ = B in almost every release and
the threshold does not beat the plain counter (issue 23, session 11). The release is then the
plain counter over the whole stream with bound B: nothing is withheld, whatever --time-lag
says. The command must say so (it printed "after a time lag of 0" with --time-lag given), and
the values it writes must be that release's, every step of them.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import mechanisms
import planner
from dpstream.cli import cli
from dpstream.commands.query import read_release

B = 20.0
N, M = 3000, 1000


def _write(tmp_path, n):
    x = np.round(np.random.default_rng(0).exponential(2.0, n).clip(0, B), 3)
    path = tmp_path / "power.csv"
    pd.DataFrame({"kw": x}).to_csv(path, index=False)
    return path, x


def _release(path, out, *, n_lag, bound, delta):
    args = ["release", "pak", str(path), "--bound", f"{bound:g}", "--epsilon", "1"]
    args += ["--time-lag", str(n_lag), "--delta", repr(delta), "--seed", "4", "--out", str(out)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return result.output


def _check_plain(output, out, x, *, n_lag, bound, delta, counter):
    n = x.size
    assert "time lag of 0" not in output
    assert f"Released {n} steps (every step: " in output
    assert f"the --time-lag of {n_lag} withholds nothing" in output
    assert f"clipped at the --bound {bound:g}" in output
    frame, meta = read_release(out)
    assert meta["time_lag"] == 0 and meta["released_steps"] == n
    assert meta["privacy"]["parameters"]["threshold"] is False
    assert not frame.isna().any().any()  # no row withheld
    rel = mechanisms.pak_release(
        x, bound=bound, epsilon=1.0, delta=delta, time_lag=n_lag, threshold=False,
        counter=counter, seed=4,
    )  # fmt: skip
    assert rel.time_lag == 0
    assert np.allclose(frame["cumulative"], rel.prefix_sums, rtol=1e-12, atol=1e-9)
    assert np.allclose(frame["value"], np.diff(rel.prefix_sums, prepend=0.0), atol=1e-9)


def test_a_plain_default_says_the_time_lag_withholds_nothing(tmp_path, monkeypatch):
    # the verdict forced on a small stream (the real one needs n in the tens of thousands:
    # the slow test below); everything after pak_defaults is the command's own path
    path, x = _write(tmp_path, N)
    real = planner.pak_defaults

    def plain(**kwargs):
        return dataclasses.replace(real(**kwargs), threshold=False)

    monkeypatch.setattr(planner, "pak_defaults", plain)
    out = tmp_path / "pak.csv"
    output = _release(path, out, n_lag=M, bound=B, delta=1e-6)
    counter = read_release(out)[1]["counter"]
    _check_plain(output, out, x, n_lag=M, bound=B, delta=1e-6, counter=counter)


def test_a_threshold_default_still_reports_its_time_lag(tmp_path):
    path, x = _write(tmp_path, N)
    out = tmp_path / "pak.csv"
    output = _release(path, out, n_lag=M, bound=B, delta=1e-6)
    frame, meta = read_release(out)
    assert meta["privacy"]["parameters"]["threshold"] is True  # Table I's fallback here
    assert f"Released {N - M} steps (after a time lag of {M})" in output
    assert "threshold " in output and frame.iloc[:M].isna().all().all()


@pytest.mark.slow
def test_the_household_prefix_default_is_plain_and_says_so(tmp_path):
    # n = 30,000, m = 10,000, B = 36, ε = 1: pak_defaults' own verdict is the plain counter
    # (session 11), the std-errors document's PAK setting
    n, m, bound, delta = 30_000, 10_000, 36.0, 2.0**-20
    x = np.round(np.random.default_rng(1).exponential(1.0, n).clip(0, bound), 3)
    path = tmp_path / "power.csv"
    pd.DataFrame({"kw": x}).to_csv(path, index=False)
    assert (
        planner.pak_defaults(n=n, bound=bound, epsilon=1.0, delta=delta, time_lag=m).threshold
        is False
    )
    out = tmp_path / "pak.csv"
    output = _release(path, out, n_lag=m, bound=bound, delta=delta)
    counter = read_release(out)[1]["counter"]
    _check_plain(output, out, x, n_lag=m, bound=bound, delta=delta, counter=counter)
