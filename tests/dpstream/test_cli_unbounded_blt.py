"""``dpstream release bt --counter unbounded_blt``: the Gaussian counter sized for no stream
length (issue 27 item 5; a time-invariant BLT calibrated for 2³² rows). With one seed, the sums
released for the first rows do not depend on the rows after them."""

from __future__ import annotations

import numpy as np
import pandas as pd
from click.testing import CliRunner

from dpstream.cli import cli, main
from dpstream.commands.query import read_release
from mechanisms.counting import unbounded_blt_release

B = 20.0
N = 900


def _write(tmp_path, x, name):
    stamps = pd.date_range("2007-01-01", periods=x.size, freq="min", name="time")
    path = tmp_path / name
    pd.DataFrame({"time": stamps, "kw": x}).to_csv(path, index=False)
    return path


def _release(tmp_path, x, n, name):
    path = _write(tmp_path, x[:n], f"{name}.csv")
    out = tmp_path / f"{name}_out.csv"
    args = ["release", "bt", str(path), "--bound", str(B), "--epsilon", "1", "--seed", "5"]
    result = CliRunner().invoke(
        cli, [*args, "--delta", "1e-6", "--counter", "unbounded_blt", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    return out


def test_with_one_seed_appended_rows_leave_the_released_prefix_unchanged(tmp_path):
    x = np.round(np.random.default_rng(0).exponential(2.0, N).clip(0, B), 3)
    short = read_release(_release(tmp_path, x, 300, "short"))[0]["cumulative"].to_numpy()
    frame, meta = read_release(_release(tmp_path, x, N, "long"))
    whole = frame["cumulative"].to_numpy()
    np.testing.assert_array_equal(whole[:300], short)
    ref = unbounded_blt_release(x, epsilon=1.0, delta=1e-6, bound=B, seed=5)
    np.testing.assert_allclose(whole, ref.prefix_sums, rtol=1e-12, atol=1e-9)
    assert meta["counter"] == "unbounded_blt"
    assert meta["epsilon"] == 1.0 and meta["delta"] == 1e-6


def test_unbounded_blt_is_refused_for_pak_before_anything(tmp_path, capsys):
    x = np.ones(200)
    path = _write(tmp_path, x, "p.csv")
    out = tmp_path / "p_out.csv"
    args = ["release", "pak", str(path), "--bound", str(B), "--epsilon", "1", "--delta", "1e-6"]
    code = main([*args, "--time-lag", "100", "--counter", "unbounded_blt", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "'--counter'" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
