"""BLT counters ([DMRST24]; ``mechanisms.counting._blt``): the factorisation, its variance, the
streaming push, the shipped constants. What the BLT shares with the square root (calibration,
seeded variances, streaming == batch, bad inputs, clamping) is parametrised over both in
``test_factorisation.py``."""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest
from scipy.linalg import toeplitz

from mechanisms import DomainError, ParameterError
from mechanisms.counting import _blt
from mechanisms.counting._blt import (
    BLTCounter,
    BLTStrategy,
    blt_loss,
    blt_release,
    blt_strategy,
    blt_variance,
)
from mechanisms.counting._factorisation import sqrt_coefficients, sqrt_factorisation_variance
from mechanisms.counting._open_blt import UnboundedBLTCounter, open_strategy


def test_the_inverse_coefficients_invert_c():
    strat = blt_strategy(200)
    c = np.tril(toeplitz(strat.coefficients(200)))
    r = np.tril(toeplitz(strat.inverse_coefficients(200)))
    np.testing.assert_allclose(r @ c, np.eye(200), atol=1e-10)


def test_the_coefficients_are_sums_of_powers():
    strat = BLTStrategy(theta=(0.5, 0.9), omega=(0.3, 0.1))
    c = strat.coefficients(6)
    expected = [1.0] + [0.3 * 0.5 ** (j - 1) + 0.1 * 0.9 ** (j - 1) for j in range(1, 6)]
    np.testing.assert_allclose(c, expected, rtol=1e-14)


@pytest.mark.parametrize(
    "k",
    [4, 8, 10, 12, 14, 16, 18, 20]
    + [pytest.param(k, marks=pytest.mark.slow) for k in (21, 22, 23, 24)],
)
def test_every_shipped_worst_step_strategy_is_within_1pct_of_the_square_root(k):
    n = 1 << k
    strat = blt_strategy(n)
    c2 = np.cumsum(sqrt_coefficients(n) ** 2)
    value = blt_loss(strat.theta, strat.omega, n)
    assert value <= 1.01 * c2[-1] ** 2


@pytest.mark.parametrize("k", [6, 10, 14, 20])
def test_the_mean_strategies_beat_the_worst_step_ones_on_the_mean(k):
    n = 1 << k
    best_mean = blt_strategy(n, at="mean")
    best_max = blt_strategy(n, at="max")
    assert blt_loss(best_mean.theta, best_mean.omega, n, at="mean") <= blt_loss(
        best_max.theta, best_max.omega, n, at="mean"
    ) * (1 + 1e-9)


def test_variance_near_the_square_root_at_epsilon_delta():
    n = 1 << 14
    sq = sqrt_factorisation_variance(n, epsilon=1.0, delta=1e-6, bound=1.0)
    bl = blt_variance(n, epsilon=1.0, delta=1e-6, bound=1.0)
    assert bl[-1] <= 1.01 * sq[-1]
    assert np.all(np.diff(bl) >= 0)


def test_bad_strategy_parameters_are_refused():
    # the shared bad inputs (delta, epsilon, bound, values, a full counter) are parametrised
    # over both factorisations in test_factorisation.py
    with pytest.raises(ParameterError, match="'at'"):
        blt_strategy(10, at="median")
    with pytest.raises(ParameterError, match="'n'"):
        blt_strategy(1 << 25)
    with pytest.raises(ParameterError, match="theta"):
        BLTStrategy(theta=(1.5,), omega=(0.1,))


def test_push_many_is_the_same_release_as_push():
    # values outside [0, B] are clamped by both; chunks cross a noise block of 4096 draws
    x = np.random.default_rng(3).uniform(-0.5, 3.5, 6000)
    one = BLTCounter(6000, epsilon=0.5, delta=1e-8, bound=3.0, seed=9)
    many = BLTCounter(6000, epsilon=0.5, delta=1e-8, bound=3.0, seed=9)
    by_step = np.array([one.push(v) for v in x])
    mixed = np.concatenate(
        [
            many.push_many(x[:1]),
            many.push_many(x[1:100]),
            [many.push(v) for v in x[100:150]],
            many.push_many(x[150:150]),
            many.push_many(x[150:4100]),
            many.push_many(x[4100:]),
        ]
    )
    # the encoder's buffers (hence ŷ) agree to the last bit; the decoder to floating point
    assert many._enc == one._enc
    np.testing.assert_allclose(mixed, by_step, rtol=0, atol=1e-9 * math.sqrt(one.variance()))
    rel = blt_release(np.clip(x, 0.0, 3.0), epsilon=0.5, delta=1e-8, bound=3.0, seed=9)
    np.testing.assert_allclose(
        mixed, rel.prefix_sums, rtol=0, atol=1e-3 * math.sqrt(rel.variance[-1])
    )


def test_push_many_refuses_bad_input_before_consuming_anything():
    counter = BLTCounter(4, epsilon=1.0, delta=1e-6, bound=1.0, seed=2)
    twin = BLTCounter(4, epsilon=1.0, delta=1e-6, bound=1.0, seed=2)
    with pytest.raises(DomainError, match="NaN"):
        counter.push_many([0.5, float("nan")])
    with pytest.raises(DomainError, match="one-dimensional"):
        counter.push_many([[0.5], [0.5]])
    with pytest.raises(ParameterError, match="4 remain and 5 were given"):
        counter.push_many([0.5] * 5)
    np.testing.assert_allclose(counter.push_many([0.5, 1.0]), [twin.push(0.5), twin.push(1.0)])


def test_long_streams_encode_in_extended_precision_batch_and_push_alike():
    # beyond 2^20 the batch release runs the streaming encoder in long double: no FFT touches
    # y, so the rounding bound is the buffers' at u = 2^-64 (the worst step was 2.3x the
    # square root's at 2^24 with the double-precision bounds)
    n = (1 << 20) + 3000
    x = np.random.default_rng(2).uniform(0.0, 1.0, n)
    rel = blt_release(x, epsilon=1.0, delta=1e-6, bound=1.0, seed=3)
    counter = BLTCounter(n, epsilon=1.0, delta=1e-6, bound=1.0, seed=3)
    sums = np.concatenate(
        [
            counter.push_many(x[:1000]),
            [counter.push(v) for v in x[1000:1050]],
            counter.push_many(x[1050:]),
        ]
    )
    np.testing.assert_allclose(
        sums, rel.prefix_sums, rtol=0, atol=1e-9 * math.sqrt(rel.variance[-1])
    )
    strat = blt_strategy(1 << 22)
    cal = _blt._calibrate(1 << 22, 1.0, 1e-6, 1.0, strat)
    coef = strat.coefficients(1 << 22)
    exact = cal.units_bound * math.sqrt(float(coef @ coef))
    assert cal.sensitivity_units <= exact * 1.002  # was 1.05 in doubles


@pytest.mark.skipif(_blt._EXTENDED_UNIT != 2.0**-64, reason="x87 extended precision only")
@pytest.mark.parametrize("k", [21, 22, 23, 24, None])
def test_the_wide_encoder_bound_is_below_the_extended_encoders(k):
    # the sub-block encoder's rounding bound is below the whole extended-precision encoder's,
    # which the calibration keeps paying: σ did not change when the push moved to doubles
    strat = open_strategy() if k is None else blt_strategy(1 << k)
    for units in (1.0, 3e5, 2.0**30):
        old = _blt._stream_slack(strat, units, unit=_blt._EXTENDED_UNIT)
        assert _blt._block_slack(strat, units) <= 0.85 * old
        assert _blt._wide_slack(strat, units) == old


@pytest.mark.parametrize("wide", ["open", "sized"])
def test_the_wide_encoder_encodes_c_times_u(wide):
    # y − (C·u) within 1/2 + η: the base, the carry and the in-block buffers add up to C·u
    # across sub-blocks of 256 steps (a carry off by one power of θ would miss by far more)
    if wide == "open":
        counter = UnboundedBLTCounter(epsilon=1.0, delta=1e-6, bound=1.0, seed=4)
    else:
        counter = BLTCounter((1 << 20) + 1, epsilon=1.0, delta=1e-6, bound=1.0, seed=4)
    g, top = counter._cal.granularity, counter._cal.units_bound
    rng = np.random.default_rng(5)
    units = rng.integers(0, int(top) + 1, 900).astype(np.float64)
    units[300:600] = top  # a run at the bound: the largest state
    first = counter.push_many(units[:100] * g)
    rest = np.array([counter.push(v) for v in units[100:130] * g])
    _, encoded = counter._push_many(units[130:] * g, "test")
    assert first.size + rest.size + encoded.size == units.size
    y = encoded / g - counter._block_array[130:900]
    th = np.array(counter.strategy.theta, dtype=np.longdouble)
    om = np.array(counter.strategy.omega, dtype=np.longdouble)
    powers = np.cumprod(np.vstack([np.ones_like(th), np.tile(th, (898, 1))]), axis=0)
    coef = np.concatenate([[np.longdouble(1.0)], powers @ om])  # c_0..c_899
    exact = np.array(
        [np.dot(coef[: t + 1][::-1], units[: t + 1].astype(np.longdouble)) for t in range(900)]
    )[130:]
    assert np.all(np.abs(y - exact) <= 0.5 + 0.01)


def _reference_push(counter, x):
    """The push as a plain loop over the buffers (the module notes' recursion, the same
    floating-point operations in the same order), for the generated, unrolled push."""
    x = counter._clamp(x)
    t = counter._t
    pos = t % 4096
    if pos == 0:
        counter._draw_block(t)
    u = float(round(x / counter._cal.granularity))
    u = min(u, counter._cal.units_bound)
    acc = u
    if counter._wide:
        if t % 256 == 0:
            counter._next_carry(t)
        acc = u + counter._carry[t % 256]
    enc, dec, back = list(counter._enc), list(counter._dec), 0.0
    for i, (a, w) in enumerate(zip(counter._theta, counter._omega, strict=True)):
        dec[i] = a * dec[i] + counter._last
        back += w * dec[i]
        acc += w * enc[i]
        enc[i] = a * enc[i] + u
    step = float(round(acc)) + counter._block[pos] - back
    counter._enc, counter._dec, counter._last = tuple(enc), tuple(dec), step
    counter._t = t + 1
    counter._sum += step
    return counter._sum * counter._cal.granularity


@pytest.mark.parametrize("n", [5000, (1 << 20) + 5])
def test_the_unrolled_push_is_the_loop(n):
    # the generated push (d = 8 unrolled) against a plain loop: the same doubles, step by step
    # (700 steps: past two sub-blocks of the wide encoder), values clamped alike
    x = np.random.default_rng(6).uniform(-0.2, 1.2, 700)
    fast = BLTCounter(n, epsilon=1.0, delta=1e-6, bound=1.0, seed=8)
    loop = BLTCounter(n, epsilon=1.0, delta=1e-6, bound=1.0, seed=8)
    assert [fast.push(v) for v in x] == [_reference_push(loop, v) for v in x]
    assert fast._enc == loop._enc and fast._dec == loop._dec


@pytest.mark.parametrize("how", ["copy", "pickle"])
def test_a_copied_counter_pushes_its_own_state(how):
    # the instance's push is bound to its counter: a copy (or an unpickled counter) must move
    # its own state, not the original's
    x = np.random.default_rng(7).uniform(0.0, 1.0, 300)
    counter = BLTCounter(600, epsilon=1.0, delta=1e-6, bound=1.0, seed=2)
    twin = BLTCounter(600, epsilon=1.0, delta=1e-6, bound=1.0, seed=2)
    head = [counter.push(v) for v in x[:100]]
    assert head == [twin.push(v) for v in x[:100]]
    other = copy.deepcopy(counter) if how == "copy" else pickle.loads(pickle.dumps(counter))
    tail = [other.push(v) for v in x[100:]]
    assert counter._t == 100 and other._t == 300
    assert tail == [twin.push(v) for v in x[100:]]
    assert counter.push(x[100]) == tail[0]


def test_whole_sub_blocks_as_rows_are_the_push():
    # push_many's rows of 256 steps (2-D filters, then the chain of bases) leave the wide
    # encoder exactly where pushing one value at a time does, at every chunk boundary
    x = np.random.default_rng(8).uniform(0.0, 1.0, 3000)
    one = UnboundedBLTCounter(epsilon=1.0, delta=1e-6, bound=1.0, seed=3)
    many = UnboundedBLTCounter(epsilon=1.0, delta=1e-6, bound=1.0, seed=3)
    for a, b in ((0, 512), (512, 700), (700, 2900), (2900, 3000)):
        by_step = [one.push(v) for v in x[a:b]]
        chunk = many.push_many(x[a:b])
        assert many._enc == one._enc and many._carry == one._carry
        assert np.array_equal(many._base, one._base)
        np.testing.assert_allclose(chunk, by_step, rtol=0, atol=1e-9 * math.sqrt(one.variance()))
