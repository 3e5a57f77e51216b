"""A data set has one budget (issue 24 §2): its identity, its ledger, and where that ledger lives.

Releases of the same data compose, whatever file they are written to, whichever store holds
them, whether they ran from Python or the CLI (Dwork and Roth 2014, Thm. 3.16; per period,
[FV19] §5.1). So the budget belongs to the *data set*, not to a file: a data set is named once
by the operator (``--dataset NAME``, ``ReleaseStore(..., dataset=NAME)``) and identified by a
**fingerprint** of its stream ids and hierarchy (:func:`fingerprint`); its ledger is a
:class:`dpstream._ledger.SQLiteLedger` that records the name and fingerprint.

Where ledgers live. By default ``$DPSTREAM_HOME/ledgers/NAME.db`` (``DPSTREAM_HOME`` defaults
to ``~/.dpstream``); ``--ledger FILE`` (or ``ledger=``) names another file. Every ledger that
records a fingerprint is registered in ``$DPSTREAM_HOME/datasets/FINGERPRINT/LEDGER_ID.json``
(its name and path), so a release of the same streams is recognised wherever its ledger is:

- without ``--dataset``/``--ledger``, the known data set's ledger is charged. Streams never seen
  get a ledger named ``auto-<fingerprint>`` (its total the store's per-window budget) when a
  *store* releases them; a plain release of streams never named or seen is not accounted
  (as before issue 24: name a data set to account it -- ``--dataset``);
- a *new* ledger for streams that are a known data set is refused unless ``--new-dataset`` (the
  operator says these are other data), and so is a release whose known ledger file is missing:
  a lost ledger is restored, never replaced.

Seeded runs (experiments, labelled NOT private) are not charged to a data set unless a ledger
or data set is named.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from mechanisms import Budget, ParameterError, PrivacyUnit

__all__ = [
    "DataSetError",
    "fingerprint",
    "home",
    "input_ids",
    "known_ledgers",
    "ledger_path",
    "open_dataset_ledger",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


class DataSetError(ParameterError):
    """A release whose data set cannot be accounted as it should (a known data set without its
    ledger, a ledger of other streams)."""


def home() -> Path:
    """``$DPSTREAM_HOME``, or ``~/.dpstream``."""
    value = os.environ.get("DPSTREAM_HOME")
    return Path(value).expanduser() if value else Path.home() / ".dpstream"


def check_name(name: object, option: str = "--dataset", owner: str = "dpstream release") -> str:
    """A data set name: letters, digits, ``_``, ``.``, ``-`` (it names a file)."""
    if not isinstance(name, str) or not _NAME.match(name) or name.endswith(".db"):
        raise ParameterError(
            f"The {option!r} option of {owner} must be a name of letters, digits, '_', '.' or "
            f"'-' (at most 100, not ending in .db). Got {name!r} instead."
        )
    return name


def ledger_path(name: str) -> Path:
    """The default ledger file of data set ``name``: ``$DPSTREAM_HOME/ledgers/NAME.db``."""
    return home() / "ledgers" / f"{check_name(name)}.db"


def fingerprint(streams: Iterable[object], hierarchy: Mapping | None = None) -> str:
    """SHA-256 of the sorted stream ids and the hierarchy's (parent, sorted children) pairs."""
    tree = {} if hierarchy is None else {str(k): sorted(map(str, v)) for k, v in hierarchy.items()}
    text = json.dumps({"streams": sorted(map(str, streams)), "hierarchy": tree}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def input_ids(path: str | Path, time_column: str | None) -> list[str]:
    """The stream ids of a wide CSV/Parquet input from its header alone (long inputs: the
    ``unique_id`` values), without reading the values."""
    import pandas as pd

    file = Path(path)
    if file.suffix.lower() == ".csv":
        columns = [str(c) for c in pd.read_csv(file, nrows=0).columns]
    else:
        import pyarrow.parquet as pq

        columns = [str(c) for c in pq.read_schema(file).names if not c.startswith("__index")]
    if {"unique_id", "ds", "y"} <= set(columns):
        frame = pd.read_csv(file, usecols=["unique_id"]) if file.suffix == ".csv" else None
        if frame is None:
            frame = pd.read_parquet(file, columns=["unique_id"])
        return sorted(map(str, frame["unique_id"].unique()))
    time = time_column or ("time" if "time" in columns else (columns[0] if columns else None))
    return [c for c in columns if c != time]


def _registry(fp: str) -> Path:
    return home() / "datasets" / fp


def known_ledgers(fp: str) -> list[dict]:
    """The ledgers registered for fingerprint ``fp``: dicts with dataset, ledger (path), id."""
    folder = _registry(fp)
    out = []
    if folder.is_dir():
        for entry in sorted(folder.glob("*.json")):
            try:
                out.append(json.loads(entry.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue
    return out


def register(ledger) -> None:
    """Record a ledger with a fingerprint in the registry (idempotent)."""
    fp, ident = ledger.fingerprint, ledger.id
    if not fp or not ident:
        return
    folder = _registry(fp)
    folder.mkdir(parents=True, exist_ok=True)
    entry = folder / f"{ident}.json"
    if not entry.exists():
        text = json.dumps(
            {"dataset": ledger.dataset, "ledger": str(Path(ledger.path).resolve()), "id": ident}
        )
        tmp = entry.with_suffix(".tmp")
        tmp.write_text(text + "\n", encoding="utf-8")
        os.replace(tmp, entry)


def open_dataset_ledger(
    *,
    streams: Iterable[object] | None,
    hierarchy: Mapping | None,
    total: Budget | None,
    unit: PrivacyUnit | None,
    dataset: str | None = None,
    ledger: str | Path | None = None,
    new_dataset: bool = False,
    seeded: bool = False,
    owner: str = "dpstream release",
    terms: Mapping[str, str] | None = None,
    auto: bool = True,
):
    """The ledger a release of these streams is charged to (module notes), opened; or None
    (a seeded run, or no streams known, with no ledger or data set named).

    Parameters
    ----------
    streams, hierarchy
        The data set's stream ids and hierarchy (its fingerprint); None: unknown.
    total : Budget or None
        The total of a ledger this call creates (None: a new one is refused).
    unit : PrivacyUnit or None
        The privacy unit of a ledger this call creates.
    dataset, ledger
        The data set's name / an explicit ledger file.
    new_dataset : bool
        The operator says these streams are a new data set although their fingerprint is known.
    terms : mapping, optional
        How options are called in messages (``{"dataset": "--dataset", ...}``).
    auto : bool, default True
        Streams never named and not known get a new ledger ``auto-<fingerprint>`` (a store's
        releases); False: no ledger for them (a plain release without ``--dataset``).

    Raises
    ------
    DataSetError
        A new ledger for a known data set (without ``new_dataset``), a known data set whose
        ledger file is missing, a ledger recording other streams. Nothing is created then.
    """
    from ._ledger import SQLiteLedger

    t = {"dataset": "dataset", "ledger": "ledger", "new_dataset": "new_dataset"}
    t.update(terms or {})
    if dataset is not None:
        check_name(dataset, t["dataset"], owner)
    fp = None if streams is None else fingerprint(streams, hierarchy)
    if ledger is None and dataset is None and (fp is None or seeded):
        return None
    known = [] if fp is None else known_ledgers(fp)
    if ledger is None and dataset is None and not known and not auto:
        return None  # a plain release of streams never named (module notes)
    if ledger is not None:
        path = Path(ledger)
    elif dataset is not None:
        path = ledger_path(dataset)
    elif len({e.get("ledger") for e in known}) > 1:
        names = ", ".join(sorted({repr(e.get("dataset")) for e in known}))
        raise DataSetError(
            f"These streams are several data sets ({names}): name the one this release belongs "
            f"to ({t['dataset']} or {t['ledger']})."
        )
    elif known:
        entry = known[0]
        path, dataset = Path(entry["ledger"]), entry.get("dataset")
        if not path.exists():
            if not new_dataset:
                raise DataSetError(
                    f"These streams are the data set {entry.get('dataset')!r}, whose ledger "
                    f"{str(path)!r} is missing. Releases of the same data compose across every "
                    "file: restore that ledger (and its side files) from a backup. If these are "
                    f"truly other data, say {t['new_dataset']}."
                )
            path, dataset = ledger_path(f"auto-{fp[:16]}"), None
    else:
        path = ledger_path(f"auto-{fp[:16]}")
    if path.exists():
        opened = SQLiteLedger(path)
        try:
            _check_same(opened, fp, dataset, t, owner)
            others = [e for e in known if e.get("id") != opened.id]
            if fp is not None and not opened.fingerprint and others and not new_dataset:
                raise DataSetError(
                    f"These streams are already the data set "
                    f"{others[0].get('dataset')!r} (ledger {others[0]['ledger']!r}), not "
                    f"{str(path)!r}'s. Name it ({t['dataset']} or {t['ledger']}); if these are "
                    f"truly other data, say {t['new_dataset']}."
                )
            if fp is not None:
                opened.adopt(fp, dataset)
        except BaseException:
            opened.close()
            raise
        register(opened)
        return opened
    others = [e for e in known if Path(e["ledger"]) != path.resolve()]
    if others and not new_dataset:
        names = ", ".join(sorted({repr(e.get("dataset")) for e in others}))
        raise DataSetError(
            f"These streams are already the data set {names} (ledger "
            f"{others[0]['ledger']!r}), and {str(path)!r} is not its ledger: releases of the "
            f"same data compose, so they are charged to that ledger. Name it ({t['dataset']} or "
            f"{t['ledger']}); if these are truly other data, say {t['new_dataset']}. Nothing "
            "was released."
        )
    if total is None:
        return None  # the caller's own message (e.g. "give --budget-epsilon")
    if dataset is None and ledger is None and fp is not None:
        dataset = f"auto-{fp[:16]}"
    path.parent.mkdir(parents=True, exist_ok=True)
    created = SQLiteLedger(path, total=total, unit=unit, dataset=dataset, fingerprint=fp)
    register(created)
    return created


def _check_same(ledger, fp: str | None, dataset: str | None, t, owner: str) -> None:
    if fp is not None and ledger.fingerprint and ledger.fingerprint != fp:
        raise DataSetError(
            f"The ledger {str(ledger.path)!r} of {owner} accounts for the data set "
            f"{ledger.dataset!r}, other streams (or another hierarchy) than these. Name the data "
            f"set these streams belong to ({t['dataset']} or {t['ledger']})."
        )
    if dataset is not None and ledger.dataset and ledger.dataset != dataset:
        raise DataSetError(
            f"The ledger {str(ledger.path)!r} accounts for the data set {ledger.dataset!r}, not "
            f"{dataset!r}."
        )
