"""Screenshots of a dpstream report in headless Chromium (Debian package ``chromium``).

Usage: ``python scripts/screenshot_report.py REPORT_DIR [OUT_DIR]`` (default OUT_DIR:
``docs/screenshots``). Renders ``index.html`` once in a window taller than the page, trims the
empty background below it, and cuts the page into parts at the section boundaries (rows of
background between the white section cards), each at most ``--max-height`` pixels tall.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]


def render(index: Path, width: int, height: int) -> Image.Image:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("chromium not found: apt-get install chromium")
    with tempfile.TemporaryDirectory() as tmp:
        shot = Path(tmp) / "page.png"
        subprocess.run(
            [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--window-size={width},{height}", f"--screenshot={shot}", index.as_uri()],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        return Image.open(shot).convert("RGB")


def cut_points(page: np.ndarray, max_height: int) -> list[int]:
    """Rows where the page is plain background across the content column (between cards)."""
    plain = (np.abs(page.astype(int) - page[-1, 2].astype(int)).sum(axis=2) < 8).all(axis=1)
    rows = np.flatnonzero(plain)
    cuts, start = [0], 0
    while page.shape[0] - start > max_height:
        window = rows[(rows > start + 300) & (rows <= start + max_height)]
        start = int(window[-1]) if window.size else start + max_height
        cuts.append(start)
    return [*cuts, page.shape[0]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("out", type=Path, nargs="?", default=ROOT / "docs" / "screenshots")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--max-height", type=int, default=2000)
    args = parser.parse_args()
    image = render(args.report.resolve() / "index.html", args.width, 16000)
    page = np.asarray(image)
    last = page[-1]
    content = np.flatnonzero((np.abs(page.astype(int) - last.astype(int)).sum(axis=2) > 8).any(1))
    page = page[: int(content[-1]) + 40]
    args.out.mkdir(parents=True, exist_ok=True)
    cuts = cut_points(page, args.max_height)
    for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True), start=1):
        path = args.out / f"report_{i}.png"
        Image.fromarray(page[a:b]).save(path, optimize=True)
        print(f"wrote {path} ({b - a} px)")


if __name__ == "__main__":
    main()
