"""The report's first section, "What was released and what it cost", and its list of symbols.

Built from the releases' privacy records (:class:`mechanisms.PrivacyRecord`, as
``to_dict()``): the ones the pipelines attach to their output (``DataFrame.attrs["privacy"]``)
and, for the event-stream mechanisms whose results carry none, records built here from the
stage's public parameters. Each record is restated in the reader's terms: the unit of the
values, the length of a step and whose data it is ("any change of up to 50 kW in each half-hour
of one region's load, within any one day, is hidden"). Only public facts enter: the records
hold no value computed from the data.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import pandas as pd

from dpstream.demo._report import ReportSection, ReportTable, format_number

__all__ = [
    "GLOSSARY",
    "ReleaseEntry",
    "glossary_section",
    "ledger_section",
    "plain_guarantee",
    "privacy_section",
]

#: Plain names of the mechanisms in the records.
MECHANISM_NAMES = {
    "optstream": "OptStream: a few noisy samples per day, interpolated, made consistent (FV19)",
    "laplace": "Laplace noise on every step",
    "dft": "noisy Fourier coefficients (DFT)",
    "pegasus": "PeGaSus: perturb, group, smooth",
    "pak-mechanism-1": "PAK Mechanism 1: binary tree with a private threshold",
    "binary-tree": "binary tree with the public bound B",
    "tops": "ToPS: private threshold, pruned tree, smoother",
    "topl": "ToPL: each reading randomised on its own",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ReleaseEntry:
    """One kind of release the report shows, in the reader's terms."""

    stage: str
    """The report section that made it."""
    label: str
    """Its name in that section's tables and charts."""
    record: dict
    """:meth:`mechanisms.PrivacyRecord.to_dict` of one such release."""
    count: int
    """How many such releases the stage made (trials, runs)."""
    value_unit: str
    """Unit of the released values (e.g. "kW")."""
    step: str
    """Length of one step in words (e.g. "half-hour")."""
    subject: str
    """Whose values they are (e.g. "one region's load")."""
    steps_per_day: int | None = None
    """Steps in a day, to say a window of w steps in days."""


def _window(w: int, step: str, steps_per_day: int | None) -> str:
    if steps_per_day and w % steps_per_day == 0:
        days = w // steps_per_day
        return f"within any {'one day' if days == 1 else f'{days} days'} ({w} {step}s)"
    return f"within any {w} consecutive {step}s"


def plain_guarantee(entry: ReleaseEntry) -> str:
    """What the release hides, in the reader's words (from the record's unit, w, α, B)."""
    rec = entry.record
    if rec["unit"] == "(w, alpha)":
        return (
            f"any change of up to {format_number(rec['alpha'])} {entry.value_unit} in each "
            f"{entry.step} of {entry.subject}, {_window(rec['w'], entry.step, entry.steps_per_day)}"
            ", is hidden"
        )
    if rec["unit"] == "w-event":
        return (
            f"any changes of {entry.subject} "
            f"{_window(rec['w'], entry.step, entry.steps_per_day)} are hidden"
        )
    bound = (
        ""
        if rec.get("bound") is None
        else f" (anything from 0 to {format_number(rec['bound'])} {entry.value_unit})"
    )
    if rec["unit"] == "event":
        return f"any single {entry.step} reading of {entry.subject}{bound} is hidden"
    return (
        f"each {entry.step} reading of {entry.subject}{bound} is randomised before it leaves "
        "the meter: not even the collector sees it (local DP)"
    )


def _delta(delta: float) -> str:
    if delta == 0:
        return "0 (pure ε-DP)"
    if delta == 2.0**-20:
        return f"2⁻²⁰ ≈ {format_number(delta)}"
    return format_number(delta)


def _short(label: str) -> str:
    """'Laplace, ε = 1' -> 'Laplace' (ε has its own column)."""
    return label.split(", ε =")[0]


def privacy_section(entries: list[ReleaseEntry]) -> ReportSection:
    """The report's first section: every kind of release, its unit, cost and mechanism.

    Releases of one section with the same guarantee (unit, ε, δ, w, α, B) share a row; the
    full records, with the proofs, are in ``results.json`` and ``privacy_releases.csv``.
    """
    groups: dict[tuple, list[ReleaseEntry]] = {}
    for e in entries:
        rec = e.record
        key = (e.stage, rec["unit"], rec["epsilon"], rec["delta"], rec.get("w"),
               rec.get("alpha"), rec.get("bound"))  # fmt: skip
        groups.setdefault(key, []).append(e)
    rows = []
    for (stage, _unit, eps, delta, w, alpha, _bound), group in groups.items():
        first = group[0]
        rows.append(
            {
                "section": stage,
                "releases": ", ".join(dict.fromkeys(_short(e.label) for e in group)),
                "what is hidden": plain_guarantee(first),
                "ε": eps,
                "δ": _delta(delta),
                "w": "–" if w is None else f"{int(w)} steps",
                "α": "–" if alpha is None else f"{format_number(alpha)} {first.value_unit}",
                "made": sum(e.count for e in group),
            }
        )
    seeded = all(e.record.get("seeded") for e in entries)
    full = pd.DataFrame(
        [
            {"section": e.stage, "release": e.label, "what is hidden": plain_guarantee(e),
             "releases made": e.count, **{k: v for k, v in e.record.items() if k != "parameters"}}
            for e in entries
        ]
    )  # fmt: skip
    return ReportSection(
        key="privacy",
        title="What was released and what it cost",
        paragraphs=(
            "Each row is one kind of release this report makes: what it hides and its privacy "
            "cost. ε (epsilon) is the privacy loss: how much more likely any outcome can become "
            "when the hidden change is made; smaller ε means more privacy and more noise. δ is "
            "the small probability that this ε bound may fail (0 for most mechanisms here). w is "
            "the length of the protected window, α the largest change hidden per step; 'made' "
            "counts the releases (trials, runs) behind the section's numbers. See "
            "docs/privacy.md in the repository for the units and how budgets add up.",
            "Releases of the same data add up their ε (sequential composition); an operator's "
            "ledger refuses a release that would exceed the total budget. "
            + (
                "Every release here is seeded and compared with the true data: this report is an "
                "experiment, not a private release."
                if seeded
                else "Some releases here are not seeded."
            )
            + " Every record, with the theorem that proves it, is in privacy_releases.csv and "
            "results.json.",
        ),
        tables=(
            ReportTable(
                name="privacy_summary",
                caption="Releases, what they hide and their cost (from their privacy records)",
                frame=pd.DataFrame(rows),
            ),
        ),
        csv_only=(ReportTable(name="privacy_releases", caption="", frame=full),),
    )


#: Every symbol and term of the report, where it is defined.
GLOSSARY = {
    "ε (epsilon)": "privacy loss of a release; smaller is more private (docs/privacy.md).",
    "δ (delta)": "probability that the ε bound may fail; 2⁻²⁰ ≈ 1 in a million where used.",
    "w": "length of the protected window in steps (48 half-hours = one day).",
    "α (alpha)": "largest change per step hidden by a (w, α) release, in kW.",
    "B": "public upper bound of a reading (36 kW for the household's power).",
    "n": "number of readings in the event stream.",
    "m (time lag)": "readings held back before the first release, used to choose a "
    "threshold privately (PAK19 §VI-B; docs/choosing-parameters.md).",
    "β (beta)": "the error bound holds with probability at least 1 − β (here 98%).",
    "β_qt/β, β_lt/β, β_lap/β, β_out/β, β_rt/β": "how β is split between the parts of PAK's "
    "error bound: quantile estimate, light-tail bound, Laplace noise, outliers, threshold "
    "multiplier (PAK19 Eq. 16).",
    "IF (improvement factor)": "how many times smaller Mechanism 1's error bound is than the "
    "binary tree's with the bound B (higher is better).",
    "Eq. 16": "PAK19's predicted error bound of Mechanism 1, minimised by the planner.",
    "τ, θ (threshold)": "values above it are clipped before noise is added; chosen privately.",
    "p": "tail probability: the threshold aims at the (1 − p)-quantile of the readings.",
    "λ (lambda)": "the threshold estimates the λp-quantile (PAK19 Eq. 5).",
    "r": "the planned threshold is r times the estimated quantile (PAK19 Eq. 15).",
    "ε₁/ε": "share of ε spent on choosing the threshold.",
    "k": "samples per day (per w steps) that OptStream perturbs; the rest is interpolated.",
    "mean absolute error per step": "average |released − real| over steps and series "
    "(the L1 error of FV19 §6), in kW; shown also as a share of the mean real load.",
    "MAPE": "mean absolute percentage error of a forecast against the real load.",
    "MSE, RMSE": "mean squared error of range sums, and its square root (in kW·min: the "
    "sum of one-minute readings in kW).",
    "consistency gap": "mean |national − sum of the regions| of a release; 0 means the "
    "release adds up.",
    "FV19, PAK19, ToPS21": "the papers followed: Fioretto & Van Hentenryck (OptStream), "
    "Perrier, Asghar & Kaafar (PAK), Wang et al. (ToPS); docs/ lists them.",
}


def ledger_section(ledgers: list, *, where: str) -> ReportSection:
    """The budget of each data set: what its ledger has spent per release and per period, and
    what is left -- the figures of ``dpstream ledger show`` (both read
    :func:`dpstream._dataset.ledger_summary`). ``ledgers``: ledger files; ``where``: where
    they are, in words. Only public facts: budgets, labels, dates of periods."""
    from dpstream._dataset import ledger_summary

    books = [ledger_summary(path) for path in ledgers]
    overview = pd.DataFrame(
        [
            {
                "data set": b["dataset"] or "(no name)",
                "privacy unit": b["unit"],
                "total ε": b["total_epsilon"],
                "total δ": b["total_delta"],
                "left (most spent period)": b["left"],
                "releases charged": len(b["releases"]),
                "periods charged": len(b["periods"]),
                "ledger": b["ledger"],
            }
            for b in books
        ],
        columns=["data set", "privacy unit", "total ε", "total δ", "left (most spent period)",
                 "releases charged", "periods charged", "ledger"],
    )  # fmt: skip
    releases = pd.DataFrame(
        [
            {"data set": b["dataset"] or "(no name)", "charge": e["id"], "made": e["created"],
             "release": e["label"], "ε": e["epsilon"], "δ": e["delta"],
             "period": e["period"] or "every period"}
            for b in books
            for e in b["releases"]
        ],
        columns=["data set", "charge", "made", "release", "ε", "δ", "period"],
    )  # fmt: skip
    periods = pd.DataFrame(
        [
            {"data set": b["dataset"] or "(no name)", "period": p["period"],
             "spent ε": p["epsilon"], "spent δ": p["delta"]}
            for b in books
            for p in b["periods"]
        ],
        columns=["data set", "period", "spent ε", "spent δ"],
    )  # fmt: skip
    caption = "Each data set's budget and what is left"
    tables = [ReportTable(name="ledgers", caption=caption, frame=overview)]
    if len(releases):
        tables.append(
            ReportTable(name="ledger_releases", caption="Per release: every charge", frame=releases)
        )
    if len(periods):
        tables.append(
            ReportTable(
                name="ledger_periods",
                caption="Per period: its own charges plus those tied to no period",
                frame=periods,
            )
        )
    return ReportSection(
        key="ledgers",
        title="The budget of each data set",
        paragraphs=(
            "A data set has one budget: every release of its streams, from any file, store or "
            "program, is charged to its ledger before any noise is drawn, and a release the "
            "ledger cannot pay is refused. A release through a store is charged per period "
            "(every window of w steps within the total); other releases count for every "
            "period. 'Left' is what the most spent period has left: a period not yet released "
            "has the whole total, less the charges tied to no period. These are the figures of "
            "'dpstream ledger show' for the ledgers in "
            f"{where}."
            + ("" if books else " There are none yet."),
        ),
        tables=tuple(tables),
    )


def glossary_section() -> ReportSection:
    """The list of symbols and terms, as the report's last section."""
    items = "".join(
        f"<dt>{html.escape(term)}</dt><dd>{html.escape(text)}</dd>"
        for term, text in GLOSSARY.items()
    )
    return ReportSection(
        key="symbols",
        title="Symbols and terms",
        paragraphs=("Every symbol used above, in the order a reader meets them.",),
        html_tail=f'<dl class="terms">{items}</dl>',
    )
