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

- without ``--dataset``/``--ledger`` (``ledger=None`` in Python), the known data set's ledger
  is charged. Streams never seen are registered: they get a ledger named
  ``auto-<fingerprint>`` whose total is the first release's budget (a store's: its per-window
  budget; the CLI's: ``--budget-epsilon`` if given). Every path does this -- the Python
  functions (:func:`account_release`), the store, the CLI with or without ``--store`` -- so
  re-releasing the same streams is charged to the same ledger, and refused once it is spent;
- a *new* ledger for streams that are a known data set is refused unless ``--new-dataset`` (the
  operator says these are other data), and so is a release whose known ledger file is missing:
  a lost ledger is restored, never replaced.

Seeded runs (experiments, labelled NOT private) are not charged to a data set unless a ledger
or data set is named. A throwaway experiment on real data that must not touch the data set's
budget says so: ``ledger=False`` (Python) or ``--no-ledger`` (CLI). It is loud: the release's
record says ``"ledger": {"accounted": false, ...}`` and the CLI prints a warning.

Why charge by default rather than refuse: the same data released twice composes whether or not
the caller remembered its ledger; charging the data set's own ledger is the accounting that is
true in every case, and a release the ledger cannot pay is refused before any work
(:class:`mechanisms.BudgetExceededError`). What *is* refused is a *different* ledger for known
streams (a new ``--ledger`` file, another data set's ledger): that would start the budget over.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from mechanisms import Budget, BudgetLedger, ParameterError, PrivacyUnit

__all__ = [
    "DataSetError",
    "DeferredAccount",
    "account_release",
    "covering_total",
    "ledger_summary",
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


def covering_total(budget: Budget) -> Budget:
    """The total of a ledger created for one release of ``budget``: the smallest floats whose
    decimals (:func:`dpstream._ledger.total_decimal`, what a ledger's total means) are not below
    the exact values charged (``Budget(0.1)`` charges the double just above 1/10, so its total
    is 0.10000000000000002; a CLI release, calibrated to the decimal, gets 0.1)."""
    import math
    from fractions import Fraction

    from ._ledger import total_decimal

    def cover(value: float) -> float:
        out = float(value)
        while total_decimal(out) < Fraction(value):
            out = math.nextafter(out, math.inf)
        return out

    return Budget(cover(budget.epsilon), cover(budget.delta))


#: How the Python functions' options are called in messages.
PYTHON_TERMS = {
    "dataset": "ledger=<the data set's SQLiteLedger>",
    "ledger": "ledger=",
    "new_dataset": "a ledger of their own (SQLiteLedger(path, total=..., dataset=NAME, "
    "fingerprint=dpstream._dataset.fingerprint(streams, hierarchy)))",
}


def stream_ids(values: object) -> list[str] | None:
    """The stream ids of a Python input: a DataFrame's columns, a named Series' name; None for
    an array or an unnamed Series (no identity to account it by)."""
    import pandas as pd

    if isinstance(values, pd.DataFrame):
        return [str(c) for c in values.columns]
    if isinstance(values, pd.Series) and values.name is not None:
        return [str(values.name)]
    return None


def account_release(
    ledger: object,
    *,
    streams: Iterable[object] | None,
    hierarchy: Mapping | None,
    budget: Budget,
    unit: PrivacyUnit,
    seeded: bool,
    owner: str,
    label: str | None = None,
) -> dict | None:
    """Charge one Python release (after validation, before any draw) to its data set's ledger.

    ``ledger``:

    - ``None`` (default): the data set's ledger, found by the fingerprint of ``streams`` and
      ``hierarchy`` (module notes); streams never seen are registered with a new ledger
      ``auto-<fingerprint>`` in ``$DPSTREAM_HOME`` whose total is ``budget``;
    - a :class:`~dpstream._ledger.SQLiteLedger`: that file, which must be the data set's (a
      ledger recording other streams, or a new ledger for streams known elsewhere, is refused);
    - another :class:`~mechanisms.BudgetLedger` (in memory): charged *as well as* the data
      set's ledger (a sub-budget of a session; it cannot replace the data set's ledger, which
      outlives it);
    - ``False``: no ledger (a throwaway experiment). Loud: the record says so.

    A seeded run (an experiment, NOT private) is charged to ``ledger`` only, never to a data
    set's ledger it did not name. ``label``: the charge's label (default ``owner``). Returns
    the record's ``ledger`` entry (None: a seeded run).

    Raises
    ------
    DataSetError
        Input without stream ids (an array) and no ledger; a ledger of other streams; a new
        ledger for known streams. Nothing is charged or created.
    mechanisms.BudgetExceededError
        The data set's ledger (or the given one) cannot pay ``budget``; nothing is charged.
    """
    from mechanisms import BudgetLedger

    from ._ledger import SQLiteLedger

    label = owner if label is None else label
    if ledger is False:
        BudgetLedger(budget, unit=unit).charge(budget, label, unit=unit)  # the unit's checks
        return {
            "accounted": False,
            "why": "ledger=False: a throwaway experiment, not charged to the data set's ledger "
            "(releases of the same data compose all the same)",
        }
    fp = None if streams is None else fingerprint(streams, hierarchy)
    if isinstance(ledger, SQLiteLedger):
        if fp is not None and ledger.path is not None:
            _bind(ledger, fp, owner)
        ledger.charge(budget, label, unit=unit)
        if fp is not None and ledger.path is not None:
            register(ledger)
        return _entry(ledger)
    if seeded:
        target = BudgetLedger(budget, unit=unit) if ledger is None else ledger
        target.charge(budget, label, unit=unit)
        return None
    if fp is None:
        raise DataSetError(
            f"The input of {owner} has no stream ids (an array, or a Series without a name), so "
            "the data set it belongs to cannot be recognised and charged. Pass a named pandas "
            "Series or a DataFrame, ledger=<the data set's SQLiteLedger>, or ledger=False for a "
            "throwaway experiment."
        )
    book = open_dataset_ledger(
        streams=streams,
        hierarchy=hierarchy,
        total=covering_total(budget),
        unit=unit,
        owner=owner,
        terms=PYTHON_TERMS,
        auto=True,
    )
    try:
        if ledger is not None:
            ledger.check(budget, label, unit=unit)
        book.check(budget, label, unit=unit)
        if ledger is not None:
            ledger.charge(budget, label, unit=unit)
        book.charge(budget, label, unit=unit)
        return _entry(book)
    finally:
        book.close()


def _bind(book, fp: str, owner: str) -> None:
    """Check that ``book`` may account for the streams ``fp`` (Python: the terms of
    :data:`PYTHON_TERMS`) and record the fingerprint in a ledger that has none."""
    _check_same(book, fp, None, PYTHON_TERMS, owner)
    others = [e for e in known_ledgers(fp) if e.get("id") != book.id]
    if not book.fingerprint and others:
        raise DataSetError(
            f"These streams are already the data set {others[0].get('dataset')!r} (ledger "
            f"{others[0]['ledger']!r}), not {str(book.path)!r}'s: releases of the same data "
            f"compose, so they are charged to that ledger. Pass {PYTHON_TERMS['dataset']}; if "
            f"these are truly other data, give them {PYTHON_TERMS['new_dataset']}. Nothing was "
            "released."
        )
    book.adopt(fp, None)


def _entry(book) -> dict:
    """The record's ``ledger`` entry: which ledger paid (public: a path, a name, an id)."""
    return {
        "accounted": True,
        "ledger": None if book.path is None else str(book.path),
        "dataset": book.dataset,
        "id": None if book.id is None else book.id[:12],
    }


def ledger_summary(path: str | Path) -> dict:
    """What a ledger file has spent, per release and per period, and what is left -- the
    figures of ``dpstream ledger show`` and of the report (opened read-only).

    Returns a dict: dataset, ledger, id, unit, total_epsilon, total_delta, left (text),
    releases (rows: id, created, label, epsilon, delta, period, store) and periods (rows:
    period, epsilon, delta -- a period's own charges plus those tied to no period).
    """
    from ._ledger import SQLiteLedger, _dec, _period_name, total_decimal

    with SQLiteLedger(Path(path), readonly=True) as book:
        entries = book.entries()
        periods = [
            {
                "period": _period_name(key),
                "epsilon": _dec(book._global + book._by_period[key]),
                "delta": _dec(book._global_dlt + book._by_period_dlt.get(key, 0)),
            }
            for key in sorted(book._by_period)
        ]
        for e in entries:
            e["period"] = None if e["period"] is None else _period_name(e["period"])
        return {
            "dataset": book.dataset,
            "ledger": str(path),
            "id": (book.id or "?")[:12],
            "unit": "any unit" if book.unit is None else book.unit.describe(),
            "total_epsilon": _dec(total_decimal(book.total.epsilon)),
            "total_delta": _dec(total_decimal(book.total.delta)),
            "left": book.remaining_text,
            "releases": entries,
            "periods": periods,
        }


class DeferredAccount(BudgetLedger):
    """A stand-in ledger for a release whose charge is made deep inside a mechanism
    (``mechanisms.pak_release``): its :meth:`charge`, called there after validation and before
    the first draw, is :func:`account_release` for the streams of ``values`` -- so nothing is
    opened or created for a release that validation refuses. :attr:`entry` is the record's
    ``ledger`` entry after the charge."""

    def __init__(self, given: object, *, values: object, seeded: bool, owner: str) -> None:
        BudgetLedger.__init__(self, Budget(1.0))  # its own total is never used
        self._given, self._streams = given, stream_ids(values)
        self._seeded, self._owner = seeded, owner
        self.entry: dict | None = None

    def check(self, budget: Budget, label: str = "", *, unit=None) -> None:
        """Nothing before the charge (the charge checks every ledger, then records)."""

    def charge(self, budget: Budget, label: str = "", *, unit=None) -> None:
        """Charge the data set's ledger (:func:`account_release`)."""
        self.entry = account_release(
            self._given, streams=self._streams, hierarchy=None, budget=budget, unit=unit,
            seeded=self._seeded, owner=self._owner, label=label or None,
        )  # fmt: skip
