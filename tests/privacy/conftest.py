"""Privacy audits: the ``slow`` tier runs only on demand.

``pytest tests/privacy`` runs the fast ``statistical`` tier (what CI runs); the full-size tier
runs with ``pytest tests/privacy -m slow`` (or any ``-m`` expression naming ``slow``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip_slow = pytest.mark.skip(reason="slow audit tier: run with -m slow")
    for item in items:
        if "slow" in item.keywords and _HERE in item.path.parents:
            item.add_marker(skip_slow)
