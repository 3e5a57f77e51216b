"""The suite's Hypothesis profile (``tests/conftest.py``): no deadline, no too-slow check."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings


@pytest.mark.skipif(
    os.environ.get("HYPOTHESIS_PROFILE", "dpstream") != "dpstream",
    reason="another Hypothesis profile was asked for",
)
def test_the_dpstream_profile_is_loaded_and_inherited():
    for current in (settings.default, settings(max_examples=7)):  # a test's own @settings too
        assert current.deadline is None
        assert HealthCheck.too_slow in current.suppress_health_check
