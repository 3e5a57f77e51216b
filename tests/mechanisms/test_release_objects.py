"""Issue 11 §2 and §4: release objects hold only released values and public parameters, carry
their privacy record, and every release entry point charges one ledger once, with its unit,
after validation and before any draw."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from _recording_bits import RecordingBits
from _release_fields import assert_nothing_data_dependent

from mechanisms import (
    BinaryTreeCounter,
    Budget,
    BudgetExceededError,
    BudgetLedger,
    EventLevel,
    LocalDP,
    ParameterError,
    PrivacyRecord,
    ToPSStream,
    WEvent,
    binary_tree_final_sums,
    binary_tree_prefix_sums,
    binary_tree_release,
    laplace_prefix_sums,
    pak_release,
    pak_threshold,
    pak_threshold_calibration,
    topl_release,
    tops_perturb,
    tops_release,
    tops_threshold,
)

B = 10.0
_RNG = np.random.default_rng(11)
X = np.round(_RNG.exponential(1.5, 3000).clip(0, B), 3)
#: Neighbour: one value of the prefix moved to B (changes x̂_λp, SS and the ToPS scores).
X_N = X.copy()
X_N[int(np.argsort(X[:1500])[1400])] = B
PAK = {"bound": B, "epsilon": 1.0, "delta": 1e-6, "time_lag": 20_000, "p": 0.05, "lam": 0.9}
#: PAK needs a long prefix for an unclipped τ (SS shrinks with m): its own stream and neighbour.
XP = np.round(_RNG.exponential(1.5, 40_000).clip(0, B), 3)
XP_N = XP.copy()
XP_N[int(np.argsort(XP[:20_000])[19_200])] = B
TH = {"bound": B, "epsilon": 1.0, "delta": 1e-6, "lam": 0.9, "p": 0.05, "beta_lt": 0.01}
TOPS = {"bound": B, "epsilon_threshold": 0.5, "epsilon_perturb": 0.5, "time_lag": 1500}

RELEASES = {
    "binary_tree_release": lambda x, s: binary_tree_release(x, epsilon=1.0, bound=B, seed=s),
    "laplace_prefix_sums": lambda x, s: laplace_prefix_sums(x, epsilon=1.0, bound=B, seed=s),
    "pak_release": lambda x, s: pak_release(x, **PAK, r=1.0, seed=s),
    "pak_release_plain_bt": lambda x, s: pak_release(x, **PAK, threshold=False, seed=s),
    "pak_threshold": lambda x, s: pak_threshold(x[:1500], **TH, seed=s),
    "tops_release": lambda x, s: tops_release(x, **TOPS, candidates=64, seed=s),
    "tops_threshold": lambda x, s: tops_threshold(
        x[:1500], bound=B, epsilon=0.5, horizon=1500, epsilon_perturb=0.5, candidates=64, seed=s
    ),
    "tops_perturb": lambda x, s: tops_perturb(x, threshold=5.0, bound=B, epsilon=1.0, seed=s),
    "topl_release": lambda x, s: topl_release(x, bound=B, epsilon=1.0, time_lag=1500, seed=s),
}


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_no_public_field_of_a_release_depends_on_the_data(name):
    data, neighbour = (XP, XP_N) if name.startswith("pak_release") else (X, X_N)
    noisy, public = assert_nothing_data_dependent(RELEASES[name], data, neighbour)
    assert noisy, "the released values must be recognised as noise-dependent"
    assert any(p.startswith(".privacy") for p in public)


def test_the_walker_catches_the_old_threshold_scale_leak():
    """The helper has power: the old ThresholdRelease carried S/a, a function of SS."""

    @dataclass(frozen=True)
    class OldThresholdRelease:
        threshold: float
        scale: float

    def old(x, seed):
        rel, info = pak_threshold(x[:1500], **TH, seed=seed, analysis=True)
        return OldThresholdRelease(threshold=rel.threshold, scale=info.scale)

    cal = pak_threshold_calibration(X[:1500], **TH)
    cal_n = pak_threshold_calibration(X_N[:1500], **TH)
    assert cal.scale != cal_n.scale  # the neighbour does move the smooth sensitivity
    with pytest.raises(AssertionError, match=r"\.scale"):
        assert_nothing_data_dependent(old, X, X_N)


def test_analysis_objects_hold_what_the_release_must_not():
    rel, info = pak_release(XP, **PAK, seed=1, analysis=True)
    assert info.calibration.quantile > 0 and info.scale > 0
    np.testing.assert_array_equal(rel.prefix_sums, pak_release(XP, **PAK, seed=1).prefix_sums)
    plain, none = pak_release(XP, **PAK, threshold=False, seed=1, analysis=True)
    assert none is None and plain.time_lag == 0


@pytest.mark.parametrize(
    ("name", "mechanism", "unit"),
    [
        ("binary_tree_release", "binary-tree", "event"),
        ("laplace_prefix_sums", "laplace-per-value", "event"),
        ("pak_release", "pak-mechanism-1", "event"),
        ("pak_threshold", "pak-threshold", "event"),
        ("tops_release", "tops", "event"),
        ("tops_threshold", "tops-threshold-laplace", "event"),
        ("tops_perturb", "tops-perturb", "event"),
        ("topl_release", "topl", "local"),
    ],
)
def test_every_release_carries_its_privacy_record(name, mechanism, unit):
    data = XP if name == "pak_release" else X
    seeded = RELEASES[name](data, 3).privacy
    assert isinstance(seeded, PrivacyRecord)
    assert (seeded.mechanism, seeded.unit, seeded.seeded) == (mechanism, unit, True)
    assert "not a release" in seeded.describe()
    secure = RELEASES[name](data, None).privacy
    assert not secure.seeded and secure.to_dict()["release"]
    rel = RELEASES[name](data, 3)
    assert secure.epsilon == rel.guarantee.budget.epsilon


def test_streams_carry_their_record_too():
    counter = BinaryTreeCounter(8, epsilon=1.0, bound=B)
    assert not counter.privacy.seeded and counter.privacy.mechanism == "binary-tree-counter"
    stream = ToPSStream(**TOPS, horizon=100, seed=1)
    assert stream.privacy.seeded and stream.privacy.epsilon == 0.5


# -- §4: one accountant ------------------------------------------------------------------------


def _counter(seed, ledger):
    c = BinaryTreeCounter(16, epsilon=1.0, bound=B, seed=seed, ledger=ledger)
    return [c.push(v) for v in X[:16]]


def _stream(seed, ledger):
    s = ToPSStream(**TOPS, horizon=1500, candidates=64, seed=seed, ledger=ledger)
    return s.extend(X)


#: name -> (call(seed, ledger), budget charged, unit)
CHARGED = {
    "binary_tree_release": (
        lambda s, led: binary_tree_release(X, epsilon=1.0, bound=B, seed=s, ledger=led),
        Budget(1.0),
        EventLevel(),
    ),
    "binary_tree_prefix_sums": (
        lambda s, led: binary_tree_prefix_sums(X, epsilon=0.7, bound=B, seed=s, ledger=led),
        Budget(0.7),
        EventLevel(),
    ),
    "binary_tree_final_sums": (
        lambda s, led: binary_tree_final_sums(
            X, epsilon=0.5, bound=B, repetitions=3, seed=s, ledger=led
        ),
        Budget(1.5),
        EventLevel(),
    ),
    "BinaryTreeCounter": (_counter, Budget(1.0), EventLevel()),
    "laplace_prefix_sums": (
        lambda s, led: laplace_prefix_sums(X, epsilon=0.3, bound=B, seed=s, ledger=led),
        Budget(0.3),
        EventLevel(),
    ),
    "pak_release": (
        lambda s, led: pak_release(XP, **PAK, seed=s, ledger=led),
        Budget(1.0, 1e-6),
        EventLevel(),
    ),
    "pak_threshold": (
        lambda s, led: pak_threshold(X[:1500], **TH, seed=s, ledger=led),
        Budget(1.0, 1e-6),
        EventLevel(),
    ),
    "tops_release": (
        lambda s, led: tops_release(X, **TOPS, candidates=64, seed=s, ledger=led),
        Budget(0.5),
        EventLevel(),
    ),
    "tops_threshold": (
        lambda s, led: tops_threshold(
            X[:1500], bound=B, epsilon=0.4, horizon=1500, epsilon_perturb=0.5, seed=s, ledger=led
        ),
        Budget(0.4),
        EventLevel(),
    ),
    "tops_perturb": (
        lambda s, led: tops_perturb(X, threshold=5.0, bound=B, epsilon=0.9, seed=s, ledger=led),
        Budget(0.9),
        EventLevel(),
    ),
    "ToPSStream": (_stream, Budget(0.5), EventLevel()),
    "topl_release": (
        lambda s, led: topl_release(X, bound=B, epsilon=1.0, time_lag=1500, seed=s, ledger=led),
        Budget(1.0),
        LocalDP(),
    ),
}


@pytest.mark.parametrize("name", sorted(CHARGED))
def test_each_entry_point_charges_the_ledger_once_with_its_budget_and_unit(name):
    call, budget, unit = CHARGED[name]
    ledger = BudgetLedger(Budget(10.0, 1e-3), unit=unit)
    bits = RecordingBits(5)
    call(bits, ledger)
    assert len(ledger.charges) == 1
    charge = ledger.charges[0]
    assert charge.budget.epsilon == pytest.approx(budget.epsilon, rel=1e-12)
    assert charge.budget.delta == budget.delta
    assert bits.words > 0  # it did draw, after the charge


@pytest.mark.parametrize("name", sorted(CHARGED))
def test_a_refused_overspend_draws_nothing(name):
    call, budget, unit = CHARGED[name]
    ledger = BudgetLedger(Budget(budget.epsilon * 0.99, max(budget.delta, 1e-9)), unit=unit)
    with pytest.raises(BudgetExceededError):
        call(RecordingBits(refuse=True, spawn=False), ledger)
    assert ledger.charges == ()


@pytest.mark.parametrize("name", sorted(CHARGED))
def test_a_ledger_of_another_unit_is_refused_before_any_draw(name):
    call, budget, _unit = CHARGED[name]
    ledger = BudgetLedger(Budget(10.0, 1e-3), unit=WEvent(48))
    with pytest.raises(ParameterError, match="privacy unit"):
        call(RecordingBits(refuse=True, spawn=False), ledger)
    assert ledger.charges == ()


@pytest.mark.parametrize("name", sorted(CHARGED))
def test_a_ledger_that_is_not_a_ledger_is_refused(name):
    call, *_ = CHARGED[name]
    with pytest.raises(ParameterError, match="'ledger'"):
        call(RecordingBits(refuse=True, spawn=False), {"epsilon": 1.0})
