"""``dpstream plan pak --target-rmse`` when the target is not reachable (issue 23 item 2).

PAK has no floor (the plain counter's noise falls with ε), so "unreachable" means "not within
--epsilon-max": the command prints its answer at ε = --epsilon-max with the best RMSE there
(``"reachable": false`` in the JSON), then one line on stderr in CLI terms, and exits 2. The
OptStream and ToPS cases are in ``test_cli_plan_inverse.py``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpstream.cli import main


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    path = tmp_path_factory.mktemp("pak_unreachable") / "prefix.npy"
    np.save(path, np.minimum(np.random.default_rng(0).exponential(5.0, 4000), 100.0))
    return path


def _plan(capsys, prefix, *args):
    code = main(["plan", "pak", "--n", "20000", "--bound", "100", "--prefix", str(prefix), *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    ("quantity", "length"), [("c(σ, 20000)", "20000"), ("range sum of 500 steps", "500")]
)
def test_pak_unreachable_answers_at_epsilon_max_then_exits_2(capsys, prefix, quantity, length):
    args = ["--range-length", length, "--target-rmse", "0.001", "--epsilon-max", "2"]
    code, out, err = _plan(capsys, prefix, *args, "--json")
    record = json.loads(out)
    assert code == 2 and record["reachable"] is False and record["epsilon"] == 2.0
    assert record["target"] == 0.001 and record["predicted_rmse"] > 0.001
    assert record["quantity"] == quantity
    # the answer is the forward plan at --epsilon-max
    code_fwd, out_fwd, _ = _plan(
        capsys, prefix, "--range-length", length, "--epsilon", "2", "--json"
    )
    forward = json.loads(out_fwd)
    assert code_fwd == 0 and record["predicted_rmse"] == pytest.approx(forward["predicted_rmse"])
    line = err.strip().splitlines()[-1]
    assert "not reachable with epsilon <= 2" in line and "--epsilon-max" in line
    assert f"{record['predicted_rmse']:.4g}" in line  # the best RMSE there, as printed
