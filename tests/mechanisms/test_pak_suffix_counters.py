"""PAK's Mechanism 1 reads its suffix with every counter of ``COUNTERS`` and ``OPEN_COUNTERS``,
and refuses any other name with a typed error before drawing
(``mechanisms.pak._mechanism1._suffix_release``)."""

from __future__ import annotations

import numpy as np
import pytest
from _recording_bits import RecordingBits

from mechanisms import ParameterError
from mechanisms.counting import COUNTERS, OPEN_COUNTERS
from mechanisms.counting._counters import _APPROXIMATE, counter_release
from mechanisms.pak._mechanism1 import _suffix_release


@pytest.mark.parametrize("counter", (*COUNTERS, *OPEN_COUNTERS))
def test_every_counter_is_released_as_itself(counter):
    x = np.random.default_rng(0).uniform(0.0, 2.0, 64)
    delta = 1e-6 if counter in _APPROXIMATE else 0.0
    rel = _suffix_release(x, counter, 1.0, delta, 2.0, RecordingBits(3))
    assert rel.counter == counter
    ref = counter_release(
        x, counter=counter, epsilon=1.0, bound=2.0, bits=RecordingBits(3), delta=delta
    )
    np.testing.assert_array_equal(rel.prefix_sums, ref.prefix_sums)
    np.testing.assert_array_equal(rel.variance, ref.variance)


@pytest.mark.parametrize("counter", ["unbounded_kary", "open", "tree", "auto"])
def test_an_unknown_counter_is_a_typed_error_before_any_draw(counter):
    # it used to fall through to the binary tree (and report the tree's variances)
    x = np.full(16, 1.0)
    with pytest.raises(ParameterError, match="'counter' parameter of pak_release"):
        _suffix_release(x, counter, 1.0, 1e-6, 2.0, RecordingBits(refuse=True))
