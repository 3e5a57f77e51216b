"""Audits of PAK's Mechanism 1 with an open suffix counter (issue 27 item 5): ``counter=
"unbounded"`` (pure ε, [CSS11] §4 epochs of k-ary trees) and ``"unbounded_blt"`` (a time-invariant
BLT with discrete Gaussian noise at (ε, δ)), end to end through ``pak_release``.

Set-up: the prefix of ``test_pak_audit`` (m = 8000 values in [0, B/10], so τ ≈ B/10; its
calibration memoised, a pure function), then a suffix of zeros. Neighbours: D with σ(m + 1) = 0,
D' with σ(m + 1) = B, clipped to τ: the suffix counter's input moves by τ at its first step, the
prefix (and so τ and c(σ, m)) is the same on both. Loss claimed: (ε, δ), the suffix counter's
share (parallel composition with the prefix's (ε₁ + ε₂, δ)).

Statistics (the most powerful ones the outputs allow, as in ``test_unbounded_audit`` and
``test_factorisation_audit``):

* ``"unbounded"``: the first epoch holds 7² steps (3 levels, :data:`SCHEDULE`); step 1 lies in
  its blocks (0, 1], (0, 7], (0, 49], read back exactly by õ(1), õ(7), õ(49) (one balanced digit
  each; c(σ, m) cancels in õ(t) = ĉ(σ, m + t) − ĉ(σ, m)). Σ_t (|õ(t)| − |õ(t) − τ|)/τ is the
  Laplace log-likelihood ratio up to the factor τ/b = ε/(3 + γ/τ): its largest value has
  likelihood ratio below e^ε. Twin: ε × 4 in the blocks' noise (``kary_noise`` patched; the
  slow tier: ε × 2).
* ``"unbounded_blt"``: the published encoding's first 256 coordinates projected on the
  infinite column c (80% of its norm), in units of σ. Twin: σ/12 in the fast tier's 1,000 runs
  (a mean shift of about 2.5 noise sds, caught at ε_lb ≈ 2), σ/5 in the slow tier's 8,000 (as
  the open BLT's own audit). At (1, 10⁻⁶) a Gaussian's loss
  sits in its far tail, so the real counter's ε_lb stays near 0 at these sizes.
"""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pytest
from _audit import audit_samples, sample_pair
from test_pak_audit import M, _cached_calibration, base_stream

from mechanisms import pak_release
from mechanisms.counting import _kary, _open_blt, _unbounded

EPSILON, DELTA, BOUND = 1.0, 1e-6, 1.0
PARAMS = {"bound": BOUND, "epsilon": EPSILON, "delta": DELTA, "time_lag": M, "lam": 0.5,
          "p": 0.1, "beta_lt": 0.05, "r": 1.0, "eps1_share": 0.5}  # fmt: skip
READS = (1, 7, 49)  # õ(t) reading the three blocks of epoch 0 that hold step 1
SUFFIX = {"unbounded": 49, "unbounded_blt": 256}
#: (runs, twin's factor) per counter: the fast tier, then the slow one.
FAST = {"unbounded": (1500, 4.0), "unbounded_blt": (1000, 12.0)}
SLOW = {"unbounded": (6000, 2.0), "unbounded_blt": (8000, 5.0)}


def _stream(counter: str, value: float) -> np.ndarray:
    x = np.concatenate([base_stream()[:M], np.zeros(SUFFIX[counter])])
    x[M] = value
    return x


def _statistic(counter: str):
    coef = _open_blt.open_strategy().coefficients(SUFFIX["unbounded_blt"])

    def statistic(data, n, bits):
        out = np.empty(n)
        with _cached_calibration():
            for r in range(n):
                rel = pak_release(data, seed=bits, counter=counter, **PARAMS)
                if counter == "unbounded":
                    o = rel.prefix_sums[M - 1 + np.array(READS)] - rel.prefix_sums[M - 1]
                    tau = rel.threshold
                    out[r] = float(np.sum(np.abs(o) - np.abs(o - tau))) / tau
                else:
                    fr = rel.counter.factorisation
                    out[r] = float(coef @ fr.encoded) / fr.noise.sigma
        return out

    return statistic


@contextlib.contextmanager
def _under_noised(counter: str, factor: float):
    with pytest.MonkeyPatch.context() as mp:
        if counter == "unbounded":
            real = _kary.kary_noise
            mp.setattr(
                _kary, "kary_noise",
                lambda n, *, epsilon, bound, fanout: real(
                    n, epsilon=factor * epsilon, bound=bound, fanout=fanout
                ),
            )  # fmt: skip
        else:
            real = _open_blt._calibrate

            def under(*args):
                cal = real(*args)
                return dataclasses.replace(cal, sigma_units=cal.sigma_units / factor)

            mp.setattr(_open_blt, "_calibrate", under)
        yield


def _samples(counter: str, runs: int, seed: int):
    return sample_pair(
        _statistic(counter), _stream(counter, 0.0), _stream(counter, BOUND), n=runs, seed=seed
    )


def test_setup_reads_the_blocks_of_step_one_and_clips():
    rel = pak_release(_stream("unbounded", BOUND), seed=1, counter="unbounded", **PARAMS)
    assert rel.threshold < BOUND / 5  # D' moves the counter's input by τ, not B
    assert _unbounded._epoch(0, None) == (7, 2)  # epoch 0: 49 steps, 3 levels
    # õ(1), õ(7), õ(49) each read one block: their variance is one block's
    v = _kary.kary_noise(49, epsilon=EPSILON, bound=rel.threshold, fanout=7).variance
    for t in READS:
        assert rel.counter.range_variance(0, t - 1) == pytest.approx(v, rel=1e-12)


def _audit(counter: str, tier: dict, seed: int) -> None:
    runs, factor = tier[counter]
    real = audit_samples(*_samples(counter, runs, seed), delta=DELTA)
    assert real.passes(EPSILON), real
    if counter == "unbounded":  # the counter spends its ε: the audit sees it
        assert real.epsilon_lb > 0.05, real
    with _under_noised(counter, factor):
        weak = audit_samples(*_samples(counter, runs, seed), delta=DELTA)
    assert not weak.passes(EPSILON), weak


@pytest.mark.statistical
@pytest.mark.parametrize("counter", sorted(SUFFIX))
def test_pak_open_counter_audit_passes_and_an_under_noised_twin_fails(counter):
    _audit(counter, FAST, 31)


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("counter", sorted(SUFFIX))
def test_pak_open_counter_audit_with_more_runs_and_a_closer_twin(counter):
    _audit(counter, SLOW, 32)
