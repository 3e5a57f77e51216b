"""The CLI's accountant and privacy records: ``--ledger``, sidecars, checks before any work.

Every command that draws noise takes ``--ledger PATH`` (a :class:`dpstream._ledger.SQLiteLedger`
file; ``--budget-epsilon``/``--budget-delta`` create it). The release's budget and unit are
checked against the file before the input is read; the release itself charges the file after
validation and before its first draw. Every file the CLI writes gets ``OUT.privacy.json``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from mechanisms import (
    Budget,
    BudgetExceededError,
    ParameterError,
    PrivacyRecord,
    PrivacyUnit,
)

__all__ = [
    "check_folder",
    "check_writable",
    "ledger_options",
    "open_ledger",
    "privacy_sidecar",
    "show_guarantee",
    "write_privacy",
]


def ledger_options(func: Callable) -> Callable:
    """Add ``--ledger``, ``--budget-epsilon`` and ``--budget-delta`` to a command."""
    func = click.option(
        "--budget-delta",
        type=float,
        help="δ of the whole --ledger budget, when this run creates it [default: 0].",
    )(func)
    func = click.option(
        "--budget-epsilon",
        type=float,
        help="ε of the whole --ledger budget, when this run creates it.",
    )(func)
    return click.option(
        "--ledger",
        "ledger_path",
        type=click.Path(dir_okay=False),
        help="Privacy accountant (SQLite file): every release is charged to it and refused "
        "once its total is spent. Created with --budget-epsilon.",
    )(func)


def _budget_total(epsilon: float | None, delta: float | None, command: str) -> Budget | None:
    if epsilon is None:
        if delta is not None:
            raise ParameterError(
                f"The '--budget-delta' option of {command} needs --budget-epsilon (both "
                "describe the total of a new --ledger)."
            )
        return None
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError(
            f"The '--budget-epsilon' option of {command} must be a float in (0, inf). Got "
            f"{epsilon!r} instead."
        )
    delta = 0.0 if delta is None else delta
    if not (math.isfinite(delta) and 0 <= delta < 1):
        raise ParameterError(
            f"The '--budget-delta' option of {command} must be a float in [0, 1). Got "
            f"{delta!r} instead."
        )
    return Budget(epsilon, delta)


def open_ledger(
    ledger_path: str | None,
    budget_epsilon: float | None,
    budget_delta: float | None,
    *,
    budget: Budget,
    unit: PrivacyUnit,
    command: str,
) -> Any:
    """Open (or create) the ``--ledger`` file and check it can pay ``budget`` under ``unit``.

    Returns the :class:`~dpstream._ledger.SQLiteLedger`, or None without ``--ledger``. Raises
    a one-line :class:`~mechanisms.ParameterError` in CLI terms (an overspend, another unit,
    a total that differs from the file's) before any input is read and nothing is charged.
    """
    total = _budget_total(budget_epsilon, budget_delta, command)
    if ledger_path is None:
        if total is not None:
            raise ParameterError(
                f"The '--budget-epsilon' option of {command} needs --ledger (the file the "
                "budget is kept in)."
            )
        return None
    from dpstream._ledger import SQLiteLedger

    path = Path(ledger_path)
    name = repr(str(ledger_path))
    if total is None and not (path.is_file() and path.stat().st_size > 0):
        raise ParameterError(
            f"The '--ledger' file {name} of {command} does not exist: create it with "
            "--budget-epsilon (and --budget-delta), the total budget of every release it pays."
        )
    if total is not None and not path.exists():
        check_writable(ledger_path, "--ledger", command)
    creating = not (path.is_file() and path.stat().st_size > 0)
    try:  # a new file accounts for this release's unit; an old one is checked below
        ledger = SQLiteLedger(
            path, total=total if creating else None, unit=unit if creating else None
        )
    except ParameterError as exc:
        raise ParameterError(f"The '--ledger' file {name} of {command}: {exc}") from None
    if total is not None and total != ledger.total:
        ledger.close()
        raise ParameterError(
            f"The '--ledger' file {name} of {command} already holds a total of {ledger.total}; "
            f"got --budget-epsilon/--budget-delta {total}. Drop them to use the file's total."
        )
    try:
        ledger.check(budget, command, unit=unit)
    except BudgetExceededError:
        left = ledger.remaining_text
        ledger.close()
        raise ParameterError(
            f"The '--ledger' file {name} has {left} left of {ledger.total}; this release needs "
            f"{budget}. Nothing was released: lower --epsilon or use another ledger."
        ) from None
    except ParameterError:
        kept = ledger.unit
        ledger.close()
        raise ParameterError(
            f"The '--ledger' file {name} accounts for {kept.describe()}; this release "
            f"protects {unit.describe()}. Use one ledger per privacy unit (same --w and "
            "--alpha, or another --ledger file)."
        ) from None
    return ledger


def check_writable(path: str | Path, option: str, command: str) -> Path:
    """Refuse an output path that cannot be written (before any work is done)."""
    file = Path(path)
    if file.is_dir():
        raise ParameterError(
            f"The {option!r} option of {command} must be a file, not a folder. Got {str(path)!r}."
        )
    folder = file.parent if str(file.parent) else Path(".")
    if not folder.is_dir():
        raise ParameterError(
            f"The {option!r} option of {command} must be in an existing folder: "
            f"{str(folder)!r} does not exist."
        )
    if not os.access(folder, os.W_OK) or (file.exists() and not os.access(file, os.W_OK)):
        raise ParameterError(
            f"The {option!r} option of {command} must be a writable path. Got {str(path)!r}."
        )
    return file


def check_folder(path: str | Path, option: str, command: str) -> Path:
    """Refuse an output folder that cannot be created or written (before any work)."""
    folder = Path(path)
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and (not probe.is_dir() or not os.access(probe, os.W_OK)):
        raise ParameterError(
            f"The {option!r} option of {command} must be a folder that can be written. "
            f"{str(probe)!r} is {'not writable' if probe.is_dir() else 'a file'}."
        )
    return folder


def privacy_sidecar(path: str | Path) -> Path:
    """The privacy sidecar of an output file: ``OUT.privacy.json``."""
    file = Path(path)
    return file.with_name(file.name + ".privacy.json")


def write_privacy(path: str | Path, privacy: dict | list) -> Path:
    """Write ``OUT.privacy.json``: a record (one release), a list (several), or a note."""
    side = privacy_sidecar(path)
    side.write_text(json.dumps(privacy, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return side


def show_guarantee(record: PrivacyRecord) -> None:
    """Print the guarantee in words (stdout), before the release."""
    click.echo(f"Guarantee: {record.describe()}")
