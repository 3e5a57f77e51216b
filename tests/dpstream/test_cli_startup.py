"""The command answers without loading the heavy libraries (a module check, not a timing)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("pandas", "scipy", "statsmodels", "matplotlib", "cvxpy", "osqp", "pyarrow")

PROBE = """
import json, sys
from dpstream.cli import main
status = main({args!r})
print(json.dumps([status, sorted({{m.split('.')[0] for m in sys.modules}})]))
"""


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["data", "list"]])
def test_fast_commands_import_no_heavy_library(args):
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, check=True
    ).stdout.splitlines()[-1]
    status, loaded = json.loads(out)
    assert status == 0
    assert not set(HEAVY) & set(loaded), sorted(set(HEAVY) & set(loaded))


def test_import_dpstream_is_lazy_but_complete():
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, dpstream; assert 'pandas' not in sys.modules; "
            "from dpstream import release_optstream, load_regional, datasets; "
            "print(release_optstream.__name__, load_regional.__name__, datasets.__name__)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["release_optstream", "load_regional", "dpstream.datasets"]
