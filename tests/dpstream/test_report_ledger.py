"""Issue 24: the report shows each data set's ledger with the figures of ``dpstream ledger
show`` -- spent per release and per period, and what is left."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from dpstream import release_laplace
from dpstream._dataset import ledger_path
from dpstream.cli import main
from dpstream.demo._config import DemoConfig
from dpstream.demo._job import run_operator_ledger
from dpstream.demo._report import write_report
from dpstream.demo._summary import ledger_section
from dpstream.store import ReleaseStore

TREE = {"t": ["a", "b"]}


def _frame(days: int) -> pd.DataFrame:
    idx = pd.date_range("2016-01-01", periods=48 * days, freq="30min")
    t = np.arange(idx.size)
    return pd.DataFrame({"a": 300 + 80 * np.sin(2 * np.pi * t / 48), "b": 200.0 + t % 5}, idx)


def test_the_report_shows_the_ledger_show_figures(tmp_path, capsys):
    kw = {"epsilon": 0.5, "alpha": 10.0, "k": 10, "hierarchy": TREE}
    with ReleaseStore(tmp_path / "ops.db", dataset="meters") as store:
        store.release_optstream(_frame(2), **kw)
    section = ledger_section([ledger_path("meters")], where="$DPSTREAM_HOME")
    tables = {t.name: t.frame for t in section.tables}
    assert tables["ledgers"]["data set"].tolist() == ["meters"]
    assert tables["ledgers"]["total ε"].tolist() == ["0.5"]
    assert tables["ledgers"]["left (most spent period)"].tolist() == ["(ε=0, δ=0)"]
    assert tables["ledger_releases"]["ε"].tolist() == ["0.5", "0.5"]
    periods = tables["ledger_periods"]
    assert periods["period"].tolist() == ["2016-01-01 00:00:00", "2016-01-02 00:00:00"]
    capsys.readouterr()
    assert main(["ledger", "show", "--dataset", "meters"]) == 0
    shown = capsys.readouterr().out
    for _, row in periods.iterrows():  # the same figures, line by line
        assert f"    {row['period']}: ε={row['spent ε']}, δ={row['spent δ']}" in shown
    assert "left for the most spent period: (ε=0, δ=0)" in shown
    # in the page, its CSV and results.json
    out = tmp_path / "report"
    index = write_report(
        [section], out, title="t", subtitle="s", key_findings=[], meta={}, numbers={}
    )
    page = index.read_text(encoding="utf-8")
    assert "The budget of each data set" in page and "meters" in page
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert len(results["tables"]["ledger_periods"]) == 2
    assert (out / "ledger_releases.csv").exists()


def test_a_plain_release_counts_for_every_period():
    release_laplace(_frame(1), epsilon=0.25, alpha=10.0, hierarchy=TREE)
    from dpstream._dataset import home

    (path,) = sorted((home() / "ledgers").glob("*.db"))
    section = ledger_section([path], where="$DPSTREAM_HOME")
    tables = {t.name: t.frame for t in section.tables}
    assert tables["ledger_releases"]["period"].tolist() == ["every period"]
    assert "ledger_periods" not in tables
    assert ledger_section([], where="x").paragraphs[0].endswith("There are none yet.")


def test_the_demo_ledger_is_throwaway_and_runs_again(tmp_path):
    config = DemoConfig.create(out=tmp_path, quick=True, seed=3)
    for _ in range(2):  # a second run is not refused: the demo's ledger is made anew
        section = run_operator_ledger(config)
    tables = {t.name: t.frame for t in section.tables}
    assert tables["ledgers"]["periods charged"].tolist() == [3]
    assert len(tables["ledger_releases"]) == 3
    assert Path(tables["ledgers"]["ledger"][0]).parent == tmp_path / "operator"
    from dpstream._dataset import home

    assert not (home() / "ledgers").exists()  # the user's data sets untouched


def test_a_period_spends_its_own_charges_plus_those_tied_to_no_period(tmp_path):
    from dpstream import release_optstream
    from dpstream._dataset import ledger_summary
    from dpstream._ledger import SQLiteLedger
    from mechanisms import Budget, WAlphaIndistinguishability

    unit = WAlphaIndistinguishability(w=48, alpha=10.0)
    gauss = {"alpha": 10.0, "k": "auto", "noise": "gaussian", "hierarchy": TREE}
    with SQLiteLedger(tmp_path / "b.db", total=Budget(1.0, 2**-18), unit=unit) as book:
        release_optstream(_frame(1), epsilon=0.25, delta=2**-20, ledger=book, **gauss)
        with ReleaseStore(tmp_path / "ops.db", ledger=book) as store:
            store.release_optstream(_frame(2), epsilon=0.5, delta=2**-21, **gauss)
        book_id = book.id
    summary = ledger_summary(tmp_path / "b.db")
    assert summary["id"] == book_id[:12]
    assert [p["epsilon"] for p in summary["periods"]] == ["0.75", "0.75"]
    assert [p["delta"] for p in summary["periods"]] == [f"{2**-20 + 2**-21:.12g}"] * 2
    assert [e["period"] for e in summary["releases"]][0] is None


def test_the_summary_never_writes_to_the_ledger(tmp_path):
    import sqlite3

    from dpstream._dataset import ledger_summary
    from dpstream._ledger import SQLiteLedger
    from mechanisms import Budget

    SQLiteLedger(tmp_path / "old.db", total=Budget(1.0)).close()
    with sqlite3.connect(tmp_path / "old.db") as con:  # a ledger from before ids
        con.execute("DELETE FROM meta WHERE key = 'id'")
    con.close()
    assert ledger_summary(tmp_path / "old.db")["id"] == "?"
    with sqlite3.connect(tmp_path / "old.db") as con:  # read-only: no id was added
        assert con.execute("SELECT 1 FROM meta WHERE key = 'id'").fetchone() is None
    con.close()
