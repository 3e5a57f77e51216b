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
from dpstream.demo._report import format_number as fmt
from dpstream.demo._report import write_report
from dpstream.demo._summary import glossary_section, ledger_section, privacy_section
from dpstream.demo._tops import run_tops_stage

__all__ = ["run_demo"]


def _answers(key: dict) -> list[str]:
    out = []
    if "pak_predicted_IF" in key:
        out.append(
            f"Parameters (event stream, ε = 1): hold back the first m = {key['pak_m']:,} "
            "readings to choose the threshold; Mechanism 1's error on the running total is then "
            f"planned to be {fmt(key['pak_predicted_IF'])} times smaller than the binary tree's, "
            f"and was {fmt(key['pak_realised_IF_mean'])} times smaller on average "
            f"({fmt(100 * key['pak_error_share_of_total'])}% of the true total in 98% of runs); "
            f"{fmt(100 * key['pak_coverage'])}% of runs stayed within the predicted bound."
        )
    regions = sorted(k for k in key if k.startswith("optstream_regions_l1_eps"))
    for k in regions:
        eps = k.removeprefix("optstream_regions_l1_eps")
        out.append(
            f"Hierarchy release at ε = {eps}: OptStream's mean error per region and half-hour "
            f"is {fmt(key[k])} kW, {fmt(100 * key['optstream_regions_share_eps' + eps])}% of a "
            f"region's mean load (national: "
            f"{fmt(100 * key['optstream_national_share_eps' + eps])}% of the mean load), "
            f"{fmt(1 / key['optstream_vs_laplace_eps' + eps])} times lower than Laplace's; "
            + (
                "every OptStream release adds up (regions sum to the national total) and has "
                "no negative value."
                if key["optstream_consistent"]
                else "WARNING: an OptStream release did not add up or had a negative value."
            )
        )
    for k in ("tops_answer", "forecast_answer"):
        if k in key:
            out.append(key[k])
    return out


def run_operator_ledger(config: DemoConfig):
    """The operator's job in miniature, to show a data set's ledger (issue 24): three days of
    the regional hierarchy released through a store, day by day, charged to the data set's
    ledger -- per period, so each day costs its own ε.

    The demo's ledger is *throwaway*: ``OUT/operator/regional.db`` (and its store), made anew
    on every run, never in ``$DPSTREAM_HOME`` -- a demo of bundled public data, seeded (an
    experiment, NOT private), must run again on any machine without touching (or being
    refused by) the user's data sets. Returns the report section."""
    from dpstream import datasets
    from dpstream._dataset import fingerprint
    from dpstream._ledger import SQLiteLedger
    from dpstream.store import ReleaseStore
    from mechanisms import Budget, WAlphaIndistinguishability

    folder = config.out / "operator"
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("regional.db", "store.db"):  # the demo's own files only
        for side in ("", "-wal", "-shm", "-journal"):
            (folder / f"{name}{side}").unlink(missing_ok=True)
    hierarchy = datasets.regional_hierarchy()
    days = datasets.load_regional().loc[config.month][hierarchy["national"]].iloc[: 48 * 3]
    book = SQLiteLedger(
        folder / "regional.db",
        total=Budget(1.0),
        unit=WAlphaIndistinguishability(w=48, alpha=config.alpha),
        dataset="regional-demo",
        fingerprint=fingerprint(days.columns, hierarchy),
    )
    kw = {"epsilon": 1.0, "alpha": config.alpha, "k": 10, "hierarchy": hierarchy}
    with book, ReleaseStore(folder / "store.db", ledger=book) as store:
        for n in (1, 2, 3):  # the daily job: each run releases the new day only
            store.release_optstream(days.iloc[: 48 * n], seed=config.experiment_seed(9), **kw)
    return ledger_section(
        [folder / "regional.db"], where="this report's folder (operator/, a demo's throwaway)"
    )


def run_demo(config: DemoConfig, *, progress: bool = True) -> tuple[Path, dict]:
    """Run every stage; return the path of ``index.html`` and the key numbers."""
    started = time.perf_counter()
    config.out.mkdir(parents=True, exist_ok=True)
    steps = Progress(total=5, enabled=progress)
    sections, key = [], {}
    section, numbers, entries = run_pak_stage(config, steps)
    sections.append(section)
    key.update(numbers)
    section, numbers, _releases, _truth = run_optstream_stage(config, steps)
    sections.append(section)
    entries += numbers.pop("_entries")
    key.update(numbers)
    section, numbers, more = run_tops_stage(config, steps)
    sections.append(section)
    key.update(numbers)
    entries += more
    section, numbers, more = run_forecast_stage(config, steps)
    sections.append(section)
    key.update(numbers)
    entries += more
    ledgers = run_operator_ledger(config)
    steps.finish()
    meta = {
        "dpstream": "0.1.0",
        "mode": "quick" if config.quick else "default",
        "seed": config.seed if config.seed is not None else "OS-drawn",
        "python": platform.python_version(),
        "seconds": round(time.perf_counter() - started, 1),
    }
    # Every kind of release the report shows, with its privacy record (issues 8 and 17).
    records = [{"label": e.label, "section": e.stage, **e.record} for e in entries]
    index = write_report(
        [privacy_section(entries), ledgers, *sections, glossary_section()],
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
