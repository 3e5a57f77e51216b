"""``--ledger``: releases made by separate CLI runs compose against one persisted budget, an
overspend is refused before any work, and every written file carries its privacy record."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from dpstream._ledger import SQLiteLedger, charged_decimal
from dpstream.cli import main


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(1)
    idx = pd.date_range("2016-01-01", periods=192, freq="30min")
    pd.DataFrame({"time": idx, "a": rng.uniform(0, 9, 192), "b": rng.uniform(0, 9, 192)}).to_csv(
        "loads.csv", index=False
    )
    (tmp_path / "tree.json").write_text(json.dumps({"ab": ["a", "b"]}))
    pd.DataFrame({"power": rng.uniform(0, 9, 600)}).to_csv("one.csv", index=False)
    return tmp_path


def _release(method: str, eps: str, out: str, *extra: str) -> list[str]:
    return [
        "release", method, "loads.csv", "--epsilon", eps, "--alpha", "2", "--hierarchy",
        "tree.json", "--out", out, *extra,
    ]  # fmt: skip


def test_two_runs_compose_and_the_third_is_refused_before_any_work(files, capsys):
    first = _release("laplace", "0.6", "first.csv", "--ledger", "b.db", "--budget-epsilon", "1")
    assert main(first) == 0
    out = capsys.readouterr().out
    assert "Guarantee: laplace: any change of up to 2" in out and "ε = 0.6" in out
    assert main(_release("optstream", "0.4", "second.csv", "--ledger", "b.db")) == 0
    capsys.readouterr()
    assert main(_release("dft", "0.01", "third.csv", "--ledger", "b.db")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'--ledger' file 'b.db' has (ε=0, δ=0) left" in err[0]
    assert not (files / "third.csv").exists()
    assert not (files / "third.csv.privacy.json").exists()
    with SQLiteLedger(files / "b.db") as ledger:
        # charged: the float the noise was calibrated to, at most the decimal written (issue 31
        # §5), shown as that decimal
        assert [(c.label, charged_decimal(c.budget.epsilon)) for c in ledger.charges] == [
            ("release_laplace", Fraction("0.6")),
            ("release_optstream", Fraction("0.4")),
        ]
        assert all(Fraction(c.budget.epsilon) <= charged_decimal(c.budget.epsilon)
                   for c in ledger.charges)  # fmt: skip
        assert ledger.unit.w == 48 and ledger.unit.alpha == 2.0


def test_the_sidecar_holds_the_record(files):
    assert main(_release("pegasus", "0.5", "p.csv", "--seed", "3")) == 0
    record = json.loads((files / "p.csv.privacy.json").read_text())
    assert record["unit"] == "(w, alpha)" and record["w"] == 48 and record["alpha"] == 2.0
    assert record["epsilon"] == 0.5 and record["delta"] == 0.0
    assert record["mechanism"] == "pegasus" and record["parameters"]["levels"] == 2
    assert record["seeded"] is True and record["release"] is False
    assert "Theorem 13" in record["proof"] and record["version"]
    assert "not a release" in record["guarantee"]


def test_a_ledger_accounts_for_one_unit(files, capsys):
    args = ("--ledger", "u.db", "--budget-epsilon", "5")
    assert main(_release("laplace", "0.1", "a.csv", *args)) == 0
    capsys.readouterr()
    # Another α is another unit; event-level releases are another unit too.
    assert main(_release("laplace", "0.1", "b.csv", "--alpha", "3", "--ledger", "u.db")) == 2
    assert "one ledger per privacy unit" in capsys.readouterr().err
    bt = ["release", "bt", "one.csv", "--epsilon", "0.1", "--bound", "10", "--out", "bt.csv"]
    assert main([*bt, "--ledger", "u.db"]) == 2  # other streams than the ledger's data set
    assert "other streams" in capsys.readouterr().err
    # the same stream, released at w-event on a ledger, then at event level on it
    power = pd.read_csv("one.csv")
    power.insert(0, "time", pd.date_range("2016-01-01", periods=len(power), freq="30min"))
    power.to_csv("one_t.csv", index=False)
    one = ["release", "laplace", "one_t.csv", "--epsilon", "0.1", "--alpha", "3", "--out", "c.csv"]
    assert main([*one, "--ledger", "v.db", "--budget-epsilon", "5"]) == 0
    capsys.readouterr()
    assert main([*bt, "--ledger", "v.db"]) == 2
    assert "one ledger per privacy unit" in capsys.readouterr().err
    assert not (files / "b.csv").exists() and not (files / "bt.csv").exists()
    with SQLiteLedger(files / "u.db") as ledger:
        assert len(ledger.charges) == 1
    with SQLiteLedger(files / "v.db") as ledger:
        assert len(ledger.charges) == 1


def test_event_level_releases_compose_on_one_ledger(files, capsys):
    base = ["one.csv", "--bound", "10", "--ledger", "e.db"]
    pak = ["release", "pak", *base, "--epsilon", "0.5", "--time-lag", "300", "--out", "pak.csv"]
    assert main([*pak, "--budget-epsilon", "1", "--budget-delta", "1e-5"]) == 0
    bt = ["release", "bt", *base, "--epsilon", "0.5", "--out", "bt.csv"]
    assert main(bt) == 0
    tops = ["release", "tops", *base, "--epsilon", "0.1", "--time-lag", "300", "--out", "t.csv"]
    assert main(tops) == 2
    assert "left" in capsys.readouterr().err
    with SQLiteLedger(files / "e.db") as ledger:
        assert [c.label for c in ledger.charges] == ["pak_release", "dpstream release bt"]
        assert ledger.remaining_epsilon == 0.0
    for name in ("pak.csv", "bt.csv"):
        record = json.loads((files / f"{name}.privacy.json").read_text())
        assert record["unit"] == "event" and record["bound"] == 10.0
        assert json.loads((files / f"{name}.query.json").read_text())["privacy"] == record
    assert not (files / "t.csv").exists()


def test_forecasts_inherit_the_record_of_their_input(files):
    assert main(_release("laplace", "1", "rel.csv")) == 0
    argv = ["forecast", "rel.csv", "--train", "96", "--horizon", "48", "--out", "fc.csv"]
    assert main([*argv, "--truth", "loads.csv", "--days", "1", "--column", "a"]) == 0
    side = json.loads((files / "fc.csv.privacy.json").read_text())
    assert side["release"] is True and side["records"][0]["mechanism"] == "laplace"
    errors = json.loads((files / "fc_errors.csv.privacy.json").read_text())
    assert errors["release"] is False
