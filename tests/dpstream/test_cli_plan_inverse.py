"""``dpstream plan optstream``, ``plan tops`` and ``plan pak --target-rmse`` (issue 23)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dpstream.cli import main


def run(capsys, *args):
    code = main(["plan", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inverse")
    rng = np.random.default_rng(0)
    t = np.arange(48 * 14)
    a = 1000 + 300 * np.sin(2 * np.pi * t / 48) + rng.normal(0, 30, t.size)
    b = 600 + 200 * np.cos(2 * np.pi * t / 48) + rng.normal(0, 30, t.size)
    stamps = pd.date_range("2016-01-01", periods=t.size, freq="30min")
    pd.DataFrame({"time": stamps, "a": a, "b": b}).to_csv(folder / "history.csv", index=False)
    (folder / "tree.json").write_text(json.dumps({"total": ["a", "b"]}))
    np.save(folder / "prefix.npy", np.minimum(rng.exponential(5.0, 4000), 100.0))
    return folder


def _optstream(files, *args):
    return ["optstream", str(files / "history.csv"), "--alpha", "50", "--hierarchy",
            str(files / "tree.json"), *args]  # fmt: skip


def test_optstream_inverse_json(capsys, files):
    code, out, _ = run(capsys, *_optstream(files, "--target-mape", "3", "--level", "root",
                                           "--json"))  # fmt: skip
    record = json.loads(out)
    assert code == 0 and record["reachable"] is True and record["private"] is False
    assert record["level"] == "root" and record["predicted_mape"] == pytest.approx(3.0, rel=1e-3)
    assert record["epsilon"] > 0 and record["k"] >= 1
    assert set(record["shares"]) == {"root", "leaves"}
    assert sum(record["shares"].values()) == pytest.approx(1.0)
    assert record["errors"]["root"]["mape"] == pytest.approx(3.0, rel=1e-3)


def test_optstream_forward_text_and_curve(capsys, files, tmp_path):
    page = tmp_path / "curve.html"
    code, out, _ = run(capsys, *_optstream(files, "--epsilon", "1", "--curve", str(page)))
    assert code == 0 and "root" in out and "leaves" in out and "mape (%)" in out
    html = page.read_text()
    assert "vegaEmbed" in html and "predicted" in html and "<script" in html
    assert "https://cdn" not in html  # the Vega JavaScript is inlined: works offline
    assert json.loads((tmp_path / "curve.html.privacy.json").read_text())["release"] is False


def test_optstream_unreachable_exits_2_after_the_answer(capsys, files):
    code, out, err = run(capsys, *_optstream(files, "--target-mae", "0.01", "--epsilon-max",
                                             "2", "--json"))  # fmt: skip
    record = json.loads(out)
    assert code == 2 and record["reachable"] is False and record["epsilon"] == 2.0
    assert record["predicted_mape"] == pytest.approx(record["errors"]["leaves"]["mape"])
    assert record["predicted_mae"] == pytest.approx(record["errors"]["leaves"]["mae"])
    assert "not reachable" in err and "--epsilon-max" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--epsilon", "1", "--target-mape", "3"), "exactly one of"),
        ((), "exactly one of"),
        (("--target-mape", "-3"), "'--target-mape' option"),
        (("--epsilon", "1", "--curve", "x.png"), "'--curve' option"),
        (("--epsilon", "1", "--level", "nowhere"), "'--level' option"),
    ],
)
def test_optstream_bad_options(capsys, files, args, message):
    code, _, err = run(capsys, *_optstream(files, *args))
    assert code == 2 and message in err


def test_tops_inverse_and_forward(capsys, files):
    common = ["tops", "--prefix", str(files / "prefix.npy"), "--bound", "100", "--horizon",
              "20000", "--range-length", "500"]  # fmt: skip
    code, out, _ = run(capsys, *common, "--epsilon", "1", "--json")
    forward = json.loads(out)
    assert code == 0 and forward["predicted_rmse"] > 0 and forward["threshold"] > 0
    code, out, _ = run(capsys, *common, "--target-rmse", str(forward["predicted_rmse"] / 2),
                       "--json")  # fmt: skip
    inverse = json.loads(out)
    assert code == 0 and inverse["epsilon"] > 1.0 and inverse["reachable"] is True
    code, _, err = run(capsys, *common, "--target-rmse", "1e-6", "--epsilon-max", "5")
    assert code == 2 and "not reachable" in err


def test_pak_forward_and_bad_range(capsys, files):
    common = ["pak", "--n", "20000", "--bound", "100", "--prefix", str(files / "prefix.npy")]
    code, out, _ = run(capsys, *common, "--range-length", "20000", "--json")
    forward = json.loads(out)
    assert code == 0 and forward["metric"] == "rmse" and forward["counter"]
    assert forward["predicted_rmse"] == pytest.approx(
        forward["threshold_rmse"] if forward["use_threshold"] else forward["plain_rmse"]
    )
    # L = 2000 > n - m = 1000 and <= m = 4000: neither a range of the suffix nor c(σ, L), L > m
    short = ["pak", "--n", "5000", "--bound", "100", "--prefix", str(files / "prefix.npy")]
    code, _, err = run(capsys, *short, "--target-rmse", "10", "--range-length", "2000")
    assert code == 2 and "'--range-length' option" in err


@pytest.mark.slow
def test_pak_inverse(capsys, files):
    common = ["pak", "--n", "20000", "--bound", "100", "--prefix", str(files / "prefix.npy")]
    code, out, _ = run(capsys, *common, "--range-length", "20000", "--json")
    forward = json.loads(out)
    code, out, _ = run(capsys, *common, "--target-rmse", str(forward["predicted_rmse"] / 3),
                       "--json")  # fmt: skip
    inverse = json.loads(out)
    assert code == 0 and inverse["reachable"] and inverse["epsilon"] > 1.0
    assert inverse["predicted_rmse"] == pytest.approx(forward["predicted_rmse"] / 3, rel=1e-2)


def test_pak_forward_quantile_over_releases(capsys, files):
    """--releases N: the --confidence quantile of the RMSE over N releases, above the mean."""
    common = ["pak", "--n", "20000", "--bound", "100", "--prefix", str(files / "prefix.npy"),
              "--range-length", "20000", "--json"]  # fmt: skip
    code, out, _ = run(capsys, *common)
    mean = json.loads(out)
    code, out, _ = run(capsys, *common, "--releases", "30", "--confidence", "0.9")
    quantile = json.loads(out)
    assert code == 0 and quantile["metric"] == "rmse_quantile"
    assert quantile["errors"]["range"]["releases"] == 30
    assert quantile["errors"]["range"]["confidence"] == pytest.approx(0.9)
    assert quantile["errors"]["range"]["rmse"] == pytest.approx(mean["predicted_rmse"])
    assert quantile["predicted_rmse_quantile"] > mean["predicted_rmse"]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--range-length", "20000", "--releases", "0"], "'--releases' option"),
        (
            ["--range-length", "20000", "--releases", "30", "--confidence", "1.5"],
            "'--confidence' option",
        ),  # fmt: skip
        (["--releases", "30"], "'--releases' option"),  # no mean-square plan to take it
    ],
)
def test_pak_quantile_options_bad(capsys, files, extra, named):
    common = ["pak", "--n", "20000", "--bound", "100", "--prefix", str(files / "prefix.npy")]
    code, _, err = run(capsys, *common, *extra)
    assert code == 2 and named in err
