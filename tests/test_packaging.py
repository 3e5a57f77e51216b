"""The bundled data ship inside the package (issue 12): an installed wheel must run the demo.

Cheap checks only (the wheel build itself is done by hand, see the issue's closing note): every
file the datasets module reads is a package resource, and pyproject's ``package-data`` globs
cover every file of ``dpstream/data`` so a wheel cannot leave one behind.
"""

from __future__ import annotations

import fnmatch
import tomllib
from importlib import resources
from pathlib import Path

from dpstream import datasets

ROOT = Path(__file__).resolve().parents[1]


def test_every_dataset_file_is_a_package_resource():
    data = resources.files("dpstream").joinpath("data")
    names = sorted(datasets._READ_OPTIONS)
    assert names, "datasets._READ_OPTIONS lists the bundled files"
    for name in [*names, "README.md"]:
        entry = data.joinpath(name)
        assert entry.is_file(), f"dpstream/data/{name} is missing from the package"
        with entry.open("rb") as fh:
            assert fh.read(2), f"dpstream/data/{name} is empty"


def test_package_data_globs_cover_the_data_folder():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = config["tool"]["setuptools"]["package-data"]["dpstream"]
    files = [p for p in (ROOT / "dpstream" / "data").iterdir() if p.is_file()]
    assert files
    missed = [p.name for p in files if not any(fnmatch.fnmatch(f"data/{p.name}", g) for g in globs)]
    assert not missed, f"pyproject package-data would leave {missed} out of the wheel"


def test_packages_found_are_the_five_top_level_packages():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    for package in ("mechanisms", "planner", "postproc", "forecasting", "dpstream"):
        assert (ROOT / package / "__init__.py").is_file()
        assert f"{package}*" in include, f"{package} is not packaged"
    # every subpackage is a real package (an __init__.py), so find_packages picks it up
    for package in ("mechanisms", "planner", "postproc", "forecasting", "dpstream"):
        for folder in (ROOT / package).rglob("*"):
            if folder.is_dir() and folder.name != "__pycache__" and any(folder.glob("*.py")):
                assert (folder / "__init__.py").is_file(), f"{folder} lacks an __init__.py"
