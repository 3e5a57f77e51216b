"""Real meter files with every defect (issue 25): built from the bundled regional data.

A clean twin (three days of the four SimBench regions around the autumn DST change of 2016, in
long format ``unique_id, ds, y``) and one file per defect. For each defect the CLI
(``dpstream release optstream``, with and without ``--store``) and the Python pass
(:func:`dpstream.io._diagnose.read_readings`) name the problem and the first offending series and
time stamp, exit with status 2, write nothing and charge nothing (the ``--ledger`` file is never
even created); no message shows a value. The policies ``--missing zero|unmeasured`` and
``--timezone`` turn the fixable defects into releases, whose records name the policy.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstream import load_regional, regional_hierarchy
from dpstream._ledger import SQLiteLedger
from dpstream.cli import main
from dpstream.io._diagnose import read_readings
from mechanisms import DomainError

REGIONS = ["rural", "semiurban", "urban", "commercial"]
DAYS = ("2016-10-29", "2016-10-31 23:30")  # 144 half-hours, the autumn DST day in the middle
SECRET = 123456.789  # planted where a value leaks into a message


def clean() -> pd.DataFrame:
    """The clean twin: long, UTC stamps, sorted by series then time (as Nixtla writes it)."""
    wide = load_regional().loc[DAYS[0] : DAYS[1], REGIONS]
    long = wide.rename_axis("ds").reset_index().melt("ds", var_name="unique_id", value_name="y")
    return long[["unique_id", "ds", "y"]].reset_index(drop=True)


def _row(long: pd.DataFrame, series: str, stamp: str) -> int:
    hit = (long["unique_id"] == series) & (long["ds"] == pd.Timestamp(stamp))
    return int(np.flatnonzero(hit.to_numpy())[0])


def _gap(d):  # issue 25's example: ONE reading of one series removed
    return d.drop(index=_row(d, "urban", "2016-10-29 05:00"))


def _dup_same(d):
    return pd.concat([d, d.iloc[[_row(d, "semiurban", "2016-10-30 10:30")]]])


def _dup_diff(d):
    extra = d.iloc[[_row(d, "semiurban", "2016-10-30 10:30")]].assign(y=SECRET)
    return pd.concat([d, extra])


def _off_grid(d):
    d = d.copy()
    d.loc[_row(d, "rural", "2016-10-30 12:00"), "ds"] = pd.Timestamp("2016-10-30 12:10")
    return d


def _nan(d):
    d = d.copy()
    d.loc[_row(d, "commercial", "2016-10-31 08:00"), "y"] = np.nan
    return d


def _negative(d):
    d = d.copy()
    d.loc[_row(d, "rural", "2016-10-31 01:00"), "y"] = -SECRET
    d.loc[_row(d, "urban", "2016-10-31 03:00"), "y"] = -SECRET  # a second: no count shown
    return d


def _text(d):
    d = d.copy()
    d["y"] = d["y"].astype(object)
    d.loc[_row(d, "urban", "2016-10-29 13:30"), "y"] = "ERR"
    return d


def _bad_stamp(d):
    d = d.copy()
    row = _row(d, "rural", "2016-10-29 02:00")
    d["ds"] = d["ds"].astype(str)
    d.loc[row, "ds"] = "29/10/2016 25h"
    return d


def _local(d):
    """The same readings written in Paris local time: 2016-10-30 has 50 half-hours."""
    d = d.copy()
    local = d["ds"].dt.tz_localize("UTC").dt.tz_convert("Europe/Paris").dt.tz_localize(None)
    d["ds"] = local
    return d


def _offsets(d):
    """Local time with explicit UTC offsets (ISO 8601): unambiguous, read as UTC."""
    d = d.copy()
    d["ds"] = (
        d["ds"].dt.tz_localize("UTC").dt.tz_convert("Europe/Paris").map(pd.Timestamp.isoformat)
    )
    return d


#: (name, builder, the message's rule, the first offending series and stamp in the message)
DEFECTS = [
    ("missing pair", _gap, "missing reading", "'urban' at 2016-10-29 05:00:00"),
    ("duplicate, same value", _dup_same, "with the same value", "'semiurban' at 2016-10-30 10:30"),
    ("duplicate, other value", _dup_diff, "with different values", "'semiurban' at 2016-10-30"),
    ("step off the grid", _off_grid, "regular grid", "'rural' at 2016-10-30 12:10:00"),
    ("NaN reading", _nan, "missing reading", "'commercial' at 2016-10-31 08:00:00"),
    ("negative value", _negative, "non-negative", "'rural' at 2016-10-31 01:00:00"),
    ("text value", _text, "holds text", "'urban' at 2016-10-29 13:30:00"),
    ("unparseable time stamp", _bad_stamp, "dates or integers", "series 'rural'"),
    ("local times, DST day", _local, "--timezone", "2016-10-30 02:00:00"),
]
IDS = [d[0] for d in DEFECTS]


def _everything(d):
    """Every defect at once: the pass stops at the first it meets (the time stamps)."""
    for _, build, _, _ in DEFECTS:
        if build is not _local:  # local times are the whole file's convention
            d = build(d)
    return d


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("messy")
    base = clean()
    base.to_csv(root / "clean.csv", index=False)
    for name, build, _, _ in DEFECTS:
        build(base).to_csv(root / f"{name.replace(' ', '_').replace(',', '')}.csv", index=False)
    _everything(base).to_csv(root / "everything.csv", index=False)
    _offsets(base).to_csv(root / "offsets.csv", index=False)
    (root / "reg.json").write_text(json.dumps(regional_hierarchy()))
    return root


def _file(root: Path, name: str) -> str:
    return str(root / f"{name.replace(' ', '_').replace(',', '')}.csv")


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")
    }


def _release(root: Path, path: str, *extra: str, store: bool = False) -> list[str]:
    args = ["release", "optstream", path, "--epsilon", "1", "--alpha", "50", "--k", "10"]
    args += ["--hierarchy", str(root / "reg.json"), "--out", str(root / "out.csv"), *extra]
    if store:
        return [*args, "--store", str(root / "ops.db")]
    return [*args, "--ledger", str(root / "budget.db"), "--budget-epsilon", "10"]


@pytest.mark.parametrize("store", [False, True], ids=["ledger", "store"])
@pytest.mark.parametrize(("name", "rule", "where"), [(d[0], d[2], d[3]) for d in DEFECTS], ids=IDS)
def test_cli_names_the_defect_and_does_nothing(files, capsys, name, rule, where, store):
    before = _snapshot(files)
    code = main(_release(files, _file(files, name), store=store))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and err[0].startswith("Error: "), err
    assert rule in err[0] and where in err[0], err[0]
    assert "INPUT" in err[0] and "Traceback" not in err[0]
    assert "123456" not in err[0] and "SECRET" not in err[0]  # no value
    assert _snapshot(files) == before  # nothing written: no output, no ledger, no store


def test_every_defect_at_once_names_the_first(files, capsys):
    before = _snapshot(files)
    assert main(_release(files, str(files / "everything.csv"))) == 2
    err = capsys.readouterr().err
    assert "dates or integers" in err and "series 'rural'" in err
    assert _snapshot(files) == before


@pytest.mark.parametrize(("name", "rule", "where"), [(d[0], d[2], d[3]) for d in DEFECTS], ids=IDS)
def test_python_pass_names_the_same_defect(files, name, rule, where):
    with pytest.raises(DomainError) as err:
        read_readings(_file(files, name), owner="read_readings")
    msg = str(err.value)
    assert rule in msg and where in msg and "123456" not in msg


def test_negative_values_are_not_counted(files):
    one = _negative(clean())
    row = _row(one, "urban", "2016-10-31 03:00")
    one.loc[row, "y"] = clean().loc[row, "y"]  # only the first negative left
    with pytest.raises(DomainError) as a:
        read_readings(_file(files, "negative value"))
    one.to_csv(files / "one_negative.csv", index=False)
    with pytest.raises(DomainError) as b:
        read_readings(str(files / "one_negative.csv"))
    (files / "one_negative.csv").unlink()
    assert str(a.value) == str(b.value)  # two negatives or one: the same message


def test_clean_twin_releases_and_charges_once(files, capsys):
    code = main(_release(files, str(files / "clean.csv"), "--seed", "1"))
    assert code == 0, capsys.readouterr().err
    out = pd.read_csv(files / "out.csv", index_col=0)
    assert out.shape == (144, 5) and np.isfinite(out.to_numpy()).all()
    with SQLiteLedger(files / "budget.db") as ledger:
        assert ledger.spent() == pytest.approx(1.0)
    for f in ("out.csv", "out.csv.privacy.json", "budget.db"):
        (files / f).unlink(missing_ok=True)


def test_local_times_with_timezone_release_on_a_utc_grid(files):
    readings, long = read_readings(_file(files, "local times DST day"), timezone="Europe/Paris")
    twin, _ = read_readings(str(files / "clean.csv"))
    assert long
    pd.testing.assert_frame_equal(readings.frame, twin.frame)  # the same UTC grid and values
    offsets, _ = read_readings(str(files / "offsets.csv"))  # offsets need no --timezone
    pd.testing.assert_frame_equal(offsets.frame, twin.frame)


def test_a_time_zone_that_does_not_fit_is_refused(files):
    # London repeats 01:00-01:30 that night, Paris 02:00-02:30: read as London, the file's
    # single 01:00 cannot be placed (and its repeated 02:00 reads as a duplicate in New York).
    with pytest.raises(DomainError, match="time zone 'Europe/London'"):
        read_readings(_file(files, "local times DST day"), timezone="Europe/London")
    with pytest.raises(DomainError, match="duplicated"):
        read_readings(_file(files, "local times DST day"), timezone="America/New_York")


@pytest.mark.parametrize("policy", ["zero", "unmeasured"])
def test_missing_policies_release_the_gap(files, capsys, policy):
    path = _file(files, "missing pair")
    code = main(_release(files, path, "--missing", policy, "--seed", "1"))
    assert code == 0, capsys.readouterr().err
    out = pd.read_csv(files / "out.csv", index_col=0, parse_dates=True)
    record = json.loads((files / "out.csv.privacy.json").read_text())
    assert record["parameters"]["missing"] == policy
    gap = out.loc["2016-10-29 05:00:00", "urban"]
    assert np.isnan(gap) if policy == "unmeasured" else np.isfinite(gap)  # zero: a value
    others = out.drop(columns="national").fillna(0.0).sum(axis=1)
    np.testing.assert_allclose(out["national"], others, rtol=1e-6, atol=1e-6)
    for f in ("out.csv", "out.csv.privacy.json", "budget.db"):
        (files / f).unlink(missing_ok=True)


def test_unmeasured_with_k_auto_releases_the_gap_empty(files, capsys):
    """--k auto (the default): the gap is published empty, the national sums the observed
    leaves, the record names the policy and the plans are recorded."""
    path = _file(files, "missing pair")
    args = _release(files, path, "--missing", "unmeasured", "--seed", "1")
    args[args.index("--k") + 1] = "auto"
    assert main(args) == 0, capsys.readouterr().err
    out = pd.read_csv(files / "out.csv", index_col=0, parse_dates=True)
    assert np.isnan(out.loc["2016-10-29 05:00:00", "urban"])
    assert int(out.isna().sum().sum()) == 1
    others = out.drop(columns="national").fillna(0.0).sum(axis=1)
    np.testing.assert_allclose(out["national"], others, rtol=1e-6, atol=1e-6)
    record = json.loads((files / "out.csv.privacy.json").read_text())
    assert record["parameters"]["missing"] == "unmeasured" and record["parameters"]["k"] == "auto"
    for f in ("out.csv", "out.csv.privacy.json", "budget.db"):
        (files / f).unlink(missing_ok=True)


def test_unmeasured_with_the_store_refuses_a_parquet_input(files, capsys):
    """--k auto with --store takes unmeasured readings (tests/dpstream/test_store_unmeasured.py),
    with --std-errors too (tests/dpstream/test_std_errors.py); still refused: a Parquet INPUT
    (read period by period)."""
    _gap(clean()).to_parquet(files / "gap.parquet", index=False)
    before = _snapshot(files)
    pq = _release(files, str(files / "gap.parquet"), "--missing", "unmeasured", store=True)
    assert main(pq) == 2
    assert "'--missing'" in capsys.readouterr().err
    assert _snapshot(files) == before
    (files / "gap.parquet").unlink()


def test_unmeasured_into_the_store_then_the_late_reading(tmp_path, capsys):
    (tmp_path / "reg.json").write_text(json.dumps(regional_hierarchy()))
    _gap(clean()).to_csv(tmp_path / "gap.csv", index=False)
    clean().to_csv(tmp_path / "late.csv", index=False)
    args = [
        "--epsilon",
        "1",
        "--alpha",
        "50",
        "--k",
        "10",
        "--hierarchy",
        str(tmp_path / "reg.json"),
    ]
    args += ["--store", str(tmp_path / "ops.db"), "--seed", "2"]
    gap = ["release", "optstream", str(tmp_path / "gap.csv"), *args, "--missing", "unmeasured"]
    assert main([*gap, "--out", str(tmp_path / "a.csv")]) == 0
    out = pd.read_csv(tmp_path / "a.wide.csv", index_col=0)  # the wide twin of a long OUT
    assert out.isna().sum().to_dict() == {"national": 0, **{r: int(r == "urban") for r in REGIONS}}
    leaves = out.drop(columns="national").fillna(0.0).sum(axis=1)
    np.testing.assert_allclose(out["national"], leaves, rtol=1e-6, atol=1e-6)
    record = json.loads((tmp_path / "a.csv.privacy.json").read_text())
    assert record["parameters"]["missing"] == "unmeasured"
    capsys.readouterr()
    late = [
        "release",
        "optstream",
        str(tmp_path / "late.csv"),
        *args,
        "--out",
        str(tmp_path / "b.csv"),
    ]
    assert main(late) == 2
    assert "late reading: series 'urban' at 2016-10-29 05:00:00" in capsys.readouterr().err


# -- the pass itself: formats, layouts, integer stamps, the spring hour ------------------------


@pytest.mark.parametrize("fmt", ["csv", "parquet", "sqlite"])
def test_one_pass_for_csv_parquet_and_sqlite_long_and_wide(tmp_path, fmt):
    import sqlite3

    from dpstream.io import wide_to_long

    twin, _ = read_readings_frame(clean())
    wide = twin.frame.rename_axis("time").reset_index()
    for layout, table in (("long", wide_to_long(twin.frame)), ("wide", wide)):
        gap = table.drop(index=3)
        path = tmp_path / f"{layout}.{'db' if fmt == 'sqlite' else fmt}"
        if fmt == "csv":
            gap.to_csv(path, index=False)
        elif fmt == "parquet":
            gap.to_parquet(path, index=False)
        else:
            with sqlite3.connect(path) as con:
                gap.assign(
                    **{c: gap[c].astype(str) for c in gap.columns if "time" in c or c == "ds"}
                ).to_sql("readings", con, index=False)
        kw = {}  # an SQLite file with one table is read from it
        with pytest.raises(DomainError, match="missing reading: first series"):
            read_readings(str(path), **kw)
        got, long = read_readings(str(path), missing="unmeasured", **kw)
        assert long == (layout == "long")
        holes = 1 if long else len(REGIONS)  # a wide row is one step of every series
        assert got.observed is not None and (~got.observed).sum() == holes


def read_readings_frame(long: pd.DataFrame):
    from dpstream.io._diagnose import diagnose_long

    return diagnose_long(long), True


def test_wide_rows_out_of_order_are_named():
    from dpstream.io._diagnose import diagnose_wide

    wide = clean().pivot(index="ds", columns="unique_id", values="y")
    with pytest.raises(DomainError, match="time order; the row at 2016-10-31 23:00:00"):
        diagnose_wide(wide.iloc[::-1])


def test_integer_stamps_and_a_missing_step():
    from dpstream.io._diagnose import diagnose_long

    long = pd.DataFrame({"unique_id": ["a"] * 4 + ["b"] * 3, "ds": [0, 1, 2, 3, 0, 1, 3]})
    long["y"] = 1.0
    with pytest.raises(DomainError, match="series 'b' at 2 "):
        diagnose_long(long)
    got = diagnose_long(long, missing="zero")
    assert got.frame.index.tolist() == [0, 1, 2, 3] and got.frame.loc[2, "b"] == 0.0
    with pytest.raises(Exception, match="'timezone' parameter"):
        diagnose_long(long, timezone="Europe/Paris")


def test_spring_forward_in_local_time_asks_for_a_timezone():
    from dpstream.io._diagnose import diagnose_long

    utc = pd.date_range("2016-03-26 12:00", "2016-03-27 12:00", freq="30min")
    local = utc.tz_localize("UTC").tz_convert("Europe/Paris").tz_localize(None)
    long = pd.DataFrame({"unique_id": "a", "ds": local, "y": 1.0})
    with pytest.raises(DomainError, match="skip one hour for every series at 2016-03-27 02:00"):
        diagnose_long(long)
    got = diagnose_long(long, timezone="Europe/Paris")
    assert got.frame.index.equals(pd.DatetimeIndex(utc, name="ds").as_unit("ns"))


def test_cli_reads_an_sqlite_table_and_names_its_defect(files, capsys):
    import sqlite3

    db = files / "meters.db"
    with sqlite3.connect(db) as con:
        _nan(clean()).assign(ds=lambda d: d["ds"].astype(str)).to_sql("readings", con, index=False)
    before = _snapshot(files)
    assert main(_release(files, str(db))) == 2
    err = capsys.readouterr().err
    assert "missing reading: first series 'commercial' at 2016-10-31 08:00:00" in err
    assert _snapshot(files) == before
    db.unlink()


def test_a_late_reading_is_refused_and_the_released_period_stands(tmp_path, capsys):
    """Day released with a gap under --missing zero; the reading arrives in the next file."""
    import sqlite3

    (tmp_path / "reg.json").write_text(json.dumps(regional_hierarchy()))
    _gap(clean()).to_csv(tmp_path / "gap.csv", index=False)
    clean().to_csv(tmp_path / "late.csv", index=False)
    _gap(clean()).to_csv(tmp_path / "again.csv", index=False)
    args = [
        "--epsilon",
        "1",
        "--alpha",
        "50",
        "--k",
        "10",
        "--hierarchy",
        str(tmp_path / "reg.json"),
    ]
    args += ["--store", str(tmp_path / "ops.db"), "--out", str(tmp_path / "out.csv"), "--seed", "1"]
    run = lambda name, *extra: main(["release", "optstream", str(tmp_path / name), *args, *extra])  # noqa: E731
    assert run("gap.csv", "--missing", "zero") == 0
    capsys.readouterr()
    first = (tmp_path / "out.csv").read_bytes()
    with sqlite3.connect(tmp_path / "ops.db") as con:
        charges = con.execute("SELECT COUNT(*) FROM charges").fetchone()[0]
    assert run("late.csv") == 2
    err = capsys.readouterr().err
    assert "late reading: series 'urban' at 2016-10-29 05:00:00" in err
    assert "period starting 2016-10-29 00:00:00" in err and "released period stands" in err
    assert (tmp_path / "out.csv").read_bytes() == first  # nothing written
    with sqlite3.connect(tmp_path / "ops.db") as con:
        assert con.execute("SELECT COUNT(*) FROM charges").fetchone()[0] == charges
    assert run("again.csv", "--missing", "zero") == 0  # the same gap: returned as stored
    assert "returned 3 from the store" in capsys.readouterr().out


def test_an_hour_missing_on_a_weekday_is_a_missing_reading_not_a_dst_hint():
    from dpstream.io import diagnose_long

    idx = pd.date_range("2016-03-22", periods=96, freq="30min")  # a Tuesday
    long = pd.DataFrame({"unique_id": "a", "ds": idx, "y": 1.0}).drop(index=[20, 21])
    with pytest.raises(DomainError, match="missing reading: first series 'a' at 2016-03-22 10:00"):
        diagnose_long(long)


def test_a_correction_is_a_new_charged_release_of_the_period(tmp_path, capsys):
    """--correct PERIOD: INPUT's rows of that period, released again beside the store and
    charged again to the data set's ledger (refused once its budget is spent)."""
    (tmp_path / "reg.json").write_text(json.dumps(regional_hierarchy()))
    _gap(clean()).to_csv(tmp_path / "gap.csv", index=False)
    clean().to_csv(tmp_path / "fixed.csv", index=False)
    common = ["--epsilon", "1", "--alpha", "50", "--k", "10"]
    common += ["--hierarchy", str(tmp_path / "reg.json"), "--ledger", str(tmp_path / "b.db")]
    store = ["--store", str(tmp_path / "ops.db"), "--missing", "zero", "--budget-epsilon", "2"]

    def run(name, out, *extra):
        args = ["release", "optstream", str(tmp_path / name), *common, *extra]
        return main([*args, "--out", str(tmp_path / out)])

    assert run("gap.csv", "daily.csv", *store) == 0
    assert run("fixed.csv", "c.csv", "--correct", "2016-10-29 00:30") == 2  # not a period start
    assert "'--correct'" in capsys.readouterr().err
    assert run("fixed.csv", "c.csv", "--correct", "2016-10-29", *store[:2]) == 2  # not --store
    assert "'--correct'" in capsys.readouterr().err
    assert run("fixed.csv", "c.csv", "--correct", "2016-10-29") == 0
    out = pd.read_csv(tmp_path / "c.csv", index_col=0, parse_dates=True)
    assert out.index[0] == pd.Timestamp("2016-10-29") and len(out) == 48
    assert np.isfinite(out.loc["2016-10-29 05:00", "urban"])
    record = json.loads((tmp_path / "c.csv.privacy.json").read_text())
    assert record["parameters"]["correction_of"] == "2016-10-29 00:00:00"
    capsys.readouterr()
    assert run("fixed.csv", "c2.csv", "--correct", "2016-10-29") == 2  # the budget is spent
    assert "left" in capsys.readouterr().err and not (tmp_path / "c2.csv").exists()


def test_python_store_refuses_a_late_reading(tmp_path):
    from dpstream import ReleaseStore

    wide = load_regional().loc[DAYS[0] : DAYS[1], REGIONS]
    gap = wide.copy()
    gap.loc["2016-10-29 05:00", "urban"] = np.nan
    kw = {"epsilon": 1.0, "alpha": 50.0, "k": 10, "hierarchy": regional_hierarchy(), "seed": 4}
    with ReleaseStore(tmp_path / "s.db") as store:
        first = store.release_optstream(gap, missing="zero", **kw)
        assert first.attrs["privacy"]["parameters"]["missing"] == "zero"
        with pytest.raises(DomainError, match="late reading: series 'urban' at 2016-10-29 05:00"):
            store.release_optstream(wide, **kw)
        again = store.release_optstream(gap, missing="zero", **kw)  # the same gap: as stored
    pd.testing.assert_frame_equal(again, first, check_freq=False)
