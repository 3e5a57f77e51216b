"""The pure-ε counter for open streams (``mechanisms.counting._unbounded``): epochs of kʲ
steps, a k-ary tree each; streaming and batch identical, exact variances, validation."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms.core._errors import DomainError, ParameterError
from mechanisms.counting import (
    UnboundedKaryCounter,
    counter_variance,
    unbounded_kary_release,
    unbounded_kary_variance,
)
from mechanisms.counting._kary import kary_noise


def _stream(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 5, size=n) / 4.0


@pytest.mark.parametrize("fanout", [3, 5, 11])
def test_streaming_and_batch_release_identical_values_across_epochs(fanout):
    data = _stream(40)  # k = 3: epochs 1, 3, 9, 27 (the last open); k = 5: 1, 5, 25, 125
    rel = unbounded_kary_release(data, epsilon=1.0, bound=1.0, fanout=fanout, seed=5)
    counter = UnboundedKaryCounter(epsilon=1.0, bound=1.0, fanout=fanout, seed=5)
    assert [counter.push(float(x)) for x in data] == rel.prefix_sums.tolist()
    assert counter.steps == 40


def test_a_prefix_of_the_stream_releases_the_same_values_as_the_whole():
    # no n: the release of the first 20 steps does not depend on what comes after
    data = _stream(60, seed=3)
    whole = unbounded_kary_release(data, epsilon=0.5, bound=1.0, fanout=3, seed=9)
    part = unbounded_kary_release(data[:20], epsilon=0.5, bound=1.0, fanout=3, seed=9)
    assert part.prefix_sums.tolist() == whole.prefix_sums[:20].tolist()


def test_epochs_have_k_to_the_j_steps():
    counter = UnboundedKaryCounter(epsilon=1.0, bound=1.0, fanout=3, seed=1)
    epochs = []
    for _ in range(40):
        counter.push(0.0)
        epochs.append(counter.epoch)
    # steps 1 | 2-4 | 5-13 | 14-40
    assert epochs == [0] + [1] * 3 + [2] * 9 + [3] * 27


def test_variance_known_answers_at_k_3():
    # v_j = 2((j + 1)·B/ε)² up to the lattice term; closed epochs add one block each
    var = unbounded_kary_variance(np.array([1, 2, 4, 12, 13, 14]), epsilon=1.0, bound=1.0, fanout=3)
    v = [kary_noise(3**j, epsilon=1.0, bound=1.0, fanout=3).variance for j in range(4)]
    expected = [
        v[0],  # step 1: epoch 0, one block
        v[0] + v[1],  # step 2: position 1 of epoch 1
        v[0] + v[1],  # step 4: position 3 = one level-1 block
        v[0] + v[1] + 2 * v[2],  # step 12: position 8 = 9 − 1, two blocks
        v[0] + v[1] + v[2],  # step 13: position 9, one block
        v[0] + v[1] + v[2] + v[3],  # step 14: first step of epoch 3
    ]
    np.testing.assert_allclose(var, expected, rtol=1e-12)
    assert v[1] == pytest.approx(8.0, rel=1e-5)


def test_counter_variance_matches_the_function():
    counter = UnboundedKaryCounter(epsilon=2.0, bound=3.0, fanout=5, seed=2)
    assert counter.variance() == 0.0
    for _ in range(31):
        counter.push(1.0)
    ref = unbounded_kary_variance(np.arange(1, 32), epsilon=2.0, bound=3.0, fanout=5)
    assert counter.variance() == ref[-1]
    assert counter.variance(7) == ref[6]


def test_exact_variance_matches_seeded_releases():
    data = _stream(30, seed=4)
    truth = np.cumsum(data)
    runs = np.array(
        [
            unbounded_kary_release(data, epsilon=1.0, bound=1.0, fanout=3, seed=s).prefix_sums
            for s in range(1500)
        ]
    )
    emp = ((runs - truth) ** 2).mean(axis=0)
    var = unbounded_kary_variance(np.arange(1, 31), epsilon=1.0, bound=1.0, fanout=3)
    # Laplace sums: the empirical second moment's relative s.e. is ≤ √(5/1500) ≈ 0.06
    np.testing.assert_allclose(emp, var, rtol=0.25)
    assert abs(emp.mean() / var.mean() - 1.0) < 0.08


def test_within_the_sized_counter_worst_step_at_powers_of_two():
    # the claim of docs/results/counting_unbounded.md at the smaller t (the bench covers 2^24)
    for t in (2**10, 2**12, 2**14):
        sized = counter_variance("kary_tree", t, epsilon=1.0, bound=1.0).max()
        ours = unbounded_kary_variance(np.array([t]), epsilon=1.0, bound=1.0)[0]
        assert ours <= 1.5 * sized


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": 0.0, "bound": 1.0}, "epsilon"),
        ({"epsilon": 1.0, "bound": -1.0}, "bound"),
        ({"epsilon": 1.0, "bound": 1.0, "fanout": 4}, "fanout"),
        ({"epsilon": 1.0, "bound": 1.0, "fanout": 1}, "fanout"),
        ({"epsilon": 1.0, "bound": 1.0, "fanout": True}, "fanout"),
    ],
)
def test_bad_parameters_fail_before_any_draw(kwargs, name):
    class NoBits:
        def random_raw(self, size):  # pragma: no cover - must not be reached
            raise AssertionError("drew bits")

        def spawn(self, n):  # pragma: no cover - must not be reached
            raise AssertionError("spawned")

    with pytest.raises(ParameterError, match=f"'{name}'"):
        UnboundedKaryCounter(**kwargs, seed=NoBits())
    with pytest.raises(ParameterError, match=f"'{name}'"):
        unbounded_kary_release([0.5], **kwargs, seed=NoBits())


def test_bad_values_fail_before_any_draw_and_leave_the_counter_unchanged():
    counter = UnboundedKaryCounter(epsilon=1.0, bound=1.0, fanout=3, seed=1)
    counter.push(0.5)
    for bad in (float("nan"), 2.0, -0.1, float("inf")):
        with pytest.raises(DomainError, match="'x'"):
            counter.push(bad)
    assert counter.steps == 1 and counter.epoch == 0
    with pytest.raises(DomainError, match="'values'"):
        unbounded_kary_release([0.5, 3.0], epsilon=1.0, bound=1.0)


def test_variance_rejects_bad_steps():
    with pytest.raises(ParameterError, match="'steps'"):
        unbounded_kary_variance(np.array([0, 1]), epsilon=1.0, bound=1.0)
    with pytest.raises(ParameterError, match="'t'"):
        UnboundedKaryCounter(epsilon=1.0, bound=1.0).variance(-1)


def test_release_carries_an_event_level_pure_epsilon_guarantee():
    rel = unbounded_kary_release(_stream(5), epsilon=0.7, bound=1.0, seed=1)
    assert rel.guarantee.budget.epsilon == 0.7 and rel.guarantee.budget.delta == 0.0
    assert rel.n == 5 and rel.variance.shape == (5,)
    assert not rel.prefix_sums.flags.writeable


def test_default_epochs_streaming_equals_batch_across_boundaries():
    from mechanisms.counting._unbounded import SCHEDULE

    (k0, m0), (k1, m1) = SCHEDULE[0], SCHEDULE[1]
    n = k0**m0 + k1**m1 + 5  # two closed epochs and part of the third
    data = _stream(n, seed=8)
    rel = unbounded_kary_release(data, epsilon=1.0, bound=1.0, seed=21)
    counter = UnboundedKaryCounter(epsilon=1.0, bound=1.0, seed=21)
    assert [counter.push(float(x)) for x in data] == rel.prefix_sums.tolist()
    assert counter.epoch == 2


def test_the_shipped_schedule_is_valid_and_continues_past_its_table():
    from mechanisms.counting._unbounded import SCHEDULE, _epoch

    assert all(k % 2 == 1 and k >= 3 and m >= 0 for k, m in SCHEDULE)
    k, m = SCHEDULE[-1]
    assert _epoch(len(SCHEDULE), None) == (k, m + 1)
    assert _epoch(len(SCHEDULE) + 2, None) == (k, m + 3)
    # far beyond the table the variance stays finite and increasing in the epoch
    far = unbounded_kary_variance(np.array([2**40, 2**50]), epsilon=1.0, bound=1.0)
    assert np.all(np.isfinite(far)) and far[1] > far[0]


def test_range_variance_exact_and_matches_seeded_releases():
    from mechanisms.counting import unbounded_kary_range_variance as rv

    var = unbounded_kary_variance(np.arange(1, 41), epsilon=1.0, bound=1.0, fanout=3)
    assert [rv(1, t, epsilon=1.0, bound=1.0, fanout=3) for t in (1, 13, 40)] == [
        var[0],
        var[12],
        var[39],
    ]
    v2 = kary_noise(9, epsilon=1.0, bound=1.0, fanout=3).variance
    assert rv(5, 13, epsilon=1.0, bound=1.0, fanout=3) == v2  # epoch 2 whole: one block
    data = _stream(30, seed=6)
    runs = np.array(
        [
            unbounded_kary_release(data, epsilon=1.0, bound=1.0, fanout=3, seed=s).prefix_sums
            for s in range(1500)
        ]
    )
    rel = unbounded_kary_release(data, epsilon=1.0, bound=1.0, fanout=3, seed=0)
    for i, j in [(3, 7), (4, 12), (10, 25), (13, 29)]:  # 0-based, inclusive
        got = runs[:, j] - (runs[:, i - 1] if i else 0.0) - data[i : j + 1].sum()
        assert np.mean(got**2) == pytest.approx(rel.range_variance(i, j), rel=0.25)
    with pytest.raises(ParameterError, match="'first'"):
        rv(3, 2, epsilon=1.0, bound=1.0)
