"""``dpstream plan tops`` predicts the release's own threshold and shape rule (issue 23)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpstream.cli import main
from planner import tops_forward


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    path = tmp_path_factory.mktemp("tops") / "prefix.npy"
    np.save(path, np.minimum(np.random.default_rng(3).exponential(5.0, 3000), 100.0))
    return path


def _run(capsys, *args):
    code = main(["plan", "tops", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_forward_reports_the_rule_and_its_epsilon_threshold(capsys, prefix):
    common = ["--prefix", str(prefix), "--bound", "100", "--horizon", "8192",
              "--range-length", "300", "--epsilon", "1", "--json"]  # fmt: skip
    code, out, _ = _run(capsys, *common)
    both = json.loads(out)
    assert code == 0 and both["epsilon_threshold"] == 1.0 and both["draws"] == 32
    assert both["threshold_q10"] <= both["threshold"] <= both["threshold_q90"]
    assert both["best_rmse"] <= both["predicted_rmse"]  # the oracle bounds the rule
    # the same as the Python forward (the same seeded runs)
    x = np.load(prefix)
    ref = tops_forward(x, epsilon=1.0, range_length=300, horizon=8192, bound=100.0)
    assert both["predicted_rmse"] == pytest.approx(ref.predicted)
    # a tiny ε_θ spreads the rule's θ: the CLI passes it to the rule
    code, out, _ = _run(capsys, *common, "--epsilon-threshold", "0.001")
    tiny = json.loads(out)
    assert code == 0 and tiny["epsilon_threshold"] == 0.001
    spread = tiny["threshold_q90"] - tiny["threshold_q10"]
    assert spread > both["threshold_q90"] - both["threshold_q10"]


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_bad_epsilon_threshold(capsys, prefix, value):
    code, _, err = _run(capsys, "--prefix", str(prefix), "--bound", "100", "--horizon", "8192",
                        "--range-length", "300", "--epsilon", "1",
                        "--epsilon-threshold", value)  # fmt: skip
    assert code == 2 and "--epsilon-threshold" in err
