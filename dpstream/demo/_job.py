"""The whole job of ``dpstream demo``: plan, release, forecast, report.

Each stage answers one of the users' questions on bundled real data and returns a report
section plus its key numbers; :func:`run_demo` runs them in order and writes the report
(:func:`dpstream.demo._report.write_report`).
"""

from __future__ import annotations

import platform
import time
from pathlib import Path

from dpstream.demo._config import DemoConfig, Progress
from dpstream.demo._forecast import run_forecast_stage
from dpstream.demo._optstream import run_optstream_stage
from dpstream.demo._pak import run_pak_stage
from dpstream.demo._report import write_report
from dpstream.demo._tops import run_tops_stage

__all__ = ["run_demo"]


def _answers(key: dict) -> list[str]:
    out = []
    if "pak_predicted_IF" in key:
        out.append(
            f"Parameters (event stream, ε = 1): time lag m = {key['pak_m']:,}; Mechanism 1's "
            f"planned improvement over the binary tree is {key['pak_predicted_IF']:.2f}×, "
            f"realised {key['pak_realised_IF_mean']:.2f}× on average; "
            f"{100 * key['pak_coverage']:.0f}% of runs within the predicted bound."
        )
    regions = sorted(k for k in key if k.startswith("optstream_regions_l1_eps"))
    for k in regions:
        eps = k.removeprefix("optstream_regions_l1_eps")
        out.append(
            f"Hierarchy release at ε = {eps}: OptStream's mean error per region and step is "
            f"{key[k]:,.0f} kW, {1 / key['optstream_vs_laplace_eps' + eps]:.1f}× lower than "
            "Laplace's; "
            + (
                "every OptStream release is consistent and non-negative."
                if key["optstream_consistent"]
                else "WARNING: an OptStream release was not consistent or not non-negative."
            )
        )
    for k in ("tops_answer", "forecast_answer"):
        if k in key:
            out.append(key[k])
    return out


def run_demo(config: DemoConfig, *, progress: bool = True) -> tuple[Path, dict]:
    """Run every stage; return the path of ``index.html`` and the key numbers."""
    started = time.perf_counter()
    config.out.mkdir(parents=True, exist_ok=True)
    steps = Progress(total=5, enabled=progress)
    sections, key = [], {}
    section, numbers = run_pak_stage(config, steps)
    sections.append(section)
    key.update(numbers)
    section, numbers, releases, _truth = run_optstream_stage(config, steps)
    sections.append(section)
    key.update(numbers)
    # The privacy record of every kind of release the report shows (one per method and ε).
    records = [
        {"label": f"{method} at ε = {eps:g}", **frame.attrs["privacy"]}
        for eps, by_method in releases.items()
        for method, frame in by_method.items()
        if "privacy" in frame.attrs
    ]
    section, numbers = run_tops_stage(config, steps)
    sections.append(section)
    key.update(numbers)
    section, numbers = run_forecast_stage(config, steps)
    sections.append(section)
    key.update(numbers)
    steps.finish()
    meta = {
        "dpstream": "0.1.0",
        "mode": "quick" if config.quick else "default",
        "seed": config.seed if config.seed is not None else "OS-drawn",
        "python": platform.python_version(),
        "seconds": round(time.perf_counter() - started, 1),
    }
    index = write_report(
        sections,
        config.out,
        title="dpstream report",
        subtitle="Which parameters, how accurate is the release, how good are forecasts on it: "
        "measured on bundled real data. A demo compares releases with the truth, so it is an "
        "experiment, not a private release.",
        key_findings=_answers(key),
        meta=meta,
        numbers=key,
        privacy=records,
    )
    return index, key
