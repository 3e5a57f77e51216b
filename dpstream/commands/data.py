"""``dpstream data``: list the bundled real datasets and export them as CSV or Parquet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    import pandas as pd

from ._accounting import check_writable, write_privacy

__all__ = ["data"]

# name -> (loader, hierarchy or None, description). Loaders import pandas and the data only
# when called, so `dpstream data list` starts at once.


def _regional() -> pd.DataFrame:
    from dpstream import datasets

    return datasets.load_regional()[datasets.regional_hierarchy()["national"]]


def _regional_tree() -> dict:
    from dpstream import datasets

    return datasets.regional_hierarchy()


def _feeders() -> pd.DataFrame:
    from dpstream import datasets

    return datasets.load_simbench()


def _feeders_tree() -> dict:
    from dpstream import datasets

    return datasets.simbench_hierarchy()


def _household() -> pd.DataFrame:
    from dpstream import datasets

    return datasets.load_household()[datasets.household_hierarchy()["total"]]


def _household_tree() -> dict:
    from dpstream import datasets

    return datasets.household_hierarchy()


def _household_minutes() -> pd.DataFrame:
    from dpstream import datasets

    return datasets.household_minutes().rename("power_kw").to_frame()


_DATASETS = {
    "regional": (
        _regional,
        _regional_tree,
        "SimBench 2016: 4 regions (leaves) of a national total, kW per half-hour, 17,568 steps",
    ),
    "feeders": (
        _feeders,
        _feeders_tree,
        "SimBench 2016: 44 feeders -> 4 regions -> national, kW per half-hour (leaves only)",
    ),
    "household": (
        _household,
        _household_tree,
        "UCI household 2007, Wh per half-hour: 3 sub-meters + the rest (leaves) of the total",
    ),
    "household-minutes": (
        _household_minutes,
        None,
        "UCI household power 2007 per minute, one stream (kW, bound 36): for tops/pak/bt",
    ),
}


@click.group()
def data() -> None:
    """List and export the bundled real datasets (sources and licences: dpstream/data)."""


@data.command(name="list")
def list_() -> None:
    """List the bundled datasets."""
    for name, (_, _, text) in _DATASETS.items():
        click.echo(f"{name:<18} {text}")


def edges_path(path: Path) -> Path:
    """The (child, parent) table beside a long export: ``OUT_STEM.edges.SUFFIX``."""
    return path.with_name(f"{path.stem}.edges{path.suffix}")


@data.command()
@click.argument("name")
@click.argument("out", type=click.Path(dir_okay=False, writable=True))
@click.option(
    "--long",
    "long_format",
    is_flag=True,
    help="Long format (unique_id, ds, y: one row per leaf and step), and the hierarchy as an "
    "edges table (child, parent) in OUT_STEM.edges.SUFFIX.",
)
def export(name: str, out: str, long_format: bool) -> None:
    """Write dataset NAME to OUT (.csv or .parquet); a hierarchy goes to OUT's stem + .json.

    Wide by default (a time column and one column per leaf); with --long the format operators'
    forecasting tools use (unique_id, ds, y) and the hierarchy as data (child, parent).

    \b
    Examples:
      dpstream data export regional regional.csv      # also writes regional.hierarchy.json
      dpstream release optstream regional.csv --epsilon 1 --alpha 50 \\
          --hierarchy regional.hierarchy.json --out released.csv
      dpstream data export regional long.csv --long   # also writes long.edges.csv
      dpstream release optstream long.csv --epsilon 1 --alpha 50 --hierarchy long.edges.csv \\
          --store ops.db --out released.csv
    """
    from mechanisms import ParameterError

    if name not in _DATASETS:
        raise ParameterError(
            f"The NAME argument of dpstream data export must be one of {list(_DATASETS)}. "
            f"Got {name!r}."
        )
    path = Path(out)
    if path.suffix.lower() not in (".csv", ".parquet"):
        raise ParameterError(
            f"The OUT argument of dpstream data export must end in .csv or .parquet. Got "
            f"{path.name!r}."
        )
    loader, hierarchy, _ = _DATASETS[name]
    # Both files are checked before either is written: no half export.
    check_writable(path, "OUT", "dpstream data export")
    tree = edges_path(path) if long_format else path.with_suffix(".hierarchy.json")
    if hierarchy is not None:
        check_writable(tree, "OUT", "dpstream data export")
    frame = loader()
    frame.index.name = "time"
    if long_format:
        from dpstream.io import wide_to_long, write_table

        table = wide_to_long(frame)
        write_table(table, path, index=False)
    elif path.suffix.lower() == ".csv":
        frame.to_csv(path)
    else:
        frame.to_parquet(path)
    write_privacy(
        path,
        {
            "release": False,
            "note": f"The bundled real data set {name!r}: no privacy. Release it with "
            "'dpstream release' before sharing.",
        },
    )
    shape = "long rows (unique_id, ds, y) of" if long_format else "rows x"
    rows = len(frame) * frame.shape[1] if long_format else len(frame)
    click.echo(f"Wrote {rows:,} {shape} {frame.shape[1]} streams to {path}")
    if hierarchy is not None:
        if long_format:
            import pandas as pd

            from dpstream.io import write_table

            edges = [(c, p) for p, kids in hierarchy().items() for c in kids]
            write_table(pd.DataFrame(edges, columns=["child", "parent"]), tree, index=False)
            click.echo(f"Wrote its hierarchy (child, parent) to {tree}")
        else:
            tree.write_text(json.dumps(hierarchy(), indent=1))
            click.echo(f"Wrote its hierarchy to {tree}")
