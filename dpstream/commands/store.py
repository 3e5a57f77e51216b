"""``dpstream store``: create, show and back up release stores (issue 31).

``dpstream store show STORE`` reads a store read-only (``mode=ro``: it never creates, changes or
checkpoints a file; ``python -m dpstream.store STORE`` is the same command). ``dpstream store
init STORE`` creates a store explicitly (where no file exists, or over an empty file named on
purpose). ``dpstream store backup STORE DEST`` writes a consistent, self-contained copy with
SQLite's backup API while jobs may run. Which side files may be deleted: see
``docs/operations.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

__all__ = ["store"]


@click.group(name="store")
def store() -> None:
    """Create, show and back up release stores.

    \b
    Examples:
      dpstream store init ops.db
      dpstream store show ops.db
      dpstream store backup ops.db backup/ops-2016-01-31.db
    """


@store.command(name="init")
@click.argument("path", metavar="STORE", type=click.Path(dir_okay=False))
def init(path: str) -> None:
    """Create an empty release store at STORE (a new file, or an empty one named on purpose)."""
    from dpstream.store import ReleaseStore

    with ReleaseStore.init(path) as created:
        click.echo(f"Created the store {path} (id {created.id[:12]}).")


@store.command(name="show")
@click.argument("path", metavar="STORE", type=click.Path(dir_okay=False))
def show(path: str) -> None:
    """Print a store's identity, configuration, periods and ledger (read-only)."""
    show_store(path)


@store.command(name="backup")
@click.argument("path", metavar="STORE", type=click.Path(dir_okay=False))
@click.argument("dest", metavar="DEST", type=click.Path(dir_okay=False))
def backup(path: str, dest: str) -> None:
    """Copy STORE to DEST (a new file) consistently, while jobs may run (SQLite backup API)."""
    from dpstream.store import ReleaseStore

    _exists(path)
    with ReleaseStore(path, readonly=True) as source:
        target = source.backup(dest)
        n = len(source.ordinals())
    click.echo(f"Backed up {path} ({n} period(s)) to {target}: a self-contained copy.")


def _exists(path: str) -> None:
    from mechanisms import ParameterError

    if not Path(path).is_file():
        raise ParameterError(f"The STORE argument: there is no store at {path!r}.")


def show_store(path: str) -> None:
    """The text of ``dpstream store show`` (and ``python -m dpstream.store``)."""
    import pandas as pd

    from dpstream.store import ReleaseStore

    _exists(path)
    with ReleaseStore(path, readonly=True) as st:
        meta = st.meta
        click.echo(
            f"store: {path} (id {meta.get('id', '?')[:12]}, created {meta.get('created', '?')}"
            + (f", data set {meta['dataset']!r}" if meta.get("dataset") else "")
            + ")"
        )
        click.echo("configuration: " + json.dumps(st.config, sort_keys=True))
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            click.echo("periods:")
            table = st.periods().drop(columns=["released_at"], errors="ignore")
            click.echo(table.to_string() if len(table) else "  (none)")
        ledger = st.ledger
        if ledger is not None:
            click.echo(f"ledger: {ledger.total} per window; charges:")
            for charge in ledger.charges:
                click.echo(f"  {charge.label}  {charge.budget}")
