"""Audits of the PAK threshold τ in ``mechanisms.pak._threshold`` ((ε, δ)-DP, smooth sensitivity).

Sampling. ``pak_threshold`` = a deterministic calibration (x̂_λp, SS, κ, τ', scale: exposed
without noise by ``pak_threshold_calibration``) followed by one draw (``_release_threshold``).
The calibration costs ~1 ms (sorting, smooth sensitivity, scipy quantiles) and is the same on
every run, so the audit computes it once per prefix and runs the mechanism's own draw code N
times; ``test_draw_path_is_the_public_path`` pins that this equals ``pak_threshold`` draw for
draw, and the slow tier also audits ``pak_threshold`` itself end to end. The statistic is the
unclipped released τ (clipping to [0, B] is post-processing).

Worst-case neighbours. The shift part of the loss is |Δτ'|/scale = a·|Δτ'|/(κ·SS + γ) ≤ a = ε/2,
largest when the local sensitivity of x̂_λp dominates SS and one change moves x̂ by all of it.
D: m = 1000 values, the P − 1 lowest at 0 and the rest at B/2 (P = 951 for λp = 0.05), so
LS = SS = B/2 (the far terms of SS, e^(−b·49)·B ≈ 0.18·B with b = ε/(2 ln(2/δ)), are smaller).
Neighbours: the P-th value moved across the quantile to 0 (x̂ jumps by B/2: predicted loss
a/κ ≈ 0.42 for ε = 1), a value near the quantile moved a little, the top value moved to B.

Under-noised variants:
* noise scale ÷ 3 (predicted loss 1.26 > ε = 1): FAILS the audit, as it must;
* local instead of smooth sensitivity (the pitfall smooth sensitivity exists for, [NRS07] §1):
  on a prefix with three equal values at the quantile LS = 0, so τ is released with almost no
  noise while a neighbour gets noise of scale ~B/2/a: FAILS;
* κ = 1 (no protection of the offset, Eq. 11): not detectable and, in fact, not a measurable
  violation: the realized loss is at most a·(1 + (e^b − 1)G⁻¹(1 − β_lt)/a) ≈ 0.58 < ε in the
  shift, the dilation part stays in the δ tail. The proof breaks, the privacy does not
  measurably; we test the variants above instead.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from _audit import audit_samples

from mechanisms import bit_source
from mechanisms.pak import _calibration, _threshold
from mechanisms.pak._threshold import pak_threshold, pak_threshold_calibration

EPSILON, DELTA = 1.0, 1e-6
PARAMS = {"bound": 1.0, "epsilon": EPSILON, "delta": DELTA, "lam": 0.5, "p": 0.1, "beta_lt": 0.05}
M = 1000
N_FAST = 20_000
N_SLOW = 200_000


def rank() -> int:
    return pak_threshold_calibration(np.zeros(M), **PARAMS).rank


def base_prefix() -> np.ndarray:
    """D: P − 1 values at 0, the rest at B/2 (x̂_λp = B/2 with LS = SS = B/2)."""
    d = np.zeros(M)
    d[rank() - 1 :] = 0.5
    return d


def neighbour(kind: str) -> np.ndarray:
    d = base_prefix()
    p = rank()
    if kind == "across":  # the quantile's own value to 0: x̂ drops by B/2
        d[p - 1] = 0.0
    elif kind == "near":  # the quantile's value moved a little
        d[p - 1] = 0.45
    elif kind == "top":  # the largest value to B
        d[-1] = 1.0
    else:
        raise ValueError(kind)
    return d


def tied_prefix() -> np.ndarray:
    """P − 2 values at 0 and the rest at B/2: x_(P−1) = x_(P) = x_(P+1), so LS = 0."""
    d = np.zeros(M)
    d[rank() - 2 :] = 0.5
    return d


def draws(cal, n: int, seed: int, *, divide_scale: float = 1.0) -> np.ndarray:
    """``n`` unclipped thresholds drawn by the mechanism's own draw code."""
    if divide_scale != 1.0:  # the under-noised variant: same lattice, scale ÷ divide_scale
        g = cal.granularity
        cal = dataclasses.replace(
            cal,
            smooth_bound=(cal.smooth_bound - g) / divide_scale + g,
            scale=cal.scale / divide_scale,
        )
    bits = bit_source(seed)
    return np.array(
        [_threshold._release_threshold(cal, bits, clip=False).unclipped for _ in range(n)]
    )


def predicted_loss(cal_d, cal_dp, divide_scale: float = 1.0) -> float:
    """Laplace shift loss |Δcentre|/scale + |ln of the scale ratio| (analytic, no noise)."""
    shift = abs(cal_dp.center - cal_d.center) / max(cal_d.scale, cal_dp.scale)
    return divide_scale * shift + abs(np.log(cal_dp.scale / cal_d.scale))


def local_sensitivity_only(xs, rank, b, lower, upper):
    """The buggy variant's 'smooth' sensitivity: the local sensitivity alone."""
    padded = np.concatenate([[lower], xs, [upper]])
    return float(max(padded[rank + 1] - padded[rank], padded[rank] - padded[rank - 1]))


# -- exact checks of the set-up --------------------------------------------------------------


def test_draw_path_is_the_public_path():
    prefix = neighbour("across")
    cal = pak_threshold_calibration(prefix, **PARAMS)
    bits_a, bits_b = bit_source(5), bit_source(5)
    for _ in range(5):
        public = pak_threshold(prefix, clip=False, seed=bits_a, **PARAMS).unclipped
        assert public == _threshold._release_threshold(cal, bits_b, clip=False).unclipped


def test_worst_case_prefix_has_the_designed_sensitivities():
    cal = pak_threshold_calibration(base_prefix(), **PARAMS)
    assert cal.rank == 951 and cal.quantile == 0.5
    assert cal.smooth_sensitivity == pytest.approx(0.5)  # LS dominates SS
    across = pak_threshold_calibration(neighbour("across"), **PARAMS)
    assert across.quantile == 0.0
    assert predicted_loss(cal, across) == pytest.approx(cal.a / cal.kappa, rel=1e-3)
    assert predicted_loss(cal, across) < EPSILON < predicted_loss(cal, across, 3.0)
    tied = pak_threshold_calibration(tied_prefix(), **PARAMS)
    assert tied.smooth_sensitivity > 0.4  # smoothing sees the neighbour's gap


# -- fast tier --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base_draws() -> np.ndarray:
    return draws(pak_threshold_calibration(base_prefix(), **PARAMS), N_FAST, seed=1)


@pytest.mark.statistical
@pytest.mark.parametrize("kind", ["across", "near", "top"])
def test_threshold_audit_passes_at_claimed_epsilon_delta(base_draws, kind):
    out_dp = draws(pak_threshold_calibration(neighbour(kind), **PARAMS), N_FAST, seed=2)
    result = audit_samples(base_draws, out_dp, delta=DELTA)
    assert result.passes(EPSILON), result
    if kind == "across":
        assert result.epsilon_lb > 0.3, result  # close to the predicted 0.42: it has power


@pytest.mark.statistical
def test_threshold_audit_fails_with_scale_divided_by_3():
    cal_d = pak_threshold_calibration(base_prefix(), **PARAMS)
    cal_dp = pak_threshold_calibration(neighbour("across"), **PARAMS)
    out_d = draws(cal_d, N_FAST, seed=3, divide_scale=3.0)
    out_dp = draws(cal_dp, N_FAST, seed=4, divide_scale=3.0)
    result = audit_samples(out_d, out_dp, delta=DELTA)
    assert not result.passes(EPSILON), result


@pytest.mark.statistical
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_threshold_audit_local_sensitivity_variant(monkeypatch, noise):
    # Real mechanism passes on the tied prefix; with LS in place of SS it fails.
    tied, moved = tied_prefix(), tied_prefix()
    moved[-1] = 0.0  # one B/2 value to 0: x_(P−1) drops to 0, LS becomes B/2
    # Gaussian: a = ε/(5√(2 ln(2/δ))) is small, Eq. 11 needs a smaller offset (β_lt = 0.3).
    params = {**PARAMS, "noise": noise, **({"beta_lt": 0.3} if noise == "gaussian" else {})}

    def run(tag: int) -> object:
        cal_d = pak_threshold_calibration(tied, **params)
        cal_dp = pak_threshold_calibration(moved, **params)
        return audit_samples(
            draws(cal_d, N_FAST // 2, seed=tag),
            draws(cal_dp, N_FAST // 2, seed=tag + 1),
            delta=DELTA,
        )

    real = run(10)
    assert real.passes(EPSILON), real
    monkeypatch.setattr(_calibration, "_smooth_sensitivity_sorted", local_sensitivity_only)
    assert pak_threshold_calibration(tied, **params).smooth_sensitivity == 0.0
    broken = run(10)
    assert not broken.passes(EPSILON), broken


# -- slow tier --------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.statistical
def test_threshold_audit_slow_scale_divided_by_2_7():
    # Predicted loss 0.42 × 2.7 ≈ 1.13: a 13 % violation, visible at N = 200,000.
    cal_d = pak_threshold_calibration(base_prefix(), **PARAMS)
    cal_dp = pak_threshold_calibration(neighbour("across"), **PARAMS)
    real = audit_samples(draws(cal_d, N_SLOW, 20), draws(cal_dp, N_SLOW, 21), delta=DELTA)
    assert real.passes(EPSILON), real
    weak = audit_samples(
        draws(cal_d, N_SLOW, 20, divide_scale=2.7),
        draws(cal_dp, N_SLOW, 21, divide_scale=2.7),
        delta=DELTA,
    )
    assert not weak.passes(EPSILON), weak


@pytest.mark.slow
@pytest.mark.statistical
def test_threshold_audit_slow_public_path():
    # End to end through pak_threshold (calibration included on every run).
    def public(prefix, seed):
        bits = bit_source(seed)
        return np.array(
            [
                pak_threshold(prefix, clip=False, seed=bits, **PARAMS).unclipped
                for _ in range(N_FAST)
            ]
        )

    result = audit_samples(public(base_prefix(), 30), public(neighbour("across"), 31), delta=DELTA)
    assert result.passes(EPSILON), result
    assert result.epsilon_lb > 0.3, result
