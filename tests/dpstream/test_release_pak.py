"""``dpstream.release_pak``: Mechanism 1 with the planner's public defaults (issue 14 item 3)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mechanisms"))
from _recording_bits import RecordingBits  # noqa: E402

import dpstream  # noqa: E402
from mechanisms import Budget, BudgetLedger, ParameterError, pak_release  # noqa: E402
from planner import pak_defaults  # noqa: E402

B, EPS, DELTA, M = 36.0, 1.0, 2.0**-20, 1024


def _stream(n: int = 4096) -> np.ndarray:
    return np.random.default_rng(0).exponential(1.0, n).clip(0.0, B)


def test_planned_defaults_are_the_planners_and_read_no_data():
    x = _stream()
    rel = dpstream.release_pak(x, bound=B, epsilon=EPS, delta=DELTA, time_lag=M, seed=5)
    plan = pak_defaults(n=x.size, bound=B, epsilon=EPS, delta=DELTA, time_lag=M)
    same = pak_release(
        x, bound=B, epsilon=EPS, delta=DELTA, time_lag=M, seed=5, **plan.release_parameters()
    )
    np.testing.assert_array_equal(rel.prefix_sums, same.prefix_sums)
    assert rel.parameters.r == plan.r and rel.parameters.eps1_share == plan.eps1_share
    # the plan depends on public inputs only: another stream of the same length plans alike
    other = pak_defaults(n=x.size, bound=B, epsilon=EPS, delta=DELTA, time_lag=M)
    assert other.release_parameters() == plan.release_parameters()


def test_paper_parameters_and_overrides():
    x = _stream()
    paper = dpstream.release_pak(
        x, bound=B, epsilon=EPS, delta=DELTA, time_lag=M, parameters="paper", seed=2
    )
    ref = pak_release(x, bound=B, epsilon=EPS, delta=DELTA, time_lag=M, seed=2)
    np.testing.assert_array_equal(paper.prefix_sums, ref.prefix_sums)
    assert (paper.parameters.r, paper.parameters.lam) == (1.5, 0.85)
    forced = dpstream.release_pak(
        x, bound=B, epsilon=EPS, delta=DELTA, time_lag=M, r=2.0, counter="binary_tree", seed=2
    )
    assert forced.parameters.r == 2.0 and forced.counter.counter == "binary_tree"


@pytest.mark.parametrize(
    "change",
    [
        {"parameters": "table1"},
        {"rr": 2.0},
        {"epsilon": -1.0},
        {"time_lag": 10**6},
        {"ledger": BudgetLedger(Budget(0.5, 1e-3))},
    ],
)
def test_bad_input_draws_and_charges_nothing(change):
    bits = RecordingBits(refuse=True)
    args = dict(bound=B, epsilon=EPS, delta=DELTA, time_lag=M, seed=bits)
    args.update(change)
    ledger = args.get("ledger")
    with pytest.raises(Exception) as info:
        dpstream.release_pak(_stream(), **args)
    assert info.type.__name__ in ("ParameterError", "BudgetExceededError", "DomainError")
    assert bits.words == 0
    if ledger is not None:
        assert ledger.charges == ()


def test_bad_parameters_names_release_pak():
    with pytest.raises(ParameterError, match="'parameters' parameter of release_pak"):
        dpstream.release_pak(_stream(), bound=B, epsilon=EPS, delta=DELTA, time_lag=M,
                             parameters="x")  # fmt: skip
