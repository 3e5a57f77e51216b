"""Issue 22: the 30-trial tables on the final code judged cell by cell against the exact planner
and against session 7's forgetting.

References (same seeds, 30 trials each, ``scripts/optstream_defaults.py``):

* **exact**: the planner's periods state (``STREAMING_STATE = False``: the last periods held and
  read exactly, the issue's reference), the tables committed before session 7's running sums
  (main tables at :data:`EXACT_MAIN`, level shares at :data:`EXACT_SHARES`);
* **forgetting**: session 7's running sums with the variogram forgetting by 27/28 (the default
  of sessions 7-10): the ``_stream`` tables at :data:`FORGETTING_MAIN`, the level shares of
  session 9 (``optstream_level_shares_30_s9.csv``);
* **now**: the committed tables (``optstream_defaults_{regional,household}_30_stream.csv``,
  ``optstream_level_shares_30.csv``), the two-block variogram window (session 11), its
  public-history block leaving oldest first in the ``auto + history`` cells and the level shares
  (``HISTORY_FADE = "periods"``, session 12; ``"lowrank"``, session 13, the same on these 5-node
  tables), the prior's folded weights relative to a reference (session 13).

Paired differences (now − reference, relative to the reference, mean ± standard error over the
trials) where per-trial errors of both sides exist: ``<table>_trials.csv`` (``--per-trial``)
and ``<table>_exact_trials.csv`` (``--per-trial --state exact``, the same seeds; for the main
tables ``optstream_defaults_{regional,household}_30_stream_exact_trials.csv``, for the shares
``optstream_level_shares_30_exact_trials.csv``); against forgetting,
``<table>_forgetting_trials.csv`` (``--per-trial --state forgetting``) where it exists, else on
the main tables'
``auto + history`` cells the pairs of ``optstream_variogram_window.csv`` (session 10, the same
seeds) while a cell's mean is still that session's two-block mean. A cell is *equal* when the
table's means agree to the CSV's six digits, *worse* / *better* when the paired difference is
beyond two standard errors, else *unchanged* (within noise); without pairs, ``unpaired``.

Run: ``python scripts/optstream_defaults_judge.py`` (writes
``docs/results/optstream_defaults_judged.csv`` and prints the summary). Reads only committed
results and git history: no releases.
"""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"
#: The main tables of the exact planner (11-23, before session 7's running sums).
EXACT_MAIN = "4a986e9"
#: The level-share table of the exact planner (11-23).
EXACT_SHARES = "21159cb"
#: The ``_stream`` tables of session 7 (forgetting; session 9 reproduced them row for row).
FORGETTING_MAIN = "cf3ca21"
PLANNED = ("auto", "auto, no prior", "auto + history")


def _git_csv(commit: str, path: str) -> pd.DataFrame:
    text = subprocess.run(
        ["git", "show", f"{commit}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    return pd.read_csv(io.StringIO(text))


def _paired(now: pd.Series, ref: pd.Series) -> tuple[float, float, int]:
    """Mean and standard error of the relative paired difference (%), over common trials."""
    both = pd.concat([now.rename("now"), ref.rename("ref")], axis=1).dropna()
    if len(both) < 2:
        return np.nan, np.nan, len(both)
    d = (both["now"] - both["ref"]) / both["ref"].mean() * 100.0
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d))), len(d)


def _verdict(now: float, ref: float, diff: float, se: float) -> str:
    if f"{now:.6g}" == f"{ref:.6g}":
        return "equal"
    if np.isnan(se):
        return "unpaired"
    if diff > 2 * se:
        return "worse"
    if diff < -2 * se:
        return "better"
    return "unchanged"


def _trials(stem: str) -> pd.DataFrame | None:
    """Per-trial errors of the table ``stem`` (``state`` "now"), of the exact planner on the
    same seeds (``state`` "exact") and of forgetting (``state`` "forgetting",
    ``--state forgetting``), where they exist."""
    files = {"now": "_trials.csv", "exact": "_exact_trials.csv"}
    files["forgetting"] = "_forgetting_trials.csv"
    parts = [
        pd.read_csv(OUT / f"{stem}{suffix}").assign(state=state)
        for state, suffix in files.items()
        if (OUT / f"{stem}{suffix}").exists()
    ]
    return pd.concat(parts, ignore_index=True) if parts else None


def _cells(now: pd.DataFrame, refs: dict, keys: list[str]):
    """``(row, cell, reference name, the reference's rows of the cell)`` for every row of the
    re-run table and every reference that has the cell."""
    for _, r in now.iterrows():
        cell = dict(zip(keys, r[keys], strict=True))
        for name, ref in refs.items():
            m = _rows_of(ref, cell, keys)
            if not m.empty:
                yield r, cell, name, m


def _rows_of(frame: pd.DataFrame, cell: dict, keys: list[str]) -> pd.DataFrame:
    """The rows of ``frame`` of one table cell (equal on every key)."""
    for k in keys:
        frame = frame[frame[k] == cell[k]]
    return frame


def main_cells() -> list[dict]:
    window = pd.read_csv(OUT / "optstream_variogram_window.csv")
    rows = []
    for ds in ("regional", "household"):
        trials = _trials(f"optstream_defaults_{ds}_30_stream")
        now = pd.read_csv(OUT / f"optstream_defaults_{ds}_30_stream.csv")
        refs = {
            "exact": _git_csv(EXACT_MAIN, f"docs/results/optstream_defaults_{ds}_30.csv"),
            "forgetting": _git_csv(
                FORGETTING_MAIN, f"docs/results/optstream_defaults_{ds}_30_stream.csv"
            ),
        }
        keys = ["dataset", "month", "alpha/eps", "method"]
        for r, cell, name, m in _cells(now, refs, keys):
            for level in ("leaves", "root"):
                a, b = float(r[level]), float(m[level].iloc[0])
                diff, se, n = np.nan, np.nan, 0
                if trials is not None and cell["method"] in PLANNED:
                    t = _rows_of(trials, cell, keys)
                    if not t.empty:
                        piv = t.pivot_table(index="trial", columns="state", values=level)
                        if {"now", name} <= set(piv.columns):
                            diff, se, n = _paired(piv["now"], piv[name])
                if name == "forgetting" and cell["method"] == "auto + history" and n == 0:
                    w = window[
                        (window.dataset == ds)
                        & (window.month == cell["month"])
                        & (window["alpha/eps"] == cell["alpha/eps"])
                    ]
                    # session 10's pairs are of the two-block rule: only while the cell is
                    # still that rule's (its mean equal to six digits)
                    if not w.empty and f"{a:.6g}" == f"{float(w.iloc[0][f'{level}_blocks']):.6g}":
                        w0 = w.iloc[0]
                        diff = float(w0[f"{level}_blocks_vs_forgetting_pct"])
                        se, n = float(w0[f"{level}_se_pct"]), int(w0["n"])
                rows.append(
                    {**cell, "table": "main", "level": level, "against": name,
                     "now": a, "reference": b, "table_diff_pct": (a / b - 1) * 100,
                     "paired_diff_pct": diff, "paired_se_pct": se, "pairs": n,
                     "verdict": _verdict(a, b, diff, se)}
                )  # fmt: skip
    return rows


def share_cells() -> list[dict]:
    trials = _trials("optstream_level_shares_30")
    now = pd.read_csv(OUT / "optstream_level_shares_30.csv")
    refs = {
        "exact": _git_csv(EXACT_SHARES, "docs/results/optstream_level_shares_30.csv"),
        "forgetting": pd.read_csv(OUT / "optstream_level_shares_30_s9.csv"),
    }
    keys = ["month", "alpha/eps", "variant"]
    rows = []
    for r, cell, name, m in _cells(now, refs, keys):
        for level in ("regional", "national"):
            a, b = float(r[level]), float(m[level].iloc[0])
            diff, se, n = np.nan, np.nan, 0
            if trials is not None:
                t = _rows_of(trials, cell, keys)
                piv = t.pivot_table(index="trial", columns="state", values=level)
                if {"now", name} <= set(piv.columns):
                    diff, se, n = _paired(piv["now"], piv[name])
            rows.append(
                {"dataset": "shares", "month": cell["month"], "alpha/eps": cell["alpha/eps"],
                 "method": cell["variant"], "table": "shares", "level": level,
                 "against": name, "now": a, "reference": b,
                 "table_diff_pct": (a / b - 1) * 100, "paired_diff_pct": diff,
                 "paired_se_pct": se, "pairs": n, "verdict": _verdict(a, b, diff, se)}
            )  # fmt: skip
    return rows


def main() -> None:
    out = pd.DataFrame(main_cells() + share_cells())
    out.to_csv(OUT / "optstream_defaults_judged.csv", index=False, float_format="%.6g")
    pd.set_option("display.width", 200)
    print(
        out.groupby(["table", "dataset", "against", "level"])["verdict"]
        .value_counts()
        .unstack(fill_value=0)
        .to_string()
    )
    bad = out[out.verdict == "worse"].sort_values("paired_diff_pct", ascending=False)
    cols = ["table", "dataset", "month", "alpha/eps", "method", "level", "against", "now"]
    cols += ["reference", "paired_diff_pct", "paired_se_pct", "pairs"]
    print("\nworse beyond 2 s.e.:")
    print(bad[cols].round(3).to_string(index=False))


if __name__ == "__main__":
    main()
