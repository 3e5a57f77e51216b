"""Execute every notebook in ``notebooks/`` so that none of them rots (issue 7).

Each notebook runs top to bottom in a fresh kernel, in a temporary folder (figures they write
land there). A cell that raises fails the test with the cell's error.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_notebooks_exist():
    assert len(NOTEBOOKS) >= 2, "notebooks/ should hold the quick tour and one notebook per paper"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path: Path, tmp_path: Path):
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), (
        f"{path.name} is committed with outputs; run scripts/build_notebooks.py"
    )
    shutil.copy(path, tmp_path / path.name)
    started = time.perf_counter()
    # No per-cell time limit: a cell's duration depends on the machine's load (issue 11 §6);
    # only the kernel's start keeps a generous limit, so that a kernel that never starts fails.
    client = nbclient.NotebookClient(
        nb,
        timeout=None,
        startup_timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
    print(f"{path.name}: {time.perf_counter() - started:.1f} s")
