"""Write the notebooks in ``notebooks/`` from the cell sources below (outputs stripped).

The notebooks are the documents users open; this script is how they are kept in the
repository without outputs. ``tests/test_notebooks.py`` executes every notebook.
Run: ``python scripts/build_notebooks.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from notebook_sources import NOTEBOOKS  # noqa: E402


def build(name: str, cells: list[tuple[str, str]]) -> None:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    for kind, text in cells:
        text = text.strip("\n")
        nb.cells.append(new_markdown_cell(text) if kind == "md" else new_code_cell(text))
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{Path(name).stem}-{i}"
    nbformat.write(nb, ROOT / "notebooks" / name)


if __name__ == "__main__":
    for name, cells in NOTEBOOKS.items():
        build(name, cells)
        print("wrote notebooks/" + name)
