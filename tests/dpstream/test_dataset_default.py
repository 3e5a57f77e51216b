"""Issue 24: every release path charges the data set's ledger by default.

The Python functions and the plain CLI charge the ledger their streams are known by (the
fingerprint of stream ids and hierarchy, :mod:`dpstream._dataset`); streams never seen are
registered with a ledger of their own; ``ledger=False`` / ``--no-ledger`` opt out loudly; and a
new store refused because another store released its days writes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstream import release_laplace, release_optstream, release_pak
from dpstream._dataset import (
    DataSetError,
    covering_total,
    fingerprint,
    home,
    known_ledgers,
    ledger_path,
)
from dpstream._ledger import AlreadyReleasedError, SQLiteLedger, calibrated, total_decimal
from dpstream.cli import main
from dpstream.store import ReleaseStore
from mechanisms import Budget, BudgetExceededError, BudgetLedger, WAlphaIndistinguishability

TREE = {"t": ["a", "b"]}
KW = {"epsilon": 0.5, "alpha": 10.0, "hierarchy": TREE}


def _frame(days: int, start: str = "2016-01-01") -> pd.DataFrame:
    idx = pd.date_range(start, periods=48 * days, freq="30min")
    t = np.arange(idx.size)
    return pd.DataFrame({"a": 300 + 80 * np.sin(2 * np.pi * t / 48), "b": 200.0 + t % 5}, idx)


def _auto_ledger(frame: pd.DataFrame, tree=TREE) -> Path:
    (entry,) = known_ledgers(fingerprint(frame.columns, tree))
    return Path(entry["ledger"])


# -- Python functions ---------------------------------------------------------------------


def test_an_unnamed_release_registers_its_streams_and_the_next_is_charged_there():
    frame = _frame(2)
    out = release_laplace(frame, **KW)
    paid = out.attrs["privacy"]["ledger"]
    assert paid["accounted"] is True and paid["dataset"].startswith("auto-")
    path = _auto_ledger(frame)
    assert path == ledger_path(paid["dataset"]) and str(path) == paid["ledger"]
    assert path.parent.parent == home()
    with SQLiteLedger(path) as book:  # total: the first release's budget, charged in full
        assert book.fingerprint == fingerprint(["a", "b"], TREE) and paid["id"] == book.id[:12]
        assert [e["label"] for e in book.entries()] == ["release_laplace"]
        assert total_decimal(book.total.epsilon) >= 0.5 and book.remaining_epsilon <= 0
    # the same streams again (another function, another file's frame): the same ledger,
    # which is spent, so the release is refused before any draw
    with pytest.raises(BudgetExceededError):
        release_optstream(_frame(2, "2017-01-01"), k=10, **KW)
    with SQLiteLedger(path) as book:
        assert len(book.entries()) == 1


def test_a_python_double_fits_the_ledger_it_creates():
    """0.1 as a double is a hair above 1/10: the new ledger's total covers it exactly."""
    frame = _frame(1)
    release_laplace(frame, epsilon=0.1, alpha=10.0, hierarchy=TREE)
    with SQLiteLedger(_auto_ledger(frame)) as book:
        assert len(book.entries()) == 1
    assert covering_total(Budget(calibrated(0.1))).epsilon == 0.1  # the CLI's decimal
    assert covering_total(Budget(0.1)).epsilon == np.nextafter(0.1, 1)
    assert covering_total(Budget(0.5, 2**-17)) == Budget(0.5, 2**-17)  # exact decimals
    assert covering_total(Budget(0.5, 1e-5)).delta == np.nextafter(1e-5, 1)


def test_ledger_false_opts_out_loudly_and_charges_nothing():
    frame = _frame(1)
    for _ in range(2):
        out = release_laplace(frame, ledger=False, **KW)
        assert out.attrs["privacy"]["ledger"]["accounted"] is False
        assert "ledger=False" in out.attrs["privacy"]["ledger"]["why"]
    assert known_ledgers(fingerprint(frame.columns, TREE)) == []
    assert not (home() / "ledgers").exists()


def test_a_seeded_experiment_is_not_charged_to_the_data_set():
    frame = _frame(1)
    out = release_laplace(frame, seed=1, **KW)
    assert "ledger" not in out.attrs["privacy"] and out.attrs["privacy"]["seeded"] is True
    assert known_ledgers(fingerprint(frame.columns, TREE)) == []


def test_an_in_memory_ledger_is_charged_as_well_as_the_data_sets():
    frame = _frame(1)
    session = BudgetLedger(Budget(2.0))
    release_laplace(frame, ledger=session, **KW)
    assert session.remaining_epsilon == 1.5
    with SQLiteLedger(_auto_ledger(frame)) as book:
        assert len(book.entries()) == 1
    # the data set's ledger is spent: refused, and the session's ledger is not charged either
    with pytest.raises(BudgetExceededError):
        release_laplace(frame, ledger=session, **KW)
    assert session.remaining_epsilon == 1.5


def test_a_ledger_of_other_streams_or_a_second_ledger_is_refused(tmp_path):
    frame = _frame(1)
    unit = WAlphaIndistinguishability(w=48, alpha=10.0)
    other = SQLiteLedger(
        tmp_path / "x.db", total=Budget(5.0), unit=unit, fingerprint=fingerprint(["z"], None)
    )
    with other, pytest.raises(DataSetError, match="other streams"):
        release_laplace(frame, ledger=other, **KW)
    release_laplace(frame, **KW)  # the streams are now a known data set
    with SQLiteLedger(tmp_path / "y.db", total=Budget(5.0), unit=unit) as fresh:
        with pytest.raises(DataSetError, match="already the data set"):
            release_laplace(frame, ledger=fresh, **KW)
        assert fresh.entries() == [] and fresh.fingerprint is None
    # the data set's own ledger, passed explicitly, is fine (and spent here)
    with SQLiteLedger(_auto_ledger(frame)) as own, pytest.raises(BudgetExceededError):
        release_laplace(frame, ledger=own, **KW)


def test_a_bad_input_creates_no_ledger():
    frame = _frame(1)
    frame.iloc[3, 0] = np.nan
    with pytest.raises(ValueError):
        release_laplace(frame, **KW)
    assert not (home() / "ledgers").exists() and not (home() / "datasets").exists()


def test_release_pak_charges_a_named_series_and_refuses_an_anonymous_array():
    rng = np.random.default_rng(0)
    x = rng.exponential(1.0, 2048).clip(0, 36)
    kw = {"bound": 36.0, "epsilon": 1.0, "delta": 2**-20, "time_lag": 512}
    with pytest.raises(DataSetError, match="no stream ids"):
        release_pak(x, **kw)
    assert not (home() / "ledgers").exists()  # refused before anything
    rel = release_pak(pd.Series(x, name="meter"), **kw)
    (entry,) = known_ledgers(fingerprint(["meter"], None))
    with SQLiteLedger(entry["ledger"]) as book:
        assert [e["label"] for e in book.entries()] == ["pak_release"]
        assert book.total == covering_total(Budget(1.0, 2**-20))
    # the release says which data set's ledger paid, as the other releases' records do
    assert rel.ledger["accounted"] is True and rel.ledger["dataset"] == entry["dataset"]
    assert Path(rel.ledger["ledger"]).resolve() == Path(entry["ledger"]).resolve()
    with pytest.raises(TypeError):
        rel.ledger["dataset"] = "other"  # read-only, as the release is
    with pytest.raises(BudgetExceededError):
        release_pak(pd.Series(x, name="meter"), **kw)
    assert release_pak(x, ledger=False, **kw).ledger["accounted"] is False  # said so
    assert release_pak(x, seed=1, **kw).ledger is None  # seeded: no data set charged


def test_a_ledger_given_in_python_adopts_the_streams_and_is_found_by_default(tmp_path):
    frame = _frame(1)
    unit = WAlphaIndistinguishability(w=48, alpha=10.0)
    with SQLiteLedger(tmp_path / "mine.db", total=Budget(2.0), unit=unit) as mine:
        release_laplace(frame, ledger=mine, **KW)
        assert mine.fingerprint == fingerprint(["a", "b"], TREE)
    release_laplace(frame, **KW)  # recognised: charged to mine.db, no ledger of its own
    with SQLiteLedger(tmp_path / "mine.db") as mine:
        assert len(mine.entries()) == 2
    assert not (home() / "ledgers").exists()


def test_an_anonymous_array_is_charged_to_the_ledger_it_is_given(tmp_path):
    from mechanisms import EventLevel

    x = np.random.default_rng(1).exponential(1.0, 2048).clip(0, 36)
    kw = {"bound": 36.0, "epsilon": 1.0, "delta": 2**-20, "time_lag": 512}
    total = Budget(2.0, 2**-19)
    with SQLiteLedger(tmp_path / "p.db", total=total, unit=EventLevel()) as book:
        release_pak(x, ledger=book, **kw)
        assert len(book.entries()) == 1 and book.fingerprint is None  # no ids to adopt


# -- CLI: two files of one data set -------------------------------------------------------


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _frame(3).rename_axis("time").to_csv("jan.csv")
    _frame(3).rename_axis("time").to_csv("jan_again.csv")  # another file, the same data
    Path("tree.json").write_text(json.dumps(TREE))
    return tmp_path


_PLAIN = ["--epsilon", "0.5", "--alpha", "10", "--k", "10", "--hierarchy", "tree.json"]


def test_cli_two_files_of_one_data_set_second_refused_before_any_work(files, capsys):
    assert main(["release", "optstream", "jan.csv", *_PLAIN, "--out", "a.csv"]) == 0
    assert "ledger" in capsys.readouterr().out
    record = json.loads(Path("a.csv.privacy.json").read_text())
    assert record["ledger"]["accounted"] is True
    book_path = Path(record["ledger"]["ledger"])
    # the second file: the data set's ledger is charged by default, and it is spent
    assert main(["release", "optstream", "jan_again.csv", *_PLAIN, "--out", "b.csv"]) == 2
    err = capsys.readouterr().err
    assert "left" in err and "Nothing was released" in err
    # a new ledger file for the same streams: refused, nothing created
    new = ["--ledger", "new.db", "--budget-epsilon", "5"]
    assert main(["release", "optstream", "jan_again.csv", *_PLAIN, *new, "--out", "c.csv"]) == 2
    assert "--new-dataset" in capsys.readouterr().err
    assert not any(Path(n).exists() for n in ("b.csv", "c.csv", "new.db"))
    with SQLiteLedger(book_path) as book:
        assert len(book.entries()) == 1


def test_cli_two_files_with_stores_second_refused_and_its_store_left_empty(files, capsys):
    store = ["release", "optstream", "--store"]
    assert main([*store[:2], "jan.csv", *_PLAIN, "--store", "a.db", "--out", "a.csv"]) == 0
    capsys.readouterr()
    # another file, another (new) store: its days were released by the first store
    argv = [*store[:2], "jan_again.csv", *_PLAIN, "--store", "b.db", "--out", "b.csv"]
    assert main(argv) == 2
    assert "released already" in capsys.readouterr().err
    assert not Path("b.csv").exists()
    with ReleaseStore("b.db") as b:  # nothing fixed: no configuration, no periods
        assert b.config is None and b.ordinals() == set()
    # so the refused store is still free for other data (another data set, other settings)
    assert main([*argv, "--new-dataset", "--dataset", "copy", "--epsilon", "0.25"]) == 0


def test_cli_no_ledger_is_loud_and_alone(files, capsys):
    argv = ["release", "laplace", "jan.csv", *_PLAIN, "--out", "a.csv", "--no-ledger"]
    for _ in range(2):
        assert main(argv) == 0
        assert "NO ledger" in capsys.readouterr().err
    record = json.loads(Path("a.csv.privacy.json").read_text())
    assert record["ledger"]["accounted"] is False
    assert not (home() / "ledgers").exists()
    assert main([*argv, "--dataset", "meters"]) == 2
    assert "--no-ledger" in capsys.readouterr().err
    assert main([*argv, "--store", "s.db"]) == 2
    assert not Path("s.db").exists()


def test_cli_single_stream_charges_its_data_set(files, capsys):
    pd.DataFrame({"power": np.linspace(0, 9, 600)}).to_csv("one.csv", index=False)
    pak = ["release", "pak", "one.csv", "--epsilon", "0.5", "--bound", "10", "--time-lag", "300"]
    assert main([*pak, "--out", "p.csv", "--no-ledger"]) == 0  # an experiment: no ledger
    assert json.loads(Path("p.csv.privacy.json").read_text())["ledger"]["accounted"] is False
    assert known_ledgers(fingerprint(["power"], None)) == []
    pd.DataFrame({"heat": np.linspace(0, 9, 600)}).to_csv("two.csv", index=False)
    assert main([*pak[:2], "two.csv", *pak[3:], "--out", "p2.csv"]) == 0  # charged
    (paid,) = known_ledgers(fingerprint(["heat"], None))
    recorded = json.loads(Path("p2.csv.privacy.json").read_text())["ledger"]
    assert recorded["accounted"] is True and recorded["dataset"] == paid["dataset"]
    argv = ["release", "bt", "one.csv", "--epsilon", "0.5", "--bound", "10", "--out", "bt.csv"]
    assert main(argv) == 0
    (entry,) = known_ledgers(fingerprint(["power"], None))
    assert main([*argv[:-1], "bt2.csv", "--epsilon", "0.6"]) == 2  # 0.5 of 0.5 spent
    assert "left" in capsys.readouterr().err and not Path("bt2.csv").exists()
    with SQLiteLedger(entry["ledger"]) as book:
        assert len(book.entries()) == 1


# -- a new store refused because another store released its periods -------------------------


def test_a_refused_new_store_keeps_no_configuration(tmp_path):
    frame = _frame(2)
    with ReleaseStore(tmp_path / "a.db", dataset="meters") as a:
        a.release_optstream(frame, k=10, **KW)
    with ReleaseStore(tmp_path / "b.db") as b:
        with pytest.raises(AlreadyReleasedError):
            b.release_optstream(frame, k=10, **KW)
        # the same object, other settings for other days: not "differs from the store"
        b.release_optstream(_frame(1, "2016-02-01"), k=12, **KW)
        assert b.config["k"] == 12
    with ReleaseStore(tmp_path / "c.db") as c:
        with pytest.raises(AlreadyReleasedError):
            c.release_optstream(frame, k=10, **KW)
    with ReleaseStore(tmp_path / "c.db") as c:
        assert c.config is None and c.ordinals() == set()
        assert "ledger_id" not in c.meta and not c.meta.get("dataset")


def test_a_refused_new_store_forgets_its_data_set_for_other_streams(tmp_path):
    """The refused first release bound the store to 'meters' in memory only: the next
    release, of other streams, must not charge (nor be refused by) the meters ledger."""
    with ReleaseStore(tmp_path / "a.db", dataset="meters") as a:
        a.release_optstream(_frame(1), k=10, **KW)
    other = _frame(1).rename(columns={"a": "c", "b": "d"})
    with ReleaseStore(tmp_path / "b.db") as b:
        with pytest.raises(AlreadyReleasedError):
            b.release_optstream(_frame(1), k=10, **KW)
        meters = b.ledger.dataset_ledger
        b.release_optstream(other, k=12, epsilon=0.5, alpha=10.0, hierarchy={"t": ["c", "d"]})
        assert b.meta["dataset"].startswith("auto-") and b.config["k"] == 12
        with pytest.raises(Exception, match="closed"):  # the store closed what it opened
            meters._con.execute("SELECT 1")
    with SQLiteLedger(ledger_path("meters")) as book:
        assert len(book.entries()) == 1
