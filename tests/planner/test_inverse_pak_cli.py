"""``dpstream plan pak --range-length L`` with L <= n − m: range sums of the suffix (issue 23)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpstream.cli import main
from planner._pak_range import RANGE_COUNTERS


def run(capsys, *args):
    code = main(["plan", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def common(tmp_path_factory):
    path = tmp_path_factory.mktemp("pak_ranges") / "prefix.npy"
    rng = np.random.default_rng(3)
    np.save(path, np.minimum(rng.exponential(5.0, 1500), 100.0))
    return ["pak", "--n", "6000", "--bound", "100", "--prefix", str(path)]


def test_forward_json_of_a_range_sum(capsys, common):
    code, out, _ = run(capsys, *common, "--range-length", "100", "--epsilon", "1", "--json")
    plan = json.loads(out)
    assert code == 0 and plan["method"] == "pak" and plan["metric"] == "rmse"
    assert plan["quantity"] == "range sum of 100 steps" and plan["range_length"] == 100
    assert plan["counter"] in RANGE_COUNTERS and plan["reachable"] is True
    assert plan["predicted_rmse"] == pytest.approx(
        plan["threshold_rmse"] if plan["use_threshold"] else plan["plain_rmse"]
    )
    assert plan["errors"]["range"]["rmse"] == pytest.approx(plan["predicted_rmse"])


@pytest.mark.slow
def test_inverse_json_of_a_range_sum_and_unreachable(capsys, common):
    code, out, _ = run(capsys, *common, "--range-length", "100", "--epsilon", "1", "--json")
    at_one = json.loads(out)["predicted_rmse"]
    code, out, _ = run(capsys, *common, "--range-length", "100", "--target-rmse",
                       str(at_one / 2), "--json")  # fmt: skip
    plan = json.loads(out)
    assert code == 0 and plan["reachable"] and plan["epsilon"] > 1.0
    assert plan["target"] == pytest.approx(at_one / 2)
    assert plan["predicted_rmse"] == pytest.approx(at_one / 2, rel=1e-2)
    code, out, err = run(capsys, *common, "--range-length", "100", "--target-rmse", "1e-3",
                         "--epsilon-max", "5", "--json")  # fmt: skip
    assert code == 2 and json.loads(out)["reachable"] is False and "not reachable" in err


def test_releases_refused_for_range_sums(capsys, common):
    code, _, err = run(capsys, *common, "--range-length", "100", "--target-rmse", "50",
                       "--releases", "30")  # fmt: skip
    assert code == 2 and "'--releases' option" in err and "range sum" in err
