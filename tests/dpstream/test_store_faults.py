"""Fault injection: stores and ledgers under what operators do to files (issue 31 §1-8, issue 24).

Each test is one of issue 31's eight findings, tried as an operator would, and fails on the code
before the issue: an emptied store or ledger, a copy without its WAL, ``--out`` naming the input,
a full disk (``PRAGMA max_page_count`` in-process; ``RLIMIT_FSIZE`` in a subprocess), a
read-only store (``mode=ro``: ``chmod`` does not stop root), decimal budgets, one hierarchy
rule. Then issue 24: a data set's ledger shared by every file and store, δ per period.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstream._dataset import ledger_path
from dpstream._files import DiskFullError, ReadOnlyError
from dpstream._ledger import (
    AlreadyReleasedError,
    SQLiteLedger,
    StaleStoreError,
    calibrated,
    charged_decimal,
)
from dpstream.cli import main
from dpstream.store import ReleaseStore
from mechanisms import Budget, BudgetExceededError, ParameterError

TREE = {"t": ["a", "b"]}
KW = {"epsilon": 1.0, "alpha": 10.0, "k": 10, "hierarchy": TREE}


def _frame(days: int, start: str = "2016-01-01") -> pd.DataFrame:
    idx = pd.date_range(start, periods=48 * days, freq="30min")
    t = np.arange(idx.size)
    return pd.DataFrame({"a": 300 + 80 * np.sin(2 * np.pi * t / 48), "b": 200.0 + t % 5}, idx)


def _csv(path: Path, frame: pd.DataFrame) -> Path:
    frame.rename_axis("time").to_csv(path)
    return path


def _store_args(inp: Path, store: Path, out: Path, *extra: str) -> list[str]:
    return [
        "release", "optstream", str(inp), "--epsilon", "1", "--alpha", "10", "--k", "10",
        "--hierarchy", str(inp.parent / "tree.json"), "--store", str(store), "--out", str(out),
        *extra,
    ]  # fmt: skip


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _csv(tmp_path / "in.csv", _frame(3))
    (tmp_path / "tree.json").write_text(json.dumps(TREE))
    return tmp_path


# -- 1. a 0-byte store is not a new store ----------------------------------------------------


def test_an_emptied_store_is_refused_not_initialised(files, capsys):
    store = files / "ops.db"
    assert main(_store_args(files / "in.csv", store, files / "a.csv")) == 0
    store.write_bytes(b"")  # ": > ops.db"
    for side in ("-wal", "-shm"):
        Path(f"{store}{side}").unlink(missing_ok=True)
    capsys.readouterr()
    assert main(_store_args(files / "in.csv", store, files / "b.csv")) == 2
    err = capsys.readouterr().err
    assert "not a dpstream store" in err and "empty" in err and "release every period" in err
    assert store.stat().st_size == 0 and not (files / "b.csv").exists()
    with pytest.raises(ParameterError, match="empty"):
        ReleaseStore(store)
    tableless = files / "other.db"
    sqlite3.connect(tableless).execute("PRAGMA user_version = 7").connection.close()
    with pytest.raises(ParameterError, match="no store tables"):
        ReleaseStore(tableless)
    # the explicit way: dpstream store init (on a new or an empty file), never over a store
    assert main(["store", "init", str(store)]) == 0
    assert main(["store", "init", str(store)]) == 2


# -- 2. a 0-byte ledger is not a fresh budget ----------------------------------------------


def test_an_emptied_ledger_is_refused_even_with_a_budget(files, capsys):
    args = ["release", "laplace", "in.csv", "--alpha", "10", "--hierarchy", "tree.json"]
    book = ["--ledger", "budget.db"]
    assert main([*args, "--epsilon", "0.5", *book, "--budget-epsilon", "1", "--out", "a.csv"]) == 0
    Path("budget.db").write_bytes(b"")
    capsys.readouterr()
    code = main([*args, "--epsilon", "0.75", *book, "--budget-epsilon", "1", "--out", "b.csv"])
    assert code == 2
    err = capsys.readouterr().err
    assert "not a dpstream ledger" in err and "empty" in err and "released again" in err
    assert not Path("b.csv").exists() and Path("budget.db").stat().st_size == 0
    with pytest.raises(ParameterError, match="empty"):
        SQLiteLedger("budget.db", total=Budget(1.0))
    made = SQLiteLedger.init("budget.db", total=Budget(1.0))  # explicit: dpstream ledger init
    assert made.id and made.remaining_epsilon == 1.0
    made.close()


# -- 3. a store copied after a crash, or without its side files, keeps its periods --------


def test_a_copy_of_the_main_file_alone_returns_every_period_as_stored(tmp_path):
    frame = _frame(3)
    src = tmp_path / "ops.db"
    store = ReleaseStore(src)  # left open: nothing closed, as after a killed job
    first = store.release_optstream(frame, **KW)
    assert Path(f"{src}-wal").exists()
    shutil.copy(src, tmp_path / "copy.db")  # "cp ops.db backup/": the main file alone
    store._con.close()  # (no close(): no final checkpoint)
    with ReleaseStore(tmp_path / "copy.db") as copy:
        assert copy.ordinals() == {0, 1, 2}
        charges = len(copy.ledger.charges)
        again = copy.release_optstream(frame, **KW)
        assert len(copy.ledger.charges) == charges  # nothing drawn or charged again
    pd.testing.assert_frame_equal(again, first)
    # after a clean close the side files may be deleted
    copy = tmp_path / "copy.db"
    for side in ("-wal", "-shm", ".lock", ".lock-journal"):
        Path(f"{copy}{side}").unlink(missing_ok=True)
    with ReleaseStore(copy) as reopened:
        pd.testing.assert_frame_equal(reopened.release_optstream(frame, **KW), first)
    # the copy released since: the original is now an older copy of the store, and refused
    with ReleaseStore(src) as original, pytest.raises(StaleStoreError, match="older copy"):
        original.release_optstream(_frame(4), **KW)


def test_a_copy_taken_inside_a_commit_window_is_refused(tmp_path):
    src = tmp_path / "ops.db"
    with ReleaseStore(src) as store:
        store.release_optstream(_frame(1), **KW)
        store._mark_running(True)  # a job killed between the mark and the period's commit
        shutil.copy(src, tmp_path / "copy.db")
        store._con.execute("DELETE FROM meta WHERE key = 'running'")
    with pytest.raises(ParameterError, match="copied .* while a job"):
        ReleaseStore(tmp_path / "copy.db")
    with ReleaseStore(tmp_path / "copy.db", readonly=True) as ro:  # still readable
        assert ro.ordinals() == {0}
        ro.backup(tmp_path / "backup.db")  # a consistent copy, without the mark
    with ReleaseStore(tmp_path / "backup.db") as restored:
        assert restored.ordinals() == {0} and restored.id == ro.id


# -- 4. the input is sacred ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["plain", "store"])
def test_out_store_or_ledger_naming_the_input_is_refused(files, capsys, mode):
    inp = files / "in.csv"
    before = inp.read_bytes()
    os.link(inp, files / "hard.csv")
    (files / "soft.csv").symlink_to(inp)
    base = ["release", "optstream", "in.csv", "--epsilon", "1", "--alpha", "10", "--k", "10"]
    if mode == "store":
        base += ["--store", "ops.db"]
    for out in ("in.csv", "hard.csv", "soft.csv"):
        assert main([*base, "--out", out]) == 2
        assert "'--out' option" in capsys.readouterr().err
    assert main([*base[:9], "--store", "in.csv", "--out", "x.csv"]) == 2
    assert "'--store' option" in capsys.readouterr().err
    assert main([*base[:9], "--ledger", "soft.csv", "--out", "x.csv"]) == 2
    assert "'--ledger' option" in capsys.readouterr().err
    # a long input named like the wide twin of --out: X.wide.csv for --out X.csv
    long = (
        _frame(1).rename_axis("ds").reset_index().melt("ds", var_name="unique_id", value_name="y")
    )
    long.to_csv(files / "rel.wide.csv", index=False)
    twin = (files / "rel.wide.csv").read_bytes()
    args = ["release", "optstream", "rel.wide.csv", "--epsilon", "1", "--alpha", "10", "--k", "10"]
    assert main([*args, "--store", "s2.db", "--out", "rel.csv"]) == 2
    assert (files / "rel.wide.csv").read_bytes() == twin
    assert inp.read_bytes() == before and not (files / "x.csv").exists()
    assert not (files / "ops.db").exists()


# -- 5. a full disk is a full disk (and leaves no phantom job) -----------------------------


def test_a_full_store_is_told_and_the_next_run_resumes(tmp_path):
    frame = _frame(4)
    path = tmp_path / "ops.db"
    with ReleaseStore(path) as store:
        store.release_optstream(frame.iloc[:48], **KW)
        pages = store._con.execute("PRAGMA page_count").fetchone()[0]
        store._con.execute(f"PRAGMA max_page_count = {pages + 1}")  # the disk fills up
        with pytest.raises(DiskFullError, match="full") as err:
            store.release_optstream(frame, **KW)
        assert "busy" not in str(err.value)
        stored = store.ordinals()
    assert 0 in stored and len(stored) < 4
    with ReleaseStore(path) as store:  # space freed: the same command completes, no "busy"
        out = store.release_optstream(frame, **KW)
        assert store.ordinals() == {0, 1, 2, 3}
        assert sorted(c.label.split(":")[0] for c in store.ledger.charges) == [
            f"period {i}" for i in range(4)
        ]  # one charge per period, none doubled
    assert out.shape == (4 * 48, 3)


_FSIZE = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
from dpstream.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_a_full_disk_in_the_cli_is_one_line_and_no_output_without_its_record(files):
    _csv(files / "month.csv", _frame(12))
    args = _store_args(files / "month.csv", files / "ops.db", files / "out.csv")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-c", _FSIZE, str(24 * 1024), *args],
        capture_output=True, text=True, env=env, cwd=files, timeout=300,
    )  # fmt: skip
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, run.stderr
    assert "full" in lines[-1] and "busy" not in run.stderr and "bug" not in run.stderr
    assert "Traceback" not in run.stderr
    assert not (files / "out.csv").exists() and not (files / "out.csv.privacy.json").exists()
    assert main(args) == 0  # space freed: the same command resumes (no phantom job)
    record = json.loads((files / "out.csv.privacy.json").read_text())
    assert record["epsilon"] == 1.0 and (files / "out.csv").exists()


# -- 6. a read-only store can be read ---------------------------------------------------------


def test_a_read_only_store_returns_its_periods_and_refuses_new_ones(tmp_path, capsys):
    path = tmp_path / "ops.db"
    frame = _frame(3)
    with ReleaseStore(path) as store:
        first = store.release_optstream(frame.iloc[: 2 * 48], **KW)
    with ReleaseStore(path, readonly=True) as ro:  # mode=ro: what a read-only mount gives
        again = ro.release_optstream(frame.iloc[: 2 * 48], **KW)
        pd.testing.assert_frame_equal(again, first)
        with pytest.raises(ReadOnlyError, match="cannot be written"):
            ro.release_optstream(frame, **KW)
        assert ro.ordinals() == {0, 1}
    assert main(["store", "show", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "periods:" in shown and "configuration:" in shown
    # bad stores: one line each, status 2, nothing created
    (tmp_path / "junk.db").write_bytes(b"not a database at all" * 100)
    from dpstream.store.__main__ import main as store_main

    capsys.readouterr()
    for name in ("junk.db", "missing.db"):  # python -m dpstream.store: no traceback
        assert store_main([str(tmp_path / name)]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "missing.db").exists()


# -- 7. decimal budgets -----------------------------------------------------------------


def test_three_decimal_tenths_fit_three_tenths(files, capsys):
    args = ["release", "laplace", "in.csv", "--alpha", "10", "--epsilon", "0.1"]
    book = ["--ledger", "b.db"]
    assert main([*args, *book, "--budget-epsilon", "0.3", "--out", "1.csv"]) == 0
    assert main([*args, *book, "--out", "2.csv"]) == 0
    assert main([*args, *book, "--out", "3.csv"]) == 0  # refused before: 0.1+0.1+0.1 > 0.3
    capsys.readouterr()
    assert main([*args, *book, "--out", "4.csv"]) == 2
    assert "(ε=0, δ=0) left" in capsys.readouterr().err
    for i in (1, 2, 3):  # the noise is calibrated to a float at most the decimal charged
        eps = json.loads(Path(f"{i}.csv.privacy.json").read_text())["epsilon"]
        assert Fraction(eps) <= Fraction("0.1") and charged_decimal(eps) == Fraction("0.1")


def test_the_ledger_accounts_exactly(tmp_path):
    with SQLiteLedger(tmp_path / "a.db", total=Budget(0.3)) as ledger:
        for _ in range(3):
            ledger.charge(Budget(calibrated(0.1)), "a tenth")
        with pytest.raises(BudgetExceededError):
            ledger.charge(Budget(calibrated(1e-9)), "more")
    with SQLiteLedger(tmp_path / "b.db", total=Budget(0.3)) as doubles:
        doubles.charge(Budget(0.1), "the double 0.1")
        doubles.charge(Budget(0.1), "the double 0.1")
        with pytest.raises(BudgetExceededError):  # three doubles 0.1 spend more than 3/10
            doubles.charge(Budget(0.1), "the double 0.1")


# -- 8. one hierarchy rule ------------------------------------------------------------------


@pytest.mark.parametrize("tree", [{"t": ["a", "b", "a"]}, {"t": ["a", "b"], "empty": []}])
def test_store_mode_refuses_what_plain_mode_refuses(files, capsys, tree):
    (files / "bad.json").write_text(json.dumps(tree))
    base = ["release", "optstream", "in.csv", "--epsilon", "1", "--alpha", "10", "--k", "10"]
    base += ["--hierarchy", "bad.json", "--seed", "1"]
    assert main([*base, "--out", "p.csv"]) == 2
    plain = capsys.readouterr().err
    assert main([*base, "--store", "s.db", "--out", "s.csv"]) == 2
    store = capsys.readouterr().err
    assert "not a tree" in plain and "not a tree" in store
    assert not (files / "s.db").exists() and not (files / "s.csv").exists()


# -- issue 24: a data set has one budget ----------------------------------------------------


def test_a_new_store_of_the_same_data_set_cannot_release_its_days_again(tmp_path):
    frame = _frame(3)
    with ReleaseStore(tmp_path / "ops.db", dataset="meters") as store:
        store.release_optstream(frame.iloc[:96], **KW)
        assert store.ledger.dataset_ledger.dataset == "meters"
    for name in ("ops.db", "ops.db-wal", "ops.db-shm"):
        (tmp_path / name).unlink(missing_ok=True)  # the store is lost
    with ReleaseStore(tmp_path / "ops.db") as fresh:  # recognised by its streams
        with pytest.raises(AlreadyReleasedError, match="released already"):
            fresh.release_optstream(frame, **KW)
        assert fresh.ordinals() == set()
    with ReleaseStore(tmp_path / "later.db") as later:  # the days not yet released are fine
        later.release_optstream(frame.iloc[96:], **KW)
        assert later.ordinals() == {0}
    with SQLiteLedger(ledger_path("meters")) as book:
        assert len(book.entries()) == 3 and {e["store"] for e in book.entries()} != {None}


def test_a_second_file_for_a_known_data_set_is_refused_before_any_work(files, capsys):
    args = ["release", "laplace", "in.csv", "--alpha", "10", "--hierarchy", "tree.json"]
    assert main([*args, "--epsilon", "0.5", "--dataset", "meters", "--out", "a.csv"]) == 0
    capsys.readouterr()
    other = ["--ledger", "other.db", "--budget-epsilon", "5"]
    assert main([*args, "--epsilon", "0.5", *other, "--out", "b.csv"]) == 2
    err = capsys.readouterr().err
    assert "already the data set 'meters'" in err and "--new-dataset" in err
    assert not Path("other.db").exists() and not Path("b.csv").exists()
    # without a name, the known data set's ledger is charged (its total: the first release's)
    assert main([*args, "--epsilon", "0.5", "--out", "c.csv"]) == 2
    assert "of the data set 'meters' has (ε=0, δ=0) left" in capsys.readouterr().err
    assert main([*args, "--epsilon", "0.5", *other, "--new-dataset", "--out", "d.csv"]) == 0
    # --ledger with --store: the store charges it
    store = _store_args(files / "in.csv", files / "ops.db", files / "s.csv")
    assert main([*store, "--ledger", "shared.db", "--budget-epsilon", "1", "--new-dataset"]) == 0
    with SQLiteLedger("shared.db") as book:
        assert sorted(e["period"] for e in book.entries()) == sorted(
            int(t.value) for t in pd.date_range("2016-01-01", periods=3, freq="D")
        )
    capsys.readouterr()
    assert main(["ledger", "show", "--dataset", "meters"]) == 0
    shown = capsys.readouterr().out
    assert "Per release:" in shown and "release_laplace" in shown and "ε=0.5" in shown
    assert main(["ledger", "show"]) == 0
    assert "Data set meters" in capsys.readouterr().out


def test_delta_is_accounted_per_period_in_the_store(tmp_path):
    frame = _frame(3)
    kw = {"epsilon": 1.0, "alpha": 10.0, "k": "auto", "noise": "gaussian", "delta": 1e-5}
    with ReleaseStore(tmp_path / "g.db") as store:  # refused from day 2 before issue 24 §3
        store.release_optstream(frame, hierarchy=TREE, **kw)
        assert store.ordinals() == {0, 1, 2}
        assert store.ledger.spent_delta(1) <= 1e-5 and store.ledger.spent_delta() <= 1e-5


@pytest.mark.slow
def test_thirty_gaussian_days_against_a_total_epsilon_delta(tmp_path):
    kw = {"epsilon": 1.0, "alpha": 10.0, "k": "auto", "noise": "gaussian", "delta": 1e-5}
    with ReleaseStore(tmp_path / "g.db") as store:
        store.release_optstream(_frame(30), hierarchy=TREE, **kw)
        assert len(store.ordinals()) == 30
        assert store.ledger.remaining_delta >= 0


def test_a_ledger_made_by_init_learns_its_data_set_on_first_use(files, capsys):
    assert main(["ledger", "init", "--dataset", "meters", "--budget-epsilon", "1"]) == 0
    args = ["release", "laplace", "in.csv", "--alpha", "10", "--hierarchy", "tree.json"]
    assert main([*args, "--epsilon", "0.5", "--dataset", "meters", "--out", "a.csv"]) == 0
    with SQLiteLedger(ledger_path("meters")) as book:
        assert book.dataset == "meters" and book.fingerprint
    capsys.readouterr()
    other = ["--ledger", "other.db", "--budget-epsilon", "1"]
    assert main([*args, "--epsilon", "0.5", *other, "--out", "b.csv"]) == 2
    assert "already the data set 'meters'" in capsys.readouterr().err
    assert main([*args, "--epsilon", "0.5", "--out", "c.csv"]) == 0  # recognised: charged
    assert main([*args, "--epsilon", "0.5", "--out", "d.csv"]) == 2  # 1 of 1 spent
    assert "2016-01-01" not in capsys.readouterr().err  # no data-dependent text


def test_two_jobs_opened_together_release_in_turn_not_as_copies(tmp_path):
    frame = _frame(2)
    first, second = ReleaseStore(tmp_path / "ops.db"), ReleaseStore(tmp_path / "ops.db")
    try:  # both opened before either released: one history, advanced by each in turn
        a = first.release_optstream(frame.iloc[:48], **KW)
        b = second.release_optstream(frame, **KW)
        pd.testing.assert_frame_equal(b.iloc[:48], a)
    finally:
        first.close()
        second.close()


def test_full_read_only_corrupt_and_busy_are_four_different_one_line_errors(tmp_path):
    from dpstream._files import CorruptFileError, FileBusyError, classify_sqlite

    db = tmp_path / "x.db"
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("CREATE TABLE t (v BLOB)")
    raised = {}
    con.execute(f"PRAGMA max_page_count = {con.execute('PRAGMA page_count').fetchone()[0]}")
    try:
        con.execute("INSERT INTO t VALUES (zeroblob(100000))")
    except sqlite3.Error as exc:
        raised["full"] = classify_sqlite(exc, "The store 'x.db'")
    ro = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    try:
        ro.execute("INSERT INTO t VALUES (1)")
    except sqlite3.Error as exc:
        raised["read-only"] = classify_sqlite(exc, "The store 'x.db'")
    (tmp_path / "junk.db").write_bytes(b"junk" * 1000)
    try:
        sqlite3.connect(tmp_path / "junk.db").execute("SELECT * FROM sqlite_master")
    except sqlite3.Error as exc:
        raised["corrupt"] = classify_sqlite(exc, "The store 'junk.db'")
    con.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
    except sqlite3.Error as exc:
        raised["busy"] = classify_sqlite(exc, "The store 'x.db'")
    con.execute("ROLLBACK")
    kinds = {k: type(v) for k, v in raised.items()}
    assert kinds == {
        "full": DiskFullError,
        "read-only": ReadOnlyError,
        "corrupt": CorruptFileError,
        "busy": FileBusyError,
    }
    texts = [str(v) for v in raised.values()]
    assert len(set(texts)) == 4 and all("\n" not in t for t in texts)
    assert "full" in str(raised["full"]) and "busy" not in str(raised["full"])


def test_forecast_outputs_naming_an_input_are_refused(files, capsys):
    before = (files / "in.csv").read_bytes()
    (files / "link.csv").symlink_to(files / "in.csv")
    assert main(["forecast", "in.csv", "--out", "link.csv"]) == 2
    assert "'--out' option" in capsys.readouterr().err
    args = ["forecast", "in.csv", "--truth", "in.csv", "--days", "1", "--out", "f.csv"]
    assert main([*args, "--errors-out", "in.csv"]) == 2
    assert "'--errors-out' option" in capsys.readouterr().err
    assert (files / "in.csv").read_bytes() == before and not (files / "f.csv").exists()
