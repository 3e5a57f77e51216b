"""ToPS threshold optimizer ([ToPS21] §4): grid, κ, scores, selection, monotonicity, bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _recording_bits import RecordingBits as _RecordingBits

from mechanisms import (
    Budget,
    BudgetExceededError,
    BudgetLedger,
    DomainError,
    ParameterError,
    tops_candidates,
    tops_kappa,
    tops_scores,
    tops_threshold,
)

B = 10.0


class RecordingBits(_RecordingBits):
    """Recording bits that refuse to spawn (every draw is counted here)."""

    def __init__(self, seed: int = 0, *, refuse: bool = False) -> None:
        super().__init__(seed, refuse=refuse, spawn=False)


def _prefix(seed: int = 0, m: int = 4000) -> np.ndarray:
    return np.random.default_rng(seed).exponential(1.0, m).clip(0, B)


KW = {"bound": B, "epsilon": 1.0, "horizon": 50_000, "epsilon_perturb": 0.5}


# -- grid, κ, scores -----------------------------------------------------------------------------


def test_default_grid_is_b_j_over_1024():
    grid = tops_candidates(B)
    assert grid.size == 1024 and grid[0] == B / 1024 and grid[-1] == B
    assert np.all(np.diff(grid) > 0) and not grid.flags.writeable


def test_integer_grid_and_explicit_candidates():
    assert tops_candidates(12.0, 12).tolist() == list(map(float, range(1, 13)))
    assert tops_candidates(B, [0.5, 2.0, B]).tolist() == [0.5, 2.0, B]


@pytest.mark.parametrize(
    "bad", [0, 2.5, [], [1.0, 1.0], [2.0, 1.0], [0.0, 1.0], [1.0, B + 1], [[1.0]], ["a"], True]
)
def test_bad_candidates_raise(bad):
    with pytest.raises(ParameterError):
        tops_candidates(B, bad)


def test_kappa_known_answer():
    # m = 65,536, r = 2^20, ε_r = 0.05, F = 16: h = ⌊log16 2^20⌋ + 1 = 6.
    k = tops_kappa(time_lag=65_536, horizon=2**20, epsilon_perturb=0.05)
    assert k == pytest.approx(3 * 65_536 / (60 * 2**20 * 0.05) * math.sqrt(2 * 15 * 6**3))
    # h counts base-F digits: r = 16 has h = 2, r = 15 has h = 1.
    ratio = tops_kappa(time_lag=1, horizon=16, epsilon_perturb=1.0) / tops_kappa(
        time_lag=1, horizon=15, epsilon_perturb=1.0
    )
    assert ratio == pytest.approx(15 / 16 * math.sqrt(8))
    assert tops_kappa(time_lag=10, horizon=100, epsilon_perturb=1.0, c=30.0) == pytest.approx(
        2 * tops_kappa(time_lag=10, horizon=100, epsilon_perturb=1.0)
    )


def test_scores_are_minus_count_above_minus_kappa_theta():
    x = _prefix(1, 500)
    grid = tops_candidates(B, 64)
    got = tops_scores(x, grid, 3.0)
    ref = [-(x > t).sum() - 3.0 * t for t in grid]
    assert np.array_equal(got, ref)


# -- selection -----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["laplace", "exponential"])
def test_threshold_is_a_candidate_and_reproducible(method):
    x = _prefix()
    a = tops_threshold(x, **KW, method=method, seed=3)
    b = tops_threshold(x, **KW, method=method, seed=3)
    assert a.threshold == b.threshold and a.index == b.index
    assert a.threshold == a.candidates[a.index] and a.method == method
    assert a.guarantee.budget == Budget(1.0) and a.time_lag == x.size


@pytest.mark.parametrize("method", ["laplace", "exponential"])
def test_large_epsilon_selects_the_argmax_of_the_score(method):
    x = _prefix(2)
    th = tops_threshold(x, **dict(KW, epsilon=1e6), method=method, seed=4)
    best = int(np.argmax(tops_scores(x, th.candidates, th.kappa)))
    assert th.index == best


def test_report_noisy_max_draws_one_noise_per_candidate():
    bits = RecordingBits(5)
    tops_threshold(_prefix(), **KW, candidates=100, seed=bits)
    assert bits.words == 2 * 100  # two geometric words per discrete Laplace draw
    bits = RecordingBits(5)
    tops_threshold(_prefix(), **KW, candidates=100, method="exponential", seed=bits)
    assert bits.words == 1


@pytest.mark.statistical
def test_exponential_mechanism_frequencies_match_exp_epsilon_q():
    x = np.array([1.0] * 50 + [3.0] * 3)
    grid = np.array([1.0, 2.0, 4.0])
    kw = dict(KW, epsilon=0.7, candidates=grid, method="exponential")
    picks = np.bincount([tops_threshold(x, **kw, seed=s).index for s in range(6000)], minlength=3)
    kappa = tops_kappa(time_lag=53, horizon=50_000, epsilon_perturb=0.5)
    p = np.exp(0.7 * tops_scores(x, grid, kappa))
    p /= p.sum()
    expected = 6000 * p
    chi2 = float((((picks - expected) ** 2) / expected).sum())
    assert chi2 < 20.0, (picks, expected)  # 2 d.o.f.: p ≈ 5e-5


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["laplace", "exponential"])
def test_selection_concentrates_on_the_argmax_as_epsilon_grows(method):
    x = _prefix(6)
    grid = tops_candidates(B, 256)
    kappa = tops_kappa(time_lag=x.size, horizon=KW["horizon"], epsilon_perturb=0.5)
    best = int(np.argmax(tops_scores(x, grid, kappa)))
    spread = []
    for eps in (0.01, 0.1, 1.0, 10.0):
        idx = np.array(
            [
                tops_threshold(
                    x, **dict(KW, epsilon=eps), candidates=256, method=method, seed=s
                ).index
                for s in range(150)
            ]
        )
        assert np.all((idx >= 0) & (idx < 256))
        spread.append(float(np.mean(np.abs(grid[idx] - grid[best]))))
    assert spread[0] > spread[1] > spread[2] > spread[3], spread


def test_larger_perturber_budget_gives_a_larger_threshold():
    # κ ∝ 1/ε_r: the noise-free optimum (and the selection at a large ε) cannot decrease.
    x = _prefix(7)
    chosen = [
        tops_threshold(x, **dict(KW, epsilon=1e6, epsilon_perturb=e), seed=1).threshold
        for e in (0.01, 0.05, 0.2, 1.0, 5.0)
    ]
    assert chosen == sorted(chosen) and chosen[0] < chosen[-1], chosen


@pytest.mark.statistical
def test_threshold_lands_in_the_upper_tail_of_the_prefix():
    # [ToPS21]: θ between about the 99.5th percentile and the maximum (here at ε = 1).
    x = _prefix(8, 20_000)
    th = [
        tops_threshold(x, **dict(KW, horizon=200_000, epsilon_perturb=1.0), seed=s).threshold
        for s in range(20)
    ]
    assert np.quantile(x, 0.99) <= np.median(th) <= x.max() + B / 1024


# -- bad inputs: typed errors, nothing drawn, nothing charged -----------------------------------


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"prefix": [1.0, math.nan]}, DomainError),
        ({"prefix": [1.0, B + 1]}, DomainError),
        ({"prefix": [-1.0, 1.0]}, DomainError),
        ({"prefix": []}, DomainError),
        ({"prefix": np.ones((2, 2))}, DomainError),
        ({"bound": 0.0}, ParameterError),
        ({"epsilon": 0.0}, ParameterError),
        ({"epsilon": math.inf}, ParameterError),
        ({"epsilon_perturb": -1.0}, ParameterError),
        ({"horizon": 0}, ParameterError),
        ({"horizon": 10.5}, ParameterError),
        ({"fanout": 1}, ParameterError),
        ({"c": 0.0}, ParameterError),
        ({"candidates": [B, 1.0]}, ParameterError),
        ({"method": "gumbel"}, ParameterError),
        ({"ledger": "ledger"}, ParameterError),
        ({"ledger": BudgetLedger(Budget(0.5))}, BudgetExceededError),
    ],
)
def test_bad_input_raises_before_any_draw_or_charge(change, error):
    bits = RecordingBits(refuse=True)
    ledger = BudgetLedger(Budget(10.0))
    args = dict(KW, prefix=_prefix(), seed=bits, ledger=ledger)
    args.update(change)
    with pytest.raises(error):
        tops_threshold(args.pop("prefix"), **args)
    assert bits.words == 0 and ledger.charges == ()
    if isinstance(args["ledger"], BudgetLedger):
        assert args["ledger"].charges == ()


def test_recording_bits_can_fail():  # the helper must be able to fail the test above
    with pytest.raises(AssertionError, match="bits were drawn"):
        tops_threshold(_prefix(), **KW, seed=RecordingBits(refuse=True))


def test_ledger_is_charged_once():
    ledger = BudgetLedger(Budget(2.0))
    tops_threshold(_prefix(), **KW, seed=1, ledger=ledger)
    assert [c.budget for c in ledger.charges] == [Budget(1.0)]
