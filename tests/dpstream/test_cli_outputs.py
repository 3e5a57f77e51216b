"""Outputs that tell the truth (issue 30): one CLI test per item.

Nothing is written before the input is validated; one sidecar convention; the guarantee after
a release succeeds; errors in CLI terms with --store; progress lines off a terminal; the
per-period record of k=auto; standard errors beside a release and in query answers.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import dpstream
from dpstream.cli import main

W = 48


@pytest.fixture
def regional(tmp_path):
    tree = dpstream.regional_hierarchy()
    frame = dpstream.load_regional()[tree["national"]].iloc[: 3 * W]
    path = tmp_path / "in.csv"
    frame.rename_axis("time").to_csv(path)
    hier = tmp_path / "tree.json"
    hier.write_text(json.dumps(tree))
    return path, hier, frame


def _optstream(path, hier, out, *extra):
    args = ["release", "optstream", str(path), "--epsilon", "1", "--alpha", "50"]
    return main([*args, "--hierarchy", str(hier), "--out", str(out), "--seed", "1", *extra])


def _files(folder):
    return sorted(p.name for p in folder.iterdir())


def test_a_run_that_fails_validation_writes_nothing_and_the_corrected_run_is_not_refused(
    regional, tmp_path, capsys
):
    path, hier, _ = regional
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    before = _files(tmp_path)
    ledger = tmp_path / "budget.db"
    args = ["--ledger", str(ledger), "--budget-epsilon", "1"]
    assert _optstream(empty, hier, tmp_path / "o.csv", *args) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert _files(tmp_path) == before  # no ledger, no output, no sidecar
    # the corrected run chooses another total: nothing was fixed by the failed one
    args = ["--ledger", str(ledger), "--budget-epsilon", "2"]
    assert _optstream(path, hier, tmp_path / "o.csv", *args) == 0
    assert ledger.exists() and (tmp_path / "o.csv.privacy.json").exists()


@pytest.mark.parametrize("bad", ["negative", "partial", "header only"])
def test_with_a_store_bad_input_creates_no_store_and_speaks_cli_terms(
    regional, tmp_path, capsys, bad
):
    path, hier, frame = regional
    broken = frame.copy()
    if bad == "negative":
        broken.iloc[5, 1] = -3.0
    elif bad == "header only":
        broken = broken.iloc[:0]
    else:
        broken = broken.iloc[: W + 10]  # a store takes whole periods only
    src = tmp_path / "bad.csv"
    broken.rename_axis("time").to_csv(src)
    before = _files(tmp_path)
    store = tmp_path / "ops.db"
    assert _optstream(src, hier, tmp_path / "o.csv", "--store", str(store)) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "INPUT" in err and "dpstream release optstream" in err
    for python_word in ("'frame'", "ReleaseStore", "argument of", "parameter of"):
        assert python_word not in err
    assert "Guarantee" not in captured.out  # nothing was released: no guarantee printed
    assert _files(tmp_path) == before


def test_a_refused_release_into_a_new_store_leaves_no_store_file(regional, tmp_path, capsys):
    path, hier, _ = regional
    ledger, store = tmp_path / "budget.db", tmp_path / "ops.db"
    args = ["release", "optstream", str(path), "--alpha", "50", "--hierarchy", str(hier)]
    args += ["--out", str(tmp_path / "o.csv"), "--store", str(store), "--ledger", str(ledger)]
    # a valid INPUT, but the ledger's total is smaller than one window's charge
    assert main([*args, "--epsilon", "1", "--budget-epsilon", "0.5"]) == 2
    assert "overspend" in capsys.readouterr().err
    left = {p.name for p in tmp_path.iterdir()} - {path.name, hier.name, ledger.name}
    assert left == set()  # no store, no lock, no output, no sidecar
    assert main([*args, "--epsilon", "0.5"]) == 0  # the corrected run releases
    assert store.exists() and (tmp_path / "o.csv.privacy.json").exists()


def test_a_store_another_job_holds_is_never_removed(regional, tmp_path, capsys):
    import sqlite3

    path, hier, _ = regional
    store = tmp_path / "ops.db"
    lock = sqlite3.connect(tmp_path / "ops.db.lock", isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")  # another job's hold on the store
    try:
        assert _optstream(path, hier, tmp_path / "o.csv", "--store", str(store)) == 2
        assert "busy" in capsys.readouterr().err
        # the store file (which the other job may be writing) and its lock stay
        assert store.exists() and (tmp_path / "ops.db.lock").exists()
    finally:
        lock.execute("ROLLBACK")
        lock.close()


def test_a_refused_release_into_an_existing_store_keeps_it(regional, tmp_path, capsys):
    path, hier, _ = regional
    store = tmp_path / "ops.db"
    assert _optstream(path, hier, tmp_path / "o.csv", "--store", str(store)) == 0
    size = store.stat().st_size
    assert _optstream(path, hier, tmp_path / "o.csv", "--store", str(store), "--w", "24") == 2
    assert store.exists() and store.stat().st_size >= size


def test_one_sidecar_convention_and_the_query_sidecar_has_its_own_name(regional, tmp_path):
    path, hier, frame = regional
    assert _optstream(path, hier, tmp_path / "plain.csv") == 0
    assert _optstream(path, hier, tmp_path / "stored.csv", "--store", str(tmp_path / "s.db")) == 0
    one = tmp_path / "one.csv"
    frame[["rural"]].clip(upper=5000).rename_axis("time").to_csv(one)
    args = ["release", "bt", str(one), "--epsilon", "1", "--bound", "5000"]
    assert main([*args, "--out", str(tmp_path / "bt.csv")]) == 0
    for name in ("plain.csv", "stored.csv", "bt.csv"):
        record = json.loads((tmp_path / f"{name}.privacy.json").read_text())
        assert "release" in record and record["epsilon"] == 1.0
        assert not (tmp_path / f"{name}.json").exists()  # the old, ambiguous name
    query_side = json.loads((tmp_path / "bt.csv.query.json").read_text())
    assert query_side["format"] == "dpstream-release" and query_side["method"] == "bt"


def test_query_reads_an_old_sidecar_name_with_a_notice(regional, tmp_path, capsys):
    _, _, frame = regional
    one = tmp_path / "one.csv"
    frame[["rural"]].clip(upper=5000).rename_axis("time").to_csv(one)
    out = tmp_path / "bt.csv"
    args = ["release", "bt", str(one), "--epsilon", "1", "--bound", "5000", "--seed", "2"]
    assert main([*args, "--out", str(out)]) == 0
    (tmp_path / "bt.csv.query.json").rename(tmp_path / "bt.csv.json")  # as written before
    capsys.readouterr()
    assert main(["query", str(out), "--range", "0", "9"]) == 0
    captured = capsys.readouterr()
    assert "Note: read the sidecar 'bt.csv.json'" in captured.err
    assert "bt.csv.query.json" in captured.err and "std_error" in captured.out


def test_the_guarantee_is_printed_after_a_release_succeeds_only(regional, tmp_path, capsys):
    path, hier, _ = regional
    assert _optstream(path, hier, tmp_path / "o.csv", "--w", "1000") == 2  # w > steps
    captured = capsys.readouterr()
    assert "Guarantee" not in captured.out and "'--w' option" in captured.err
    assert _optstream(path, hier, tmp_path / "o.csv") == 0
    out = capsys.readouterr().out
    assert "Guarantee: optstream" in out and "Released 144 steps" in out


def test_progress_lines_off_a_terminal(regional, tmp_path, capsys, monkeypatch):
    from dpstream.commands import _progress

    monkeypatch.setattr(_progress, "LOG_INTERVAL", 0.0)  # a line at every update, any speed
    path, hier, _ = regional
    assert _optstream(path, hier, tmp_path / "o.csv") == 0
    err = capsys.readouterr().err
    assert "Releasing (optstream, w = 48 steps per period): 1/3 periods" in err
    assert "3/3 periods" in err and "elapsed" in err


def test_the_record_of_k_auto_lists_every_period(regional, tmp_path):
    path, hier, _ = regional
    assert _optstream(path, hier, tmp_path / "o.csv") == 0
    record = json.loads((tmp_path / "o.csv.privacy.json").read_text())
    assert record["parameters"]["k"] == "auto"
    periods = record["periods"]
    assert [p["period"] for p in periods] == [0, 1, 2]
    for p in periods:
        assert 1 <= p["k"] <= W and p["sampler"] == "equal" and p["noise"] == "laplace"
        assert len(p["shares"]) == 2 and abs(sum(p["shares"]) - 1) < 1e-9 and p["budget"] > 0
    assert periods[0]["start"].startswith("2016-01-01")
    # the same list in a store's record, for the periods of OUT
    stored = tmp_path / "s.csv"
    assert _optstream(path, hier, stored, "--store", str(tmp_path / "s.db")) == 0
    record = json.loads((tmp_path / "s.csv.privacy.json").read_text())
    assert [p["period"] for p in record["periods"]] == [0, 1, 2]
    assert all(p["sampler"] == "equal" and p["k"] >= 1 for p in record["periods"])


def test_release_std_errors_beside_a_wide_file(regional, tmp_path, capsys):
    path, hier, _ = regional
    out = tmp_path / "o.csv"
    assert _optstream(path, hier, out, "--std-errors") == 0
    assert "Standard errors: " in capsys.readouterr().out
    released = pd.read_csv(out, index_col=0)
    errors = pd.read_csv(tmp_path / "o.std_error.csv", index_col=0)
    assert list(errors.columns) == list(released.columns)
    assert errors.index.equals(released.index)
    assert np.isfinite(errors.to_numpy()).all() and (errors.to_numpy() > 0).all()


def test_std_errors_refused_where_they_cannot_be_computed_before_any_work(
    regional, tmp_path, capsys
):
    path, hier, frame = regional
    before = _files(tmp_path)
    store = str(tmp_path / "s.db")
    extra = ("--k", "10", "--store", store)  # a store keeps no int-k measurements
    assert _optstream(path, hier, tmp_path / "o.csv", "--std-errors", *extra) == 2
    assert "'--std-errors' option" in capsys.readouterr().err
    assert _files(tmp_path) == before
    pq = tmp_path / "in.parquet"  # a Parquet INPUT is streamed: refused with --store
    frame.rename_axis("time").to_parquet(pq)
    before = _files(tmp_path)
    assert _optstream(pq, hier, tmp_path / "o.csv", "--std-errors", "--store", store) == 2
    assert "'--std-errors' option" in capsys.readouterr().err
    assert _files(tmp_path) == before


def test_release_std_errors_with_int_k(regional, tmp_path, capsys):
    path, hier, _ = regional
    out = tmp_path / "o.csv"
    assert _optstream(path, hier, out, "--std-errors", "--k", "10") == 0
    assert "Standard errors: " in capsys.readouterr().out
    errors = pd.read_csv(tmp_path / "o.std_error.csv", index_col=0)
    assert errors.shape == pd.read_csv(out, index_col=0).shape
    assert np.isfinite(errors.to_numpy()).all() and (errors.to_numpy() > 0).all()


def test_std_errors_with_store_per_period_and_again_from_the_store(regional, tmp_path, capsys):
    """--store --std-errors: the errors of every period of OUT from what the store keeps; a
    second run returns the stored periods and states the same errors for them."""
    path, hier, frame = regional
    store = str(tmp_path / "s.db")
    first = tmp_path / "first.csv"
    two_days = tmp_path / "two.csv"
    frame.iloc[: 2 * W].rename_axis("time").to_csv(two_days)
    assert _optstream(two_days, hier, first, "--std-errors", "--store", store) == 0
    assert "Standard errors: " in capsys.readouterr().out
    e1 = pd.read_csv(tmp_path / "first.std_error.csv", index_col=0)
    released = pd.read_csv(first, index_col=0)
    assert list(e1.columns) == list(released.columns) and e1.index.equals(released.index)
    assert np.isfinite(e1.to_numpy()).all() and (e1.to_numpy() > 0).all()
    second = tmp_path / "second.csv"  # the two stored days returned, the third released
    assert _optstream(path, hier, second, "--std-errors", "--store", store) == 0
    e2 = pd.read_csv(tmp_path / "second.std_error.csv", index_col=0)
    assert len(e2) == 3 * W
    # a period planned from earlier ones: the same figures, read back from the store; the
    # first (planned blind) takes its interpolation error from the other periods of OUT
    pd.testing.assert_frame_equal(e2.iloc[W : 2 * W], e1.iloc[W:], rtol=1e-9)
    # the same figures through the Python API (dpstream._std_errors.store_std_errors)
    from dpstream._std_errors import store_std_errors
    from dpstream.store import ReleaseStore

    out = pd.read_csv(second, index_col=0, parse_dates=True)
    with ReleaseStore(store) as st:
        assert sorted(st.ordinals()) == [0, 1, 2]
        again = store_std_errors(st, [0, 1, 2], out)
    assert np.allclose(again.to_numpy(), e2[list(again.columns)].to_numpy(), rtol=1e-6)


def test_query_prints_header_std_error_and_levels(regional, tmp_path, capsys):
    _, _, frame = regional
    one = tmp_path / "one.csv"
    frame[["rural"]].clip(upper=5000).rename_axis("time").to_csv(one)
    out = tmp_path / "bt.csv"
    assert (
        main(["release", "bt", str(one), "--epsilon", "1", "--bound", "5000", "--out", str(out)])
        == 0
    )
    capsys.readouterr()
    args = ["query", str(out), "--range", "0", "47", "--level", "80", "--level", "95"]
    assert main(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("# bt release of 'rural'") and "ε = 1" in lines[0]
    assert lines[2].split("\t") == [
        "i",
        "j",
        "sum",
        "std_error",
        "lo-80",
        "hi-80",
        "lo-95",
        "hi-95",
    ]
    row = [float(x) for x in lines[3].split("\t")]
    est, se = row[2], row[3]
    assert se > 0 and row[4] == pytest.approx(est - 1.2815516 * se, rel=1e-6)
    assert row[7] == pytest.approx(est + 1.959964 * se, rel=1e-6)
    assert main([*args, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    answer = payload["answers"][0]
    assert answer["std_error"] == pytest.approx(se, rel=1e-6) and "hi-95" in answer
    assert "root-mean-square" in payload["std_error"]
    assert main([*args[:5], "--level", "100"]) == 2
    assert "'--level' option" in capsys.readouterr().err
