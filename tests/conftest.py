"""Suite-wide test configuration: no test may depend on the machine's speed (issue 11 §6).

Hypothesis times every example against a 200 ms deadline by default and fails with
``DeadlineExceeded`` (or the ``too_slow`` health check) when a loaded machine is slow: the
README's ``python -m pytest -q -m "not slow"`` failed once that way in a fresh clone. The
``dpstream`` profile below turns both off and is loaded for the whole suite, before any test
module is imported, so it is the parent of every ``@settings(...)`` in the tests. Another
profile can be chosen with ``HYPOTHESIS_PROFILE=<name>`` (Hypothesis' own ``default``
brings the deadline back, e.g. to look for slow examples). Speed is measured in ``bench/``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "dpstream",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dpstream"))


import tempfile  # noqa: E402

import pytest  # noqa: E402

# Module- and session-scoped fixtures run before any function's monkeypatch: they get a
# session-wide home, never the user's ~/.dpstream. Each test then gets its own (below).
os.environ["DPSTREAM_HOME"] = tempfile.mkdtemp(prefix="dpstream_home_")


@pytest.fixture(autouse=True)
def _dpstream_home(tmp_path_factory, monkeypatch):
    """Every test gets its own ``$DPSTREAM_HOME`` (data sets' ledgers, issue 24 §2): no test
    reads or writes the user's ``~/.dpstream``, and no two tests share a data set."""
    monkeypatch.setenv("DPSTREAM_HOME", str(tmp_path_factory.mktemp("dpstream_home")))
