"""The secure bit source: a ChaCha20 keystream keyed from the OS, re-keyed on schedule, never
shared between processes or copies; ``seed=None`` never touches a seeded generator; the fused
samplers have the exact distributions they claim."""

from __future__ import annotations

import math
import os
import pickle

import numpy as np
import pytest
from scipy import stats

from mechanisms import SecureBits, bit_source, laplace_prefix_sums
from mechanisms.core import _random
from mechanisms.core._noise import discrete_gaussian, discrete_laplace


def test_seed_none_is_the_secure_source_and_never_touches_pcg64(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("PCG64 used for a release without a seed")

    monkeypatch.setattr(np.random, "PCG64", refuse)
    assert isinstance(bit_source(None), SecureBits)
    rel = laplace_prefix_sums(np.ones(50), epsilon=1.0, bound=1.0)  # seed=None
    assert rel.values.shape == (50,)


def test_words_look_uniform_and_two_sources_differ():
    a, b = SecureBits().random_raw(200_000), SecureBits().random_raw(200_000)
    assert not np.array_equal(a[:8], b[:8])
    bits = np.unpackbits(a.view(np.uint8))
    # 12.8 million fair bits: the share of ones is within 6 standard errors of 1/2.
    assert abs(bits.mean() - 0.5) < 6 * 0.5 / math.sqrt(bits.size)
    top = (a >> np.uint64(11)).astype(np.float64) / 2.0**53
    assert stats.kstest(top, "uniform").pvalue > 1e-6


def test_rekeys_from_the_os_after_the_documented_number_of_bytes(monkeypatch):
    calls = []
    real = os.urandom

    def counting(n):
        calls.append(n)
        return real(n)

    monkeypatch.setattr(_random.os, "urandom", counting)
    monkeypatch.setattr(SecureBits, "REKEY_BYTES", 8 * 1000)
    src = SecureBits()
    src.random_raw(2500)  # 20,000 bytes: keys for bytes [0, 8000), [8000, 16000), [16000, 20000)
    assert calls == [32, 16] * 3


def test_a_new_process_gets_a_new_key(monkeypatch):
    src = SecureBits()
    src.random_raw(4)
    keyed = []
    original = SecureBits._rekey
    monkeypatch.setattr(SecureBits, "_rekey", lambda self: keyed.append(1) or original(self))
    src.random_raw(4)
    assert keyed == []  # same process: the key stays
    monkeypatch.setattr(_random.os, "getpid", lambda: -12345)
    src.random_raw(4)
    assert keyed == [1]  # a "forked" process re-keys before its first word


def test_a_pickled_copy_never_replays_the_stream():
    src = SecureBits()
    src.random_raw(1)
    copy = pickle.loads(pickle.dumps(src))
    assert not np.array_equal(src.random_raw(64), copy.random_raw(64))


def _chi2_pvalue(k: np.ndarray, values: np.ndarray, pmf: np.ndarray) -> float:
    observed = np.array([(k == v).sum() for v in values])
    expected = pmf * k.size
    used = expected > 20
    chi2 = ((observed[used] - expected[used]) ** 2 / expected[used]).sum()
    return float(stats.chi2.sf(chi2, used.sum() - 1))


@pytest.mark.parametrize("t", [0.3, 1.0, 2.5])
def test_discrete_laplace_has_the_exact_pmf(t):
    k = discrete_laplace(bit_source(11), 300_000, t)
    q = math.exp(-1.0 / t)
    values = np.arange(-6, 7)
    pmf = (1 - q) / (1 + q) * q ** np.abs(values)
    assert _chi2_pvalue(k, values, pmf) > 1e-6


def test_the_pmf_test_catches_a_plausible_wrong_sampler():
    # Power: a random sign times one geometric (without rejecting "-0") puts (1 - q) on 0
    # instead of (1 - q)/(1 + q); the same chi-square test must reject it.
    t, n = 1.0, 300_000
    q = math.exp(-1.0 / t)
    rng = np.random.default_rng(3)
    wrong = rng.geometric(1 - q, n) - 1.0
    wrong *= rng.choice([-1.0, 1.0], n)
    values = np.arange(-6, 7)
    pmf = (1 - q) / (1 + q) * q ** np.abs(values)
    assert _chi2_pvalue(wrong, values, pmf) < 1e-6


@pytest.mark.parametrize("sigma", [0.6, 1.0, 2.5])
def test_discrete_gaussian_has_the_exact_pmf(sigma):
    k = discrete_gaussian(bit_source(12), 300_000, sigma)
    values = np.arange(-12, 13)
    pmf = np.exp(-(values**2) / (2 * sigma**2))
    pmf /= pmf.sum()
    assert _chi2_pvalue(k, values, pmf) > 1e-6


def test_samplers_are_a_fixed_function_of_the_bits():
    np.testing.assert_array_equal(
        discrete_gaussian(bit_source(3), 1000, 1.7), discrete_gaussian(bit_source(3), 1000, 1.7)
    )
    np.testing.assert_array_equal(
        discrete_laplace(bit_source(3), 1000, 0.4), discrete_laplace(bit_source(3), 1000, 0.4)
    )


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_fork_re_keys_the_child_through_the_fork_hook():
    """A source keyed before ``os.fork``: parent and child must not draw the same words. The
    child's process id check is disabled (``os.getpid`` made to return the parent's), so only
    the ``os.register_at_fork`` hook can re-key it (issue 24 §4)."""
    bits = SecureBits()
    bits.random_raw(4)  # keyed in the parent
    parent_pid = os.getpid()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next words, or nothing on any error
        try:
            os.close(read)
            _random.os.getpid = lambda: parent_pid  # the pid check can no longer see the fork
            os.write(write, bits.random_raw(4).tobytes())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        child_words = np.frombuffer(pipe.read(), dtype=np.uint64)
    os.waitpid(pid, 0)
    parent_words = bits.random_raw(4)  # the parent's stream goes on from the same point
    assert child_words.size == 4
    assert not np.array_equal(child_words, parent_words)
