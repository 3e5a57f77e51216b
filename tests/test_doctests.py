"""The examples in the docstrings run and print what they say (every module of the packages).

pytest's ``--doctest-modules`` is not in the README's test command, so the examples would rot
unseen (one did, in a module split); this runs each module's examples as one test.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ("mechanisms", "planner", "postproc", "forecasting", "dpstream")


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        root = importlib.import_module(package)
        names.append(package)
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if info.name.endswith("__main__"):
                continue  # runs a command on import
            names.append(info.name)
    return sorted(names)


def _with_examples() -> list[str]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [
        name
        for name in _modules()
        if any(t.examples for t in finder.find(importlib.import_module(name)))
    ]


@pytest.mark.parametrize("name", _with_examples())
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in doctest.DocTestFinder(exclude_empty=True).find(module):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_examples_are_found() -> None:
    """The finder sees the packages' examples (a broken walk would pass vacuously)."""
    assert len(_with_examples()) >= 20
