"""What ``dpstream release`` writes beside its output: the per-period record and the errors.

* :func:`period_record`: the privacy record of a release, with, for OptStream's ``k="auto"``,
  one entry per period (its k, sampler, level shares, noise and budget) -- the record said
  ``"k": "auto"`` only (issue 30).
* :func:`write_std_errors`: :func:`dpstream.std_errors` of the release, as
  ``OUT_STEM.std_error.SUFFIX`` beside a wide file (same index and columns), or a
  ``std_error`` column of a long file (``unique_id, ds, y, std_error``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ._checks import cli_terms

__all__ = ["period_record", "std_error_path", "store_period_records", "write_std_errors"]


def period_record(result: pd.DataFrame | pd.Series) -> dict:
    """``attrs["privacy"]`` of a release, with ``"periods"`` for an auto-planned OptStream."""
    record = dict(result.attrs["privacy"])
    plans = result.attrs.get("plan")
    if record.get("mechanism") == "optstream" and isinstance(plans, list) and plans:
        sampler = (record.get("parameters") or {}).get("sampling", "equal")
        record["periods"] = [
            {
                "period": p.get("period"),
                "start": p.get("start"),
                "k": p.get("k"),
                "sampler": sampler,
                "noise": p.get("noise"),
                "shares": p.get("shares"),
                "budget": p.get("budget"),
                **({"epsilon_dp": p["epsilon_dp"]} if "epsilon_dp" in p else {}),
            }
            for p in plans
        ]
    return record


def store_period_records(table: pd.DataFrame, sampler: str = "equal") -> list[dict]:
    """The ``"periods"`` of a store's record: ``ReleaseStore.periods()`` rows, the same keys as
    :func:`period_record`; ``sampler`` is the record's (equally spaced for k auto)."""
    out = []
    for row in table.to_dict("records"):
        shares = row.get("shares")
        out.append(
            {
                "period": int(row["ordinal"]),
                "start": str(row.get("start")),
                "k": None if row.get("k") is None else int(row["k"]),
                "sampler": sampler,
                "noise": row.get("noise"),
                "shares": None if shares is None else [float(x) for x in shares],
                "budget": None if row.get("budget") is None else float(row["budget"]),
            }
        )
    return out


def std_error_path(out: str | Path) -> Path:
    """``OUT_STEM.std_error.SUFFIX`` beside a wide output ``OUT``."""
    file = Path(out)
    return file.with_name(f"{file.stem}.std_error{file.suffix}")


def write_std_errors(
    result: pd.DataFrame,
    out: str | Path,
    *,
    hierarchy: object,
    command: str,
    long: bool = False,
    errors: pd.DataFrame | None = None,
) -> Path:
    """Write the standard errors of ``result`` (wide: a twin file; long: into ``out``);
    ``errors``: already computed (a store's, :func:`dpstream._std_errors.store_std_errors`)."""
    from dpstream._std_errors import std_errors

    if errors is None:
        terms = {"released": "The release", "hierarchy": "The '--hierarchy' file"}
        with cli_terms(command, terms):
            errors = std_errors(result, hierarchy=hierarchy)
    file = Path(out)
    if long:
        from dpstream.io import wide_to_long, write_table

        frame = wide_to_long(result)
        err = wide_to_long(errors)
        frame["std_error"] = err["y"].to_numpy()
        write_table(frame, file, index=False)
        return file
    target = std_error_path(file)
    errors = errors if isinstance(errors, pd.DataFrame) else errors.to_frame()
    errors.attrs = {}
    if target.suffix.lower() == ".csv":
        errors.to_csv(target)
    else:
        errors.to_parquet(target)
    return target
