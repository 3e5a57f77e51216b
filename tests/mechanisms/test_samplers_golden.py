"""Golden outputs of the integer samplers (issue 29 §1): a change of the arithmetic that moves a
distribution by 2⁻⁵³ passes every statistical test and is caught only here.

Two kinds: chosen words (the extremes of the 53-bit uniform, checked against an independent
scalar computation with :func:`math.log`) and seeded streams of 40,000 draws (more than one pass
of 2¹⁵ of the vectorised loops), pinned by a hash of their values as integers and recorded on
commit e6d6b85. If a deliberate change of a sampler alters them, the new values must come with
a reason in the commit message (and the samplers' privacy notes re-read).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from mechanisms.core._samplers import _geometric, discrete_gaussian, discrete_laplace

#: Words at the edges of the inversion: k = 0 (U = 2⁻⁵⁴), low bits only (still k = 0), the
#: middle, all ones (U rounds to 1: G = 0), k = 2⁵², k = 2⁵³ − 1 with low bits, two arbitrary
#: words, k = 1 and k = 3.
WORDS = [
    0,
    (1 << 11) - 1,
    1 << 63,
    (1 << 64) - 1,
    (1 << 52) << 11,
    (((1 << 52) - 1) << 11) | 0x7FF,
    0x0123456789ABCDEF,
    0xFEDCBA9876543210,
    1 << 11,
    3 << 11,
]


class FixedBits:
    """A bit source returning the given words in order, cyclically."""

    def __init__(self, words):
        self.words = np.array(words, dtype=np.uint64)
        self.used = 0

    def random_raw(self, size):
        idx = np.arange(self.used, self.used + int(size)) % self.words.size
        self.used += int(size)
        return self.words[idx].copy()

    def spawn(self, n_children):  # pragma: no cover - not used
        raise NotImplementedError


def _reference_geometric(word: int, t: float) -> int:
    """G = ⌊−t·ln U⌋, U = (⌊w/2¹¹⌋ + ½)·2⁻⁵³, one word at a time in Python floats."""
    return math.floor(-t * math.log(((word >> 11) + 0.5) * 2.0**-53))


@pytest.mark.parametrize("t", [1.0, 3.7, 1e6 + 0.5, 2.0**24 + 1])
def test_geometric_inversion_of_chosen_words(t):
    got = _geometric(FixedBits(WORDS), len(WORDS), t)
    assert got.tolist() == [_reference_geometric(w, t) for w in WORDS]
    assert got[0] == got[1]  # the low 11 bits are not read
    assert got[3] == 0  # U = 1 for the last k


def test_geometric_of_chosen_words_golden():
    assert _geometric(FixedBits(WORDS), len(WORDS), 1.0).tolist() == [
        37, 37, 0, 0, 0, 0, 5, 0, 36, 35
    ]  # fmt: skip


@pytest.mark.parametrize("t", [1.0, 3.7, 2.0**24 + 1])
def test_discrete_laplace_of_chosen_words_is_the_difference_of_two_geometrics(t):
    """K = G₁ − G₂, G₁ from the first ``size`` words and G₂ from the next ``size``."""
    got = discrete_laplace(FixedBits(WORDS), 5, t)
    ref = [
        _reference_geometric(a, t) - _reference_geometric(b, t)
        for a, b in zip(WORDS[:5], WORDS[5:], strict=True)
    ]
    assert got.tolist() == ref


def _digest(x: np.ndarray) -> str:
    return hashlib.sha256(x.astype(np.int64).tobytes()).hexdigest()[:20]


@pytest.mark.parametrize(
    ("t", "digest", "head", "total"),
    [
        (0.3, "d52c6b2cc89a46a15755", [0, 0, 0, 0], 60),
        (5.0, "c6b9b0af4f6898740e2c", [12, 2, -4, -5], 108),
        (2.0**24.5, "c1a383153bb39dff28d3", [61106679, 9224831, -21319994, -21171638], 337070901),
    ],
)
def test_discrete_laplace_seeded_golden(t, digest, head, total):
    x = discrete_laplace(np.random.PCG64(29), 40_000, t)
    assert x.shape == (40_000,) and x.dtype == np.float64
    assert x[:4].astype(int).tolist() == head and int(x.sum()) == total
    assert _digest(x) == digest


@pytest.mark.parametrize(
    ("sigma", "digest", "head", "total"),
    [
        (0.7, "13167a818eabbabbbb75", [0, 0, 1, 0], -103),
        (4.5, "91e6d7439eceb1c68015", [-3, 1, -1, 5], 578),
        (1e3, "59d5ba2a0780b6828b5a", [-576, 177, -251, 869], -104404),
        (
            2.0**24 + 0.5,
            "eeb4e289d8d1aa3dc942",
            [-9642623, 2959873, -4197368, 14555680],
            -1976255364,
        ),
    ],
)
def test_discrete_gaussian_seeded_golden(sigma, digest, head, total):
    x = discrete_gaussian(np.random.PCG64(29), 40_000, sigma)
    assert x.shape == (40_000,) and x.dtype == np.float64
    assert x[:4].astype(int).tolist() == head and int(x.sum()) == total
    assert _digest(x) == digest


def test_sizes_zero_and_one():
    assert discrete_laplace(np.random.PCG64(1), 0, 2.0).shape == (0,)
    assert discrete_gaussian(np.random.PCG64(1), 0, 2.0).shape == (0,)
    assert discrete_laplace(np.random.PCG64(1), 1, 2.0).shape == (1,)
    assert discrete_gaussian(np.random.PCG64(1), 1, 2.0).shape == (1,)


def test_a_size_given_as_a_float_or_numpy_integer_is_a_count():
    ref_l = discrete_laplace(np.random.PCG64(3), 5, 4.0)
    ref_g = discrete_gaussian(np.random.PCG64(3), 5, 4.0)
    for size in (5.0, np.int64(5)):
        assert discrete_laplace(np.random.PCG64(3), size, 4.0).tolist() == ref_l.tolist()
        assert discrete_gaussian(np.random.PCG64(3), size, 4.0).tolist() == ref_g.tolist()
    assert _geometric(np.random.PCG64(3), 5.0, 4.0).shape == (5,)
