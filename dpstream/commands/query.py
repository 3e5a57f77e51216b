"""``dpstream query``: range sums from a release written by ``dpstream release tops|topl|pak|bt``.

Release files (format ``dpstream-release``, version 2)
------------------------------------------------------
* **values file** (the ``--out`` of ``dpstream release``, .csv or .parquet): one row per *input*
  step, indexed like the input (its time column, or the 0-based input step ``step``): row k is
  input step k (the one indexing rule, ``docs/indexing.md``). The first m = time lag rows are
  withheld and empty (NaN); all rows are released for ``bt``. Columns: ``value``, the per-step
  release, and ``cumulative``, the sum of the released steps m..k.
* **sidecar** ``<values file>.query.json`` (a name of its own; the privacy record alone is
  ``<values file>.privacy.json``, as for every output; releases before this version wrote
  ``<values file>.json``, still read, with a notice): the method, the privacy guarantee and
  every parameter (ε's, δ, bound B, time lag m, the threshold), whether the run was seeded
  (not private), and for ToPS the hierarchy's shape (fan-out F, leaf size g, levels L, tree
  size T, smoother).

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

Standard errors (root-mean-square noise error of each answer, from the sidecar's public
parameters only; :func:`range_std_errors`):

* ``pak``/``bt``: the counter's exact range variance (``CounterRelease.range_variance``; the
  online/consistent estimates: its Cauchy–Schwarz upper bound, and the note says so), the
  counter rebuilt from the public n, ε, δ and sensitivity (the released threshold τ for pak,
  B for bt) on a stream of zeros (a simulation: nothing private is read). The bias of
  clipping values at τ (pak) cannot be estimated from public values and is not included: the
  answer says so.
* ``tops``: the complete leaf blocks inside the range by the consistent tree's exact variance
  (``mechanisms.tops._variance.variance_units`` × the node variance); a partial block at either
  end adds its share of one consistent leaf's variance, pro rata (the smoother's own error has
  no closed form); steps after the last complete block are NaN. Clipping at θ: not included.
* ``topl``: (j − i + 1) × the per-report variance (exact).

Intervals ``--level L``: estimate ± z_{(1+L/100)/2} × std error (a normal approximation of a sum
of independent noises).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
import numpy as np
import pandas as pd

from mechanisms import ParameterError

__all__ = [
    "FORMAT",
    "query",
    "range_std_errors",
    "read_release",
    "sidecar_path",
    "write_release",
]

FORMAT = "dpstream-release"
VERSION = 2
_SUFFIXES = (".csv", ".parquet", ".pq")


def sidecar_path(path: str | Path) -> Path:
    """The query sidecar of a values file: ``<values file>.query.json``."""
    file = Path(path)
    return file.with_name(file.name + ".query.json")


def _old_sidecar_path(path: str | Path) -> Path:
    """The name releases before issue 30 used: ``<values file>.json``."""
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
    if not side.is_file() and _old_sidecar_path(file).is_file():
        side = _old_sidecar_path(file)
        click.echo(
            f"Note: read the sidecar {side.name!r} (the name of releases before this version; "
            f"it is now {sidecar_path(file).name!r}).",
            err=True,
        )
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


def _counter_oracle(meta: dict):
    """The counter of a pak/bt release rebuilt from its public parameters on zeros (its
    variances depend on n, ε, δ and the sensitivity only): a simulation, nothing released."""
    from mechanisms import bit_source
    from mechanisms.pak._mechanism1 import _suffix_release

    method, counter = meta.get("method"), meta.get("counter", "binary_tree")
    lag = int(meta.get("time_lag", 0))
    n = int(meta["n_input"]) - lag
    eps = float(meta["epsilon"])
    sensitivity = float(meta["threshold"] if method == "pak" else meta["bound"])
    gaussian = ("smooth_binary", "sqrt_factorisation", "blt")
    delta = float(meta.get("delta") or 0.0) if counter in gaussian else 0.0
    return _suffix_release(np.zeros(n), counter, eps, delta, sensitivity, bit_source(0))


def range_std_errors(meta: dict, ranges: list[tuple[int, int]]) -> tuple[list[float], str]:
    """Noise standard error of each range answer, from the sidecar's public parameters.

    Returns the errors (NaN where not estimated) and a note on what they do not include.
    See the module notes for each method.
    """
    method = meta.get("method")
    lag = int(meta.get("time_lag", 0))
    try:
        open_counter = meta.get("counter") in ("unbounded", "unbounded_blt")
        if method in ("pak", "bt") and open_counter:  # exact, no n (unbounded_blt: H = 2^32)
            from mechanisms.counting import unbounded_blt_range_variance as blt_rv
            from mechanisms.counting import unbounded_kary_range_variance as kary_rv

            eps = float(meta["epsilon"])  # pak: the suffix counter runs at the whole (ε, δ)
            bnd = float(meta["threshold"] if method == "pak" else meta["bound"])
            if meta["counter"] == "unbounded":
                var = [kary_rv(i - lag + 1, j - lag + 1, epsilon=eps, bound=bnd) for i, j in ranges]
            else:
                dlt = float(meta["delta"])
                var = [
                    blt_rv(i - lag + 1, j - lag + 1, epsilon=eps, delta=dlt, bound=bnd)
                    for i, j in ranges
                ]
            note = (
                "noise of the counter (exact); the bias of clipping values at the released "
                "threshold cannot be estimated from public values (not included)"
                if method == "pak"
                else "noise of the counter (exact; values were in [0, --bound])"
            )
            return [math.sqrt(v) for v in var], note
        if method in ("pak", "bt"):
            oracle = _counter_oracle(meta)
            out = [math.sqrt(oracle.range_variance(i - lag, j - lag)) for i, j in ranges]
            exact = oracle.counter in (
                "binary_tree",
                "kary_tree",
                "smooth_binary",
                "sqrt_factorisation",
                "blt",
            )
            how = "exact" if exact else f"an upper bound for the {oracle.counter} estimate"
            note = (
                f"noise of the counter ({how}); the bias of clipping values at the released "
                "threshold cannot be estimated from public values (not included)"
                if method == "pak"
                else f"noise of the counter ({how}; values were in [0, --bound])"
            )
            return out, note
        if method == "topl":
            var = meta.get("step_variance")
            if var is None:
                raise KeyError("step_variance")
            return [math.sqrt((j - i + 1) * float(var)) for i, j in ranges], "noise (exact)"
        if method == "tops":
            return _tops_errors(meta, ranges, lag)
    except (KeyError, TypeError, ValueError):
        pass
    return [math.nan] * len(ranges), "not available for this sidecar (release again)"


def _tops_errors(meta: dict, ranges, lag: int) -> tuple[list[float], str]:
    from mechanisms.tops._variance import leaf_variance_units, variance_units

    t = meta["tops"]
    g, fanout, levels = int(t["leaf_size"]), int(t["fanout"]), int(t["levels"])
    if "node_variance" in t:
        node_var = float(t["node_variance"])
    else:  # sidecars before issue 30: the Laplace scale b, variance 2b²
        node_var = 2.0 * float(t["node_scale"]) ** 2
    released = int(meta["released_steps"])
    tree_size = int(t.get("tree_size", 0)) or None
    complete = released // g
    leaf_var = leaf_variance_units(levels, fanout) * node_var
    out = []
    for i, j in ranges:
        a, b = i - lag, j - lag
        if b >= complete * g:  # steps after the last complete block: smoothed only
            out.append(math.nan)
            continue
        lo, hi = -(-a // g), min((b + 1) // g, complete)
        if lo >= hi:  # inside one block
            var = ((b - a + 1) / g) ** 2 * leaf_var
        else:
            if tree_size:  # the trees of the forest are independent: sum per tree
                var = 0.0
                for start in range((lo // tree_size) * tree_size, hi, tree_size):
                    x, y = max(lo, start) - start, min(hi, start + tree_size) - start
                    var += float(variance_units([x], [y], fanout, levels)[0])
                var *= node_var
            else:
                var = float(variance_units([lo], [hi], fanout, levels)[0]) * node_var
            head, tail = lo * g - a, b + 1 - hi * g
            var += ((head / g) ** 2 + (tail / g) ** 2) * leaf_var
        out.append(math.sqrt(var))
    note = (
        "noise of the consistent tree (exact for whole leaf blocks, partial blocks pro rata; "
        "the smoother's error inside partial blocks and the bias of clipping at the released "
        "threshold cannot be estimated from public values: not included)"
    )
    return out, note


def _z(level: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 200.0)


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
@click.option(
    "--level",
    "levels",
    type=float,
    multiple=True,
    metavar="L",
    help="Confidence level in percent of an interval estimate ± z·std_error (repeatable; "
    "default 95).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the answers as JSON.")
def query(
    release_path: str,
    ranges: tuple[tuple[int, int], ...],
    levels: tuple[float, ...],
    as_json: bool,
) -> None:
    """Answer range sums V(I, J) from a release written by dpstream release tops|topl|pak|bt.

    RELEASE is the values file (.csv or .parquet); its sidecar RELEASE.query.json must sit next
    to it. Each answer comes with its standard error (the noise's root-mean-square error, from
    public parameters only) and intervals at each --level. Answers are post-processing of the
    release: they cost no privacy budget.

    \b
    Examples:
      dpstream query tops.csv --range 65536 66535
      dpstream query bt.parquet --range 0 9 --range 100 1099 --json
      dpstream query pak.csv --range 65536 66975 --level 80 --level 95
    """
    for level in levels:
        if not (math.isfinite(level) and 0 < level < 100):
            raise ParameterError(
                f"The '--level' option of dpstream query must be a float in (0, 100) (a "
                f"percentage). Got {level:g} instead."
            )
    levels = levels or (95.0,)
    frame, meta = read_release(release_path)
    ranges = list(ranges)
    answers = range_sums(frame, ranges, int(meta.get("time_lag", 0)))
    errors, note = range_std_errors(meta, ranges)
    rows = []
    for (i, j), a, se in zip(ranges, answers, errors, strict=True):
        row = {"i": i, "j": j, "sum": a, "std_error": None if math.isnan(se) else se}
        for level in levels:
            half = _z(level) * se
            key = f"{level:g}"
            row[f"lo-{key}"] = None if math.isnan(se) else a - half
            row[f"hi-{key}"] = None if math.isnan(se) else a + half
        rows.append(row)
    column, method = meta.get("column"), meta.get("method")
    guarantee = (meta.get("privacy") or {}).get("guarantee") or meta.get("guarantee", "")
    if as_json:
        payload = {
            "method": method,
            "column": column,
            "seeded": meta.get("seeded"),
            "guarantee": guarantee,
            "std_error": "root-mean-square noise error; " + note,
            "levels": list(levels),
            "answers": rows,
        }
        click.echo(json.dumps(payload))
        return
    click.echo(
        f"# {method} release of {column!r}: sums of the released values over input steps "
        f"I..J (in the column's units). {guarantee}"
    )
    click.echo(f"# std_error: root-mean-square noise error; {note}")
    keys = [k for k in rows[0] if k not in ("i", "j")] if rows else []
    click.echo("\t".join(["i", "j", *keys]))
    for row in rows:
        cells = [str(row["i"]), str(row["j"])]
        cells += ["nan" if row[k] is None else f"{row[k]:.10g}" for k in keys]
        click.echo("\t".join(cells))
    if meta.get("seeded"):
        click.secho("Seeded release: an experiment, NOT private.", fg="yellow", err=True)
