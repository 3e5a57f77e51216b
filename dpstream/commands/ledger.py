"""``dpstream ledger``: what each data set has spent, per period and per release, and what is
left (issue 24 §2); ``dpstream ledger init`` creates a ledger explicitly (issue 31 §1).

A data set's ledger lives in ``$DPSTREAM_HOME/ledgers/NAME.db`` (``~/.dpstream`` by default) or
in the file given with ``--ledger`` (:mod:`dpstream._dataset`). ``show`` opens ledgers
read-only: it never creates or changes a file.
"""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["ledger"]


@click.group(name="ledger")
def ledger() -> None:
    """Show data sets' budgets (spent per period and per release, left); create a ledger.

    \b
    Examples:
      dpstream ledger show                      # every data set in $DPSTREAM_HOME
      dpstream ledger show --dataset meters     # one data set, every charge
      dpstream ledger show budget.db            # a ledger file
      dpstream ledger init --dataset meters --budget-epsilon 1
    """


@ledger.command(name="init")
@click.argument("path", metavar="FILE", required=False, type=click.Path(dir_okay=False))
@click.option("--dataset", help="The data set's name (its ledger: $DPSTREAM_HOME/ledgers/NAME.db).")
@click.option("--budget-epsilon", type=float, required=True, help="ε of the whole budget.")
@click.option("--budget-delta", type=float, default=0.0, show_default=True, help="δ of it.")
def init(path: str | None, dataset: str | None, budget_epsilon: float, budget_delta: float) -> None:
    """Create a ledger: FILE, or the data set's (--dataset) in $DPSTREAM_HOME."""
    from dpstream._dataset import check_name, ledger_path
    from dpstream._ledger import SQLiteLedger
    from mechanisms import ParameterError

    from ._accounting import _budget_total

    command = "dpstream ledger init"
    if (path is None) == (dataset is None):
        raise ParameterError(f"{command} takes FILE or --dataset NAME (one of them).")
    total = _budget_total(budget_epsilon, budget_delta, command)
    if dataset is not None:
        check_name(dataset, "--dataset", command)
        file = ledger_path(dataset)
        file.parent.mkdir(parents=True, exist_ok=True)
    else:
        file = Path(path)
    made = SQLiteLedger.init(file, total=total, dataset=dataset)
    made.close()
    click.echo(f"Created the ledger {file} (id {made.id[:12]}), total {total}.")


@ledger.command(name="show")
@click.argument("path", metavar="FILE", required=False, type=click.Path(dir_okay=False))
@click.option("--dataset", help="The data set's name.")
def show(path: str | None, dataset: str | None) -> None:
    """What each data set has spent, per period and per release, and what is left."""
    from dpstream._dataset import check_name, home, ledger_path
    from mechanisms import ParameterError

    command = "dpstream ledger show"
    if path is not None and dataset is not None:
        raise ParameterError(f"{command} takes FILE or --dataset NAME, not both.")
    if dataset is not None:
        check_name(dataset, "--dataset", command)
        file = ledger_path(dataset)
        if not file.is_file():
            raise ParameterError(
                f"The '--dataset' option of {command}: no ledger for the data set {dataset!r} "
                f"in {str(file.parent)!r}."
            )
        _show_one(file, detail=True)
        return
    if path is not None:
        if not Path(path).is_file():
            raise ParameterError(f"The FILE argument of {command}: no file {path!r}.")
        _show_one(Path(path), detail=True)
        return
    folder = home() / "ledgers"
    files = sorted(folder.glob("*.db")) if folder.is_dir() else []
    if not files:
        click.echo(f"No data sets in {folder}.")
        return
    for file in files:
        _show_one(file, detail=False)


def _show_one(file: Path, *, detail: bool) -> None:
    from dpstream._dataset import ledger_summary

    book = ledger_summary(file)  # the report's figures too (dpstream.demo._summary)
    click.echo(
        f"Data set {book['dataset'] or '(no data set name)'}: ledger {file} (id {book['id']}); "
        f"total ε={book['total_epsilon']}, δ={book['total_delta']}; {book['unit']}."
    )
    periods = book["periods"]
    click.echo(
        f"  {len(book['releases'])} charge(s); left for the most spent period: {book['left']}"
        + ("" if not periods else f" ({len(periods)} period(s) charged)")
    )
    if not detail:
        return
    click.echo("  Per release:")
    for e in book["releases"]:
        store = "" if e["store"] is None else f", store id {e['store'][:12]}"
        period = "none (counts for every period)" if e["period"] is None else e["period"]
        click.echo(
            f"    #{e['id']} {e['created']}  {e['label']}: ε={e['epsilon']}, "
            f"δ={e['delta']}, period {period}{store}"
        )
    if periods:
        click.echo("  Per period (its charges plus those tied to no period):")
        for p in periods:
            click.echo(f"    {p['period']}: ε={p['epsilon']}, δ={p['delta']}")
