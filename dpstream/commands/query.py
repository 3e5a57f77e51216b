"""``dpstream query``: range sums from a release written by ``dpstream release tops|topl|pak|bt``.

Release files (format ``dpstream-release``, version 2)
------------------------------------------------------
* **values file** (the ``--out`` of ``dpstream release``, .csv or .parquet): one row per *input*
  step, indexed like the input (its time column, or the 0-based input step ``step``): row k is
  input step k (the one indexing rule, ``docs/indexing.md``). The first m = time lag rows are
  withheld and empty (NaN); all rows are released for ``bt``. Columns: ``value``, the per-step
  release, and ``cumulative``, the sum of the released steps m..k.
* **sidecar** ``<values file>.json``: the method, the privacy guarantee and every parameter (ε's,
  δ, bound B, time lag m, the threshold), whether the run was seeded (not private), and for ToPS
  the hierarchy's shape (fan-out F, leaf size g, levels L, tree size T, smoother).

Answers. V(i, j) over input steps i..j (0-based, inclusive, m ≤ i ≤ j) is
``cumulative[j] − cumulative[i − 1]`` (``cumulative[j]`` when i = m), as the mechanisms'
``range_sum(i, j)`` computes it:

* ``pak``/``bt``: ``cumulative`` holds the released prefix sums minus the released c(σ, m)
  (which cancels in every range), so answers equal ``PakRelease.range_sum`` up to rounding;
* ``tops``: ``cumulative`` is the running sum of the smoothed values. The hierarchy's nodes are
  *not stored*: node (ℓ, k) covers released steps [k·g·Fˡ, (k + 1)·g·Fˡ) and equals the sum of the
  stored values over it (each complete leaf block of values sums to its consistent estimate, and
  consistent leaves sum to every node), so these answers equal the canonical decomposition of
  ``TopsRelease.range_sum`` up to floating-point rounding;
* ``topl``: the running sum of the per-step estimates (``ToplRelease.range_sum``).
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np
import pandas as pd

from mechanisms import ParameterError

__all__ = ["FORMAT", "query", "read_release", "sidecar_path", "write_release"]

FORMAT = "dpstream-release"
VERSION = 2
_SUFFIXES = (".csv", ".parquet", ".pq")


def sidecar_path(path: str | Path) -> Path:
    """The JSON sidecar of a values file: ``<values file>.json``."""
    file = Path(path)
    return file.with_name(file.name + ".json")


def write_release(frame: pd.DataFrame, meta: dict, path: str | Path) -> Path:
    """Write the values file (CSV or Parquet by extension) and its JSON sidecar."""
    file = Path(path)
    if file.suffix.lower() == ".csv":
        frame.to_csv(file)
    else:
        frame.to_parquet(file)
    side = sidecar_path(file)
    full = {"format": FORMAT, "version": VERSION, "values_file": file.name, **meta}
    side.write_text(json.dumps(full, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return side


def read_release(path: str | Path) -> tuple[pd.DataFrame, dict]:
    """Read a values file and its sidecar; check the format."""
    file = Path(path)
    if file.suffix.lower() not in _SUFFIXES or not file.is_file():
        raise ParameterError(
            f"The RELEASE argument of dpstream query must be an existing .csv or .parquet file "
            f"written by dpstream release. Got {file.name!r}."
        )
    side = sidecar_path(file)
    try:
        meta = json.loads(side.read_text(encoding="utf-8"))
    except OSError:
        raise ParameterError(
            f"dpstream query needs the sidecar {side.name!r} next to {file.name!r} (written by "
            "dpstream release tops|topl|pak|bt)."
        ) from None
    except json.JSONDecodeError as exc:
        raise ParameterError(
            f"The sidecar {side.name!r} is not valid JSON (line {exc.lineno})."
        ) from None
    if isinstance(meta, dict) and meta.get("format") == FORMAT and meta.get("version") == 1:
        raise ParameterError(
            f"The release {file.name!r} is a {FORMAT} version 1 file (rows and --range counted "
            "released steps). Version 2 counts input steps, like the mechanisms' range_sum: "
            "release it again with this dpstream."
        )
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise ParameterError(f"The sidecar {side.name!r} is not a {FORMAT} version {VERSION} file.")
    try:
        frame = (
            pd.read_csv(file, index_col=0)
            if file.suffix.lower() == ".csv"
            else (pd.read_parquet(file))
        )
    except (OSError, ValueError, ImportError) as exc:
        raise ParameterError(
            f"The release {file.name!r} could not be read ({type(exc).__name__})."
        ) from None
    n_input, lag = meta.get("n_input"), meta.get("time_lag", 0)
    if (
        "cumulative" not in frame.columns
        or not isinstance(n_input, int)
        or not isinstance(lag, int)
        or not 0 <= lag < n_input
        or len(frame) != n_input
    ):
        raise ParameterError(
            f"The release {file.name!r} does not match its sidecar (a 'cumulative' column and "
            f"{n_input!r} rows, one per input step, are expected)."
        )
    cumulative = pd.to_numeric(frame["cumulative"], errors="coerce")
    if not np.isfinite(cumulative.to_numpy(dtype=np.float64)[lag:]).all():
        raise ParameterError(
            f"The release {file.name!r} has entries of 'cumulative' that are not finite numbers: "
            "it was changed after dpstream release wrote it. Release again."
        )
    frame["cumulative"] = cumulative
    return frame, meta


def range_sums(frame: pd.DataFrame, ranges: list[tuple[int, int]], time_lag: int) -> list[float]:
    """V(i, j) = cumulative[j] − cumulative[i − 1] over input steps m ≤ i ≤ j (validated)."""
    cum = frame["cumulative"].to_numpy(dtype=np.float64)
    out = []
    for i, j in ranges:
        if not time_lag <= i <= j < cum.size:
            raise ParameterError(
                f"The '--range' option of dpstream query must be two input steps I J with "
                f"{time_lag} <= I <= J <= {cum.size - 1} (the first {time_lag} steps are withheld: "
                f"the time lag). Got {i} {j} instead."
            )
        out.append(float(cum[j] - (cum[i - 1] if i > time_lag else 0.0)))
    return out


@click.command(name="query")
@click.argument("release_path", metavar="RELEASE", type=click.Path(dir_okay=False))
@click.option(
    "--range",
    "ranges",
    type=(int, int),
    multiple=True,
    required=True,
    metavar="I J",
    help="Input steps I..J (0-based, inclusive: rows of RELEASE; I ≥ the time lag).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the answers as JSON.")
def query(release_path: str, ranges: tuple[tuple[int, int], ...], as_json: bool) -> None:
    """Answer range sums V(I, J) from a release written by dpstream release tops|topl|pak|bt.

    RELEASE is the values file (.csv or .parquet); its sidecar RELEASE.json must sit next to it.
    Answers are post-processing of the release: they cost no privacy budget.

    \b
    Examples:
      dpstream query tops.csv --range 65536 66535
      dpstream query bt.parquet --range 0 9 --range 100 1099 --json
    """
    frame, meta = read_release(release_path)
    answers = range_sums(frame, list(ranges), int(meta.get("time_lag", 0)))
    if as_json:
        payload = {
            "method": meta.get("method"),
            "seeded": meta.get("seeded"),
            "answers": [
                {"i": i, "j": j, "sum": a} for (i, j), a in zip(ranges, answers, strict=True)
            ],
        }
        click.echo(json.dumps(payload))
        return
    for (i, j), a in zip(ranges, answers, strict=True):
        click.echo(f"{i}\t{j}\t{a!r}")
    if meta.get("seeded"):
        click.secho("Seeded release: an experiment, NOT private.", fg="yellow", err=True)
