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
    "check_no_ledger",
    "refuse_overwriting_inputs",
    "write_output_pair",
    "check_writable",
    "ledger_options",
    "open_ledger",
    "privacy_sidecar",
    "show_guarantee",
    "write_privacy",
]


def ledger_options(func: Callable) -> Callable:
    """Add ``--ledger``, ``--budget-epsilon``, ``--budget-delta``, ``--dataset``,
    ``--new-dataset`` and ``--no-ledger`` to a command."""
    func = click.option(
        "--no-ledger",
        is_flag=True,
        help="Charge no ledger: a throwaway experiment. Said in the record and on stderr; "
        "releases of the same data compose all the same.",
    )(func)
    func = click.option(
        "--new-dataset",
        is_flag=True,
        help="These streams are a new data set, although a data set with the same streams "
        "and hierarchy is known (its ledger is not charged).",
    )(func)
    func = click.option(
        "--dataset",
        help="The data set's name: its releases share one budget, in "
        "$DPSTREAM_HOME/ledgers/NAME.db (default ~/.dpstream). Without it (and without "
        "--ledger) the data set is recognised by its streams and hierarchy; streams never "
        "seen get a ledger of their own (auto-FINGERPRINT) whose total is this release's.",
    )(func)
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


def check_no_ledger(
    no_ledger: bool, ledger_args: tuple, command: str, *, store: bool = False
) -> bool:
    """``--no-ledger`` alone (not with --ledger, --dataset, --budget-*, --new-dataset or
    --store); when given, warn on stderr (loud: the record says it too). Returns it."""
    if not no_ledger:
        return False
    if store or any(a not in (None, False) for a in ledger_args):
        raise ParameterError(
            f"The '--no-ledger' option of {command} charges no ledger; it cannot be combined "
            "with --ledger, --dataset, --budget-epsilon/--budget-delta, --new-dataset or "
            "--store (a store's periods are always accounted). Drop one of them."
        )
    click.secho(
        "--no-ledger: this release is charged to NO ledger (a throwaway experiment). Releases "
        "of the same data compose all the same: do not publish it beside accounted ones.",
        fg="yellow",
        err=True,
    )
    return True


_TERMS = {"dataset": "--dataset", "ledger": "--ledger", "new_dataset": "--new-dataset"}


def open_ledger(
    ledger_path: str | None,
    budget_epsilon: float | None,
    budget_delta: float | None,
    dataset: str | None = None,
    new_dataset: bool = False,
    *,
    budget: Budget,
    unit: PrivacyUnit,
    command: str,
    streams=None,
    hierarchy=None,
    seeded: bool = False,
    check: bool = True,
) -> Any:
    """Open (or create) the data set's ledger and check it can pay ``budget`` under ``unit``.

    The ledger is ``--ledger``, or the ``--dataset``'s, or the one the data set is known by
    from its ``streams`` and ``hierarchy`` (a new data set: a ledger in ``$DPSTREAM_HOME``
    whose total is ``--budget-epsilon``/``--budget-delta``, or this release's budget: streams
    never seen are registered so);
    :mod:`dpstream._dataset`. Returns the :class:`~dpstream._ledger.SQLiteLedger`, or None
    (a seeded run, or the streams unknown, with no ledger or data set named). Raises a
    one-line :class:`~mechanisms.ParameterError` in CLI terms (an overspend, another unit, a
    total that differs from the file's, a known data set without its ledger) before any
    noise is drawn; nothing is charged. ``check=False``: no balance check (a store checks
    per period).
    """
    total = _budget_total(budget_epsilon, budget_delta, command)
    if ledger_path is None and dataset is None:
        if total is not None:
            raise ParameterError(
                f"The '--budget-epsilon' option of {command} needs --ledger or --dataset (where "
                "the budget is kept)."
            )
        if streams is None:
            return None
    from dpstream._dataset import open_dataset_ledger

    if ledger_path is not None:
        path = Path(ledger_path)
        name = repr(str(ledger_path))
        if total is None and not path.exists():
            raise ParameterError(
                f"The '--ledger' file {name} of {command} does not exist: create it with "
                "--budget-epsilon (and --budget-delta), the total budget of every release it "
                "pays."
            )
        if total is not None and not path.exists():
            check_writable(ledger_path, "--ledger", command)
    else:
        name = "of the data set"
    from dpstream._dataset import covering_total

    covering = covering_total(budget)  # a new data set's total: this release's budget
    try:  # a new file accounts for this release's unit; an old one is checked below
        ledger = open_dataset_ledger(
            streams=streams,
            hierarchy=hierarchy,
            total=total if (total is not None or ledger_path is not None) else covering,
            unit=unit,
            dataset=dataset,
            ledger=ledger_path,
            new_dataset=new_dataset,
            seeded=seeded,
            owner=command,
            terms=_TERMS,
            auto=True,  # streams never seen are registered (a plain release, a store's)
        )
    except ParameterError as exc:
        if ledger_path is None:
            raise
        raise ParameterError(f"The '--ledger' file {name} of {command}: {exc}") from None
    if ledger is None:
        return None
    if ledger_path is None:
        name = f"The ledger {str(ledger.path)!r}"
        if ledger.dataset:
            name += f" of the data set {ledger.dataset!r}"
    else:
        name = f"The '--ledger' file {name}"
    if total is not None and total != ledger.total:
        ledger.close()
        raise ParameterError(
            f"{name} of {command} already holds a total of {ledger.total}; "
            f"got --budget-epsilon/--budget-delta {total}. Drop them to use the file's total."
        )
    if not check:
        return ledger
    try:
        ledger.check(budget, command, unit=unit)
    except BudgetExceededError:
        left = ledger.remaining_text
        spent = ledger.remaining_epsilon <= 0
        ledger.close()
        advice = "its budget is spent" if spent else "lower --epsilon"
        raise ParameterError(
            f"{name} has {left} left of {ledger.total}; this release needs "
            f"{budget}. Nothing was released: {advice} (releases of the same data "
            "compose across every file)."
        ) from None
    except ParameterError:
        kept = ledger.unit
        ledger.close()
        raise ParameterError(
            f"{name} accounts for {kept.describe()}; this release "
            f"protects {unit.describe()}. A ledger accounts for one unit (one ledger per privacy "
            "unit): release with its --w and --alpha."
        ) from None
    return ledger


def refuse_overwriting_inputs(
    command: str,
    inputs: list,
    out_path: str | None,
    *,
    store_path: str | None = None,
    ledger_path: str | None = None,
    extra: tuple = (),
) -> None:
    """The input is sacred (issue 31 §4): ``--out``, its wide twin and sidecars, ``--store``
    and ``--ledger`` must not be an input file (:func:`os.path.samefile`, links included).
    Checked before any work."""
    from dpstream._files import refuse_inputs

    outputs: list[tuple[str, Any]] = []
    if out_path is not None:
        out = Path(out_path)
        outputs += [
            ("--out", out),
            ("--out", out.with_name(f"{out.stem}.wide{out.suffix}")),
            ("--out", out.with_name(f"{out.stem}.std_error{out.suffix}")),
            ("--out", privacy_sidecar(out)),
            ("--out", out.with_name(out.name + ".json")),
            ("--out", out.with_name(out.name + ".query.json")),
        ]
    outputs += [("--store", store_path), ("--ledger", ledger_path), *extra]
    refuse_inputs(outputs, inputs, command)


def write_output_pair(path: str | Path, write_data: Callable[[Path], None], privacy) -> Path:
    """Write OUT and ``OUT.privacy.json`` as a pair: both to temporary names, the record renamed
    first, the data last (:func:`dpstream._files.write_pair`): no output without its record."""
    side = privacy_sidecar(path)
    text = json.dumps(privacy, indent=2, ensure_ascii=False) + "\n"
    from dpstream._files import write_pair

    write_pair(path, write_data, side, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return side


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
