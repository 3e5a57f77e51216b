"""Bad inputs, as a new user would type them, for every CLI sub-command (issue 11 §5).

Each row: exit status 2, exactly one line on stderr naming the option (or argument) at fault,
no traceback, no "this is a bug", no numpy repr, no file written, and, for the commands that
draw noise, no charge to the ``--ledger`` given with every release.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstream._ledger import SQLiteLedger
from dpstream.cli import main
from mechanisms import Budget

N = 192  # steps of the loads (4 days of half-hours)
M = 400  # values of the single stream


def _write_inputs(root: Path) -> None:
    rng = np.random.default_rng(0)
    idx = pd.date_range("2016-01-01", periods=N, freq="30min")
    loads = pd.DataFrame({"time": idx, "a": rng.uniform(0, 9, N), "b": rng.uniform(0, 9, N)})
    loads.to_csv(root / "loads.csv", index=False)
    (root / "tree.json").write_text(json.dumps({"ab": ["a", "b"]}))
    (root / "tree_list.json").write_text(json.dumps([["a", "b"]]))
    (root / "tree_unknown.json").write_text(json.dumps({"ab": ["a", "zz"]}))
    (root / "tree_cycle.json").write_text(json.dumps({"ab": ["a", "b"], "a": ["ab"]}))
    (root / "tree_bad.json").write_text("{not json")
    loads.iloc[::-1].to_csv(root / "unsorted.csv", index=False)
    pd.concat([loads, loads.iloc[:1]]).to_csv(root / "dup.csv", index=False)
    loads.assign(a=lambda d: d["a"].where(d.index != 5)).to_csv(root / "nan.csv", index=False)
    loads.assign(a=lambda d: d["a"] - 20).to_csv(root / "neg.csv", index=False)
    loads.assign(a="x").to_csv(root / "text.csv", index=False)
    loads.assign(time="not a date").to_csv(root / "baddates.csv", index=False)
    loads.iloc[:0].to_csv(root / "empty.csv", index=False)
    (root / "notes.txt").write_text("hello")
    (root / "garbage.csv").write_bytes(b"\x00\x01\x02,\xff\n\x00")
    (root / "folder").mkdir()
    one = pd.DataFrame(
        {"time": pd.date_range("2016-01-01", periods=M, freq="min"), "power": rng.uniform(0, 9, M)}
    )
    one.to_csv(root / "one.csv", index=False)
    one.iloc[::-1].to_csv(root / "one_unsorted.csv", index=False)
    pd.concat([one, one.iloc[:1]]).to_csv(root / "one_dup.csv", index=False)
    one.assign(power=lambda d: d["power"] + 100).to_csv(root / "one_big.csv", index=False)
    one.assign(power=lambda d: -d["power"]).to_csv(root / "one_neg.csv", index=False)
    one.assign(power="x").to_csv(root / "one_text.csv", index=False)
    one.assign(other=1.0).to_csv(root / "one_two.csv", index=False)
    np.save(root / "prefix.npy", rng.uniform(0, 9, 5000))
    (root / "prefix_two.csv").write_text("1,2\n3,4\n")
    (root / "prefix_text.csv").write_text("1\nx\n3\n")
    (root / "notaledger.db").write_text("not a database")
    SQLiteLedger(root / "budget.db", total=Budget(100.0, 0.5)).close()
    SQLiteLedger(root / "small.db", total=Budget(0.1)).close()
    # A release for query, and tampered copies of it.
    frame = pd.DataFrame({"value": np.ones(10), "cumulative": np.arange(1.0, 11.0)})
    frame.index.name = "step"
    meta = {
        "format": "dpstream-release",
        "version": 2,
        "n_input": 10,
        "time_lag": 0,
        "method": "bt",
    }
    for name, fr, mt in [
        ("rel", frame, meta),
        ("rel_steps", frame, {**meta, "n_input": 11}),
        ("rel_steps_text", frame, {**meta, "n_input": "10"}),
        ("rel_format", frame, {**meta, "format": "other"}),
        ("rel_version", frame, {**meta, "version": 3}),
        ("rel_nocum", frame.drop(columns="cumulative"), meta),
        ("rel_textcum", frame.assign(cumulative="x"), meta),
        ("rel_infcum", frame.assign(cumulative=np.inf), meta),
    ]:
        fr.to_csv(root / f"{name}.csv")
        (root / f"{name}.csv.query.json").write_text(json.dumps(mt))
    frame.to_csv(root / "rel_noside.csv")
    frame.to_csv(root / "rel_badjson.csv")
    (root / "rel_badjson.csv.query.json").write_text("{oops")
    frame.to_csv(root / "rel_list.csv")
    (root / "rel_list.csv.query.json").write_text("[1, 2]")
    (root / "rel_dir.csv").mkdir()


def _pipeline_cases(method: str) -> list[tuple[list[str], str]]:
    """Bad inputs of ``dpstream release METHOD`` for the frame methods."""
    alpha = ["--alpha", "1"]
    base = ["loads.csv", "--epsilon", "1", *alpha, "--out", "o.csv"]

    def with_(*extra: str, drop: tuple[str, ...] = ()) -> list[str]:
        args = list(base)
        for option in drop:
            i = args.index(option)
            del args[i : i + 2]
        return [*args, *extra]

    cases = [
        (with_("--epsilon", "0"), "'--epsilon'"),
        (with_("--epsilon", "-1"), "'--epsilon'"),
        (with_("--epsilon", "nan"), "'--epsilon'"),
        (with_("--epsilon", "inf"), "'--epsilon'"),
        (with_("--epsilon", "abc"), "'--epsilon'"),
        (with_(drop=("--epsilon",)), "'--epsilon'"),
        (with_("--w", "0"), "'--w'"),
        (with_("--w", "-5"), "'--w'"),
        (with_("--w", "abc"), "'--w'"),
        (with_("--w", "1.5"), "'--w'"),
        (with_("--w", str(N + 1)), "'--w'"),
        (with_("--k", "0"), "'--k'"),
        (with_("--k", "49"), "'--k'"),
        (with_("--alpha", "0"), "'--alpha'"),
        (with_("--alpha", "-2"), "'--alpha'"),
        (with_("--alpha", "abc"), "'--alpha'"),
        (with_("--alpha", "nan"), "'--alpha'"),
        (with_("--bound", "-1"), "'--bound'"),
        (with_("--bound", "nan"), "'--bound'"),
        (with_("--theta", "-1"), "'--theta'"),
        (with_("--seed", "abc"), "'--seed'"),
        (with_("--out", "o.txt"), "'--out'"),
        (with_("--out", "missing/o.csv"), "'--out'"),
        (with_("--out", "folder"), "'--out'"),
        (with_(drop=("--out",)), "'--out'"),
        (with_("--hierarchy", "missing.json"), "'--hierarchy'"),
        (with_("--hierarchy", "tree_bad.json"), "'--hierarchy'"),
        (with_("--hierarchy", "tree_list.json"), "'--hierarchy'"),
        (with_("--hierarchy", "tree_unknown.json"), "'--hierarchy'"),
        (with_("--hierarchy", "tree_cycle.json"), "'--hierarchy'"),
        (with_("--time-column", "nope"), "'--time-column'"),
        (with_("--timezone", "Mars/Olympus"), "'--timezone'"),
        (with_("--missing", "maybe"), "'--missing'"),
        (with_("--correct", "yesterday"), "'--correct'"),
        (with_("--correct", "2016-01-01 00:30"), "'--correct'"),  # not a period's first step
        (with_("--correct", "2016-01-01", "--store", "s.db"), "'--correct'"),
        (with_("--frobnicate", "1"), "--frobnicate"),
        (with_("--ledger", "budget.db", "--budget-epsilon", "1"), "'--ledger'"),  # other total
        (["missing.csv", "--epsilon", "1", *alpha, "--out", "o.csv"], "INPUT"),
        (["notes.txt", "--epsilon", "1", *alpha, "--out", "o.csv"], "INPUT"),
        (["garbage.csv", "--epsilon", "1", *alpha, "--out", "o.csv"], "INPUT"),
        (["unsorted.csv", "--epsilon", "1", *alpha, "--out", "o.csv"], "INPUT"),
        (["dup.csv", "--epsilon", "1", *alpha, "--out", "o.csv"], "INPUT"),
        (["nan.csv", "--epsilon", "1", *alpha, "--out", "o.csv"], "INPUT"),
        (["neg.csv", "--epsilon", "1", *alpha, "--out", "o.csv"], "INPUT"),
        (["text.csv", "--epsilon", "1", *alpha, "--out", "o.csv"], "INPUT"),
        (["baddates.csv", "--epsilon", "1", *alpha, "--out", "o.csv"], "time column"),
        (["empty.csv", "--epsilon", "1", *alpha, "--out", "o.csv"], "no readings"),
    ]
    if method == "optstream":
        cases += [
            (with_(drop=("--alpha",)), "'--alpha'"),
            (with_("--alpha", "none", "--bound", "10"), "'--alpha'"),
            (with_("--k", "60", "--w", "50"), "'--k'"),
        ]
    else:
        cases += [
            (with_("--missing", "unmeasured"), "'--missing'"),  # OptStream's policy only
            (with_("--alpha", "none"), "'--bound'"),
            (with_("--alpha", "none", "--bound", "0"), "'--bound'"),
            (with_("--alpha", "none", "--bound", "5"), "INPUT"),  # values above the bound
        ]
    return cases


def _stream_cases(method: str) -> list[tuple[list[str], str]]:
    lag = [] if method == "bt" else ["--time-lag", "300"]
    base = ["one.csv", "--epsilon", "1", "--bound", "10", *lag, "--out", "o.csv"]

    def with_(*extra: str, drop: tuple[str, ...] = ()) -> list[str]:
        args = list(base)
        for option in drop:
            i = args.index(option)
            del args[i : i + 2]
        return [*args, *extra]

    def on(path: str) -> list[str]:
        return [path, *base[1:]]

    cases = [
        (with_("--epsilon", "0"), "'--epsilon'"),
        (with_("--epsilon", "-1"), "'--epsilon'"),
        (with_("--epsilon", "nan"), "'--epsilon'"),
        (with_("--epsilon", "inf"), "'--epsilon'"),
        (with_("--epsilon", "abc"), "'--epsilon'"),
        (with_(drop=("--epsilon",)), "'--epsilon'"),
        (with_(drop=("--bound",)), "'--bound'"),
        (with_("--bound", "0"), "'--bound'"),
        (with_("--bound", "-1"), "'--bound'"),
        (with_("--bound", "nan"), "'--bound'"),
        (with_("--bound", "inf"), "'--bound'"),
        (with_("--bound", "abc"), "'--bound'"),
        (with_("--time-lag", "-1"), "'--time-lag'"),
        (with_("--time-lag", "abc"), "'--time-lag'"),
        (with_("--delta", "1"), "'--delta'"),
        (with_("--delta", "-0.5"), "'--delta'"),
        (with_("--fanout", "1"), "'--fanout'"),
        (with_("--epsilon-threshold", "-1"), "'--epsilon-threshold'"),
        (with_("--smoother", "bogus"), "'--smoother'"),
        (with_("--seed", "x"), "'--seed'"),
        (with_("--column", "nope"), "'--column'"),
        (with_("--time-column", "nope"), "'--time-column'"),
        (with_("--hierarchy", "tree.json"), "'--hierarchy'"),
        (with_("--out", "o.txt"), "'--out'"),
        (with_("--out", "missing/o.csv"), "'--out'"),
        (with_("--out", "folder"), "'--out'"),
        (on("missing.csv"), "INPUT"),
        (on("notes.txt"), "INPUT"),
        (on("one_unsorted.csv"), "time column"),
        (on("one_dup.csv"), "time column"),
        (on("one_big.csv"), "--bound"),
        (on("one_neg.csv"), "--bound"),
        (on("one_text.csv"), "value column"),
        (on("one_two.csv"), "--column"),
    ]
    if method != "bt":
        cases += [
            (with_(drop=("--time-lag",)), "'--time-lag'"),
            (with_("--time-lag", "0"), "'--time-lag'"),
            (with_("--time-lag", str(M)), "'--time-lag'"),
        ]
    return cases


def _ledger_cases(method: str) -> list[tuple[list[str], str]]:
    """--ledger misuse (the table's own ledger is added after these options)."""
    lag = [] if method not in ("tops", "topl", "pak") else ["--time-lag", "300"]
    data = ["one.csv", "--bound", "10"] if lag or method == "bt" else ["loads.csv"]
    alpha = [] if lag or method == "bt" else ["--alpha", "1"]
    base = [*data, "--epsilon", "1", *alpha, *lag, "--out", "o.csv"]
    return [
        ([*base, "--ledger", "new.db"], "'--ledger'"),  # missing, and no --budget-epsilon
        ([*base, "--budget-epsilon", "1"], "'--budget-epsilon'"),  # without --ledger
        ([*base, "--ledger", "new.db", "--budget-epsilon", "0"], "'--budget-epsilon'"),
        (
            [*base, "--ledger", "new.db", "--budget-epsilon", "1", "--budget-delta", "1"],
            "'--budget-delta'",
        ),  # fmt: skip
        ([*base, "--ledger", "new.db", "--budget-delta", "0.1"], "'--budget-delta'"),
        ([*base, "--ledger", "small.db"], "'--ledger'"),  # overspend
        ([*base, "--ledger", "notaledger.db"], "'--ledger'"),
        ([*base, "--ledger", "folder"], "'--ledger'"),
        ([*base, "--ledger", "missing/new.db", "--budget-epsilon", "1"], "'--ledger'"),
    ]


RELEASE_METHODS = ("optstream", "laplace", "dft", "pegasus", "tops", "topl", "pak", "bt")

QUERY = [
    (["rel.csv"], "'--range'"),
    (["rel.csv", "--range", "5", "2"], "'--range'"),
    (["rel.csv", "--range", "-1", "3"], "'--range'"),
    (["rel.csv", "--range", "0", "10"], "'--range'"),
    (["rel.csv", "--range", "10", "10"], "'--range'"),
    (["rel.csv", "--range", "0", "99999"], "'--range'"),
    (["rel.csv", "--range", "a", "b"], "'--range'"),
    (["rel.csv", "--range", "1"], "'--range'"),
    (["rel.csv", "--range", "1.5", "2"], "'--range'"),
    (["rel.csv", "--range", "0", "1", "--range", "4", "3"], "'--range'"),
    (["rel.csv", "--range", "0", "1", "--frobnicate"], "--frobnicate"),
    (["missing.csv", "--range", "0", "1"], "RELEASE"),
    (["notes.txt", "--range", "0", "1"], "RELEASE"),
    (["folder", "--range", "0", "1"], "RELEASE"),
    (["rel_dir.csv", "--range", "0", "1"], "RELEASE"),
    (["rel_noside.csv", "--range", "0", "1"], "sidecar"),
    (["rel_badjson.csv", "--range", "0", "1"], "sidecar"),
    (["rel_list.csv", "--range", "0", "1"], "sidecar"),
    (["rel_format.csv", "--range", "0", "1"], "sidecar"),
    (["rel_version.csv", "--range", "0", "1"], "sidecar"),
    (["rel_steps.csv", "--range", "0", "1"], "sidecar"),
    (["rel_steps_text.csv", "--range", "0", "1"], "sidecar"),
    (["rel_nocum.csv", "--range", "0", "1"], "sidecar"),
    (["rel_textcum.csv", "--range", "0", "1"], "'cumulative'"),
    (["rel_infcum.csv", "--range", "0", "1"], "'cumulative'"),
    (["loads.csv", "--range", "0", "1"], "sidecar"),
    (["garbage.csv", "--range", "0", "1"], "sidecar"),
    (["empty.csv", "--range", "0", "1"], "sidecar"),
    ([], "RELEASE"),
    (["rel.csv", "--range", "0", "1", "--json", "x"], "x"),
    (["rel.csv", "--range", "-5", "-1"], "'--range'"),
    (["rel.csv", "--range", "nan", "1"], "'--range'"),
]

_SHORT = ["--train", "96", "--horizon", "48"]  # the loads hold 192 steps
_F = ["loads.csv", "--out", "f.csv", *_SHORT]
FORECAST = [
    ([*_F, "--train", "0"], "'--train'"),
    ([*_F, "--train", "-1"], "'--train'"),
    ([*_F, "--train", "abc"], "'--train'"),
    ([*_F, "--train", "10000"], "RELEASED"),
    ([*_F, "--horizon", "0"], "'--horizon'"),
    ([*_F, "--horizon", "-3"], "'--horizon'"),
    ([*_F, "--horizon", "x"], "'--horizon'"),
    ([*_F, "--days", "0"], "'--days'"),
    ([*_F, "--days", "-1"], "'--days'"),
    ([*_F, "--days", "1.5"], "'--days'"),
    ([*_F, "--order", "-1", "0"], "'--order'"),
    ([*_F, "--order", "a", "b"], "'--order'"),
    ([*_F, "--order", "1"], "'--order'"),
    ([*_F, "--level", "0"], "'--level'"),
    ([*_F, "--level", "1.5"], "'--level'"),
    ([*_F, "--level", "abc"], "'--level'"),
    ([*_F, "--noise-variance", "-1"], "'--noise-variance'"),
    ([*_F, "--noise-variance", "nan"], "'--noise-variance'"),
    ([*_F, "--column", "nope"], "'--column'"),
    ([*_F, "--time-column", "nope"], "'--time-column'"),
    ([*_F, "--errors-out", "e.csv"], "'--errors-out'"),
    ([*_F, "--vs-real"], "'--vs-real'"),
    ([*_F, "--truth", "missing.csv"], "--truth"),
    ([*_F, "--truth", "notes.txt"], "--truth"),
    ([*_F, "--truth", "one.csv"], "'--column'"),
    ([*_F, "--truth", "loads.csv", "--errors-out", "e.txt"], "'--errors-out'"),
    ([*_F, "--truth", "loads.csv", "--errors-out", "missing/e.csv"], "'--errors-out'"),
    (["loads.csv", "--out", "f.txt"], "'--out'"),
    (["loads.csv", "--out", "missing/f.csv"], "'--out'"),
    (["loads.csv", "--out", "folder"], "'--out'"),
    (["loads.csv"], "'--out'"),
    (["missing.csv", "--out", "f.csv"], "RELEASED"),
    (["notes.txt", "--out", "f.csv"], "RELEASED"),
    (["unsorted.csv", "--out", "f.csv", *_SHORT], "RELEASED"),
    (["nan.csv", "--out", "f.csv", *_SHORT], "RELEASED"),
    ([*_F, "--frobnicate"], "--frobnicate"),
]

EXPORT = [
    (["nope", "x.csv"], "NAME"),
    (["", "x.csv"], "NAME"),
    (["REGIONAL", "x.csv"], "NAME"),
    (["regional.csv", "x.csv"], "NAME"),
    (["feeder", "x.csv"], "NAME"),
    (["household minutes", "x.csv"], "NAME"),
    (["nope", "x.txt"], "NAME"),
    (["regional"], "OUT"),
    ([], "NAME"),
    (["regional", "x.csv", "extra"], "extra"),
    (["regional", "x.csv", "--frobnicate"], "--frobnicate"),
] + [
    ([name, out], option)
    for name in ("regional", "feeders", "household", "household-minutes")
    for out, option in (
        ("x.txt", "OUT"),
        ("x", "OUT"),
        ("x.xlsx", "OUT"),
        ("missing/x.csv", "OUT"),
        ("folder", "OUT"),
        ("x.json", "OUT"),
    )
]

_P = ["--n", "100000", "--bound", "10"]
PLAN_PAK = [
    (["--bound", "10"], "'--n'"),
    (["--n", "1000"], "'--bound'"),
    (["--n", "0", "--bound", "10"], "'--n'"),
    (["--n", "-1", "--bound", "10"], "'--n'"),
    (["--n", "abc", "--bound", "10"], "'--n'"),
    (["--n", "1000", "--bound", "0"], "'--bound'"),
    (["--n", "1000", "--bound", "-1"], "'--bound'"),
    (["--n", "1000", "--bound", "nan"], "'--bound'"),
    (["--n", "1000", "--bound", "inf"], "'--bound'"),
    (["--n", "1000", "--bound", "abc"], "'--bound'"),
    ([*_P, "--epsilon", "0"], "'--epsilon'"),
    ([*_P, "--epsilon", "-1"], "'--epsilon'"),
    ([*_P, "--epsilon", "nan"], "'--epsilon'"),
    ([*_P, "--epsilon", "inf"], "'--epsilon'"),
    ([*_P, "--epsilon", "abc"], "'--epsilon'"),
    ([*_P, "--delta", "0"], "'--delta'"),
    ([*_P, "--delta", "1"], "'--delta'"),
    ([*_P, "--delta", "-1"], "'--delta'"),
    ([*_P, "--delta", "nan"], "'--delta'"),
    ([*_P, "--beta", "0"], "'--beta'"),
    ([*_P, "--beta", "1"], "'--beta'"),
    ([*_P, "--beta", "2"], "'--beta'"),
    ([*_P, "--p-max", "0"], "'--p-max'"),
    ([*_P, "--p-max", "1"], "'--p-max'"),
    ([*_P, "--p-max", "-0.1"], "'--p-max'"),
    ([*_P, "--m", "abc"], "'--time-lag'"),
    ([*_P, "--m", "0"], "'--time-lag'"),
    ([*_P, "--m", "-5"], "'--time-lag'"),
    ([*_P, "--prefix", "missing.csv"], "'--prefix'"),
    ([*_P, "--prefix", "prefix_two.csv"], "'--prefix'"),
    ([*_P, "--prefix", "prefix_text.csv"], "'--prefix'"),
    ([*_P, "--prefix", "garbage.csv"], "'--prefix'"),
    ([*_P, "--prefix", "prefix.npy", "--m", "6000"], "'--time-lag'"),
    ([*_P, "--plot", "fig.png"], "'--plot'"),
    ([*_P, "--prefix", "prefix.npy", "--plot", "fig.gif"], "'--plot'"),
    ([*_P, "--prefix", "prefix.npy", "--plot", "missing/fig.png"], "'--plot'"),
    ([*_P, "--prefix", "prefix.npy", "--plot", "folder"], "'--plot'"),
    ([*_P, "--frobnicate"], "--frobnicate"),
]

DEMO = [
    (["--epsilon", "0"], "'--epsilon'"),
    (["--epsilon", "-1"], "'--epsilon'"),
    (["--epsilon", "1e6"], "'--epsilon'"),
    (["--epsilon", "11"], "'--epsilon'"),
    (["--epsilon", "abc"], "'--epsilon'"),
    (["--epsilon", "nan"], "'--epsilon'"),
    (["--epsilon", "inf"], "'--epsilon'"),
    (["--epsilon"], "'--epsilon'"),
    (["--runs", "1"], "'--runs'"),
    (["--runs", "0"], "'--runs'"),
    (["--runs", "-1"], "'--runs'"),
    (["--runs", "abc"], "'--runs'"),
    (["--runs", "2.5"], "'--runs'"),
    (["--trials", "0"], "'--trials'"),
    (["--trials", "-1"], "'--trials'"),
    (["--trials", "abc"], "'--trials'"),
    (["--seed", "-1"], "'--seed'"),
    (["--seed", "abc"], "'--seed'"),
    (["--seed", "1.5"], "'--seed'"),
    (["--out", "notes.txt"], "'--out'"),
    (["--out", "notes.txt/report"], "'--out'"),
    (["--out", "one.csv"], "'--out'"),
    (["--out", "one.csv/a/b"], "'--out'"),
    (["--out"], "'--out'"),
    (["--frobnicate"], "--frobnicate"),
    (["--quick", "yes"], "yes"),
    (["--quiet=1"], "--quiet"),
    (["--runs", "1", "--trials", "5"], "'--runs'"),
    (["--epsilon", "0", "--quick"], "'--epsilon'"),
    (["--epsilon", "-inf", "--quick"], "'--epsilon'"),
    (["--trials", "1e3"], "'--trials'"),
]


def _cases() -> list:
    rows = []
    for method in RELEASE_METHODS:
        frame = method in ("optstream", "laplace", "dft", "pegasus")
        table = (_pipeline_cases if frame else _stream_cases)(method) + _ledger_cases(method)
        rows += [
            pytest.param(["release", method, *args], needle, id=f"release-{method}-{i}")
            for i, (args, needle) in enumerate(table)
        ]
    for command, table in (
        (["query"], QUERY),
        (["forecast"], FORECAST),
        (["data", "export"], EXPORT),
        (["plan", "pak"], PLAN_PAK),
        (["demo"], DEMO),
    ):
        rows += [
            pytest.param([*command, *args], needle, id=f"{'-'.join(command)}-{i}")
            for i, (args, needle) in enumerate(table)
        ]
    return rows


CASES = _cases()


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")
    }


def _charges(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT COUNT(*) FROM charges").fetchone()[0]
    finally:
        con.close()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bad-inputs")
    _write_inputs(root)
    return root


@pytest.mark.parametrize(("argv", "needle"), CASES)
def test_bad_input_is_refused_before_any_work(inputs, monkeypatch, capsys, argv, needle):
    monkeypatch.chdir(inputs)
    if argv[0] == "release" and "--ledger" not in argv and "--budget-epsilon" not in argv:
        argv = [*argv, "--ledger", "budget.db"]
    before = _snapshot(inputs)
    code = main(argv)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, captured.err
    assert len(lines) == 1, captured.err
    line = lines[0]
    assert line.startswith("Error: "), line
    assert needle in line, line
    for banned in ("Traceback", "this is a bug", "np.int64", "np.float64", "parameter of"):
        assert banned not in line, line
    assert _snapshot(inputs) == before  # no file written, none changed
    assert _charges(inputs / "budget.db") == 0
    assert _charges(inputs / "small.db") == 0


def test_every_sub_command_has_at_least_30_bad_inputs():
    counts: dict[str, int] = {}
    for case in CASES:
        argv = case.values[0]
        key = " ".join(argv[:2]) if argv[0] in ("release", "data", "plan") else argv[0]
        counts[key] = counts.get(key, 0) + 1
    expected = {f"release {m}" for m in RELEASE_METHODS} | {
        "query", "forecast", "data export", "plan pak", "demo",
    }  # fmt: skip
    assert set(counts) == expected
    assert min(counts.values()) >= 30, counts


def test_the_table_fixture_is_valid(inputs, monkeypatch, capsys, tmp_path):
    """The good baseline of each table succeeds, so each row fails for its own reason (each
    as the first release of its data: a fresh $DPSTREAM_HOME per command, so the baselines do
    not compose on the data set's ledger)."""
    monkeypatch.chdir(inputs)
    before = set(os.listdir(inputs))
    ok = [
        ["release", m, "loads.csv", "--epsilon", "1", "--alpha", "1", "--out", f"{m}.csv"]
        for m in ("optstream", "laplace", "dft", "pegasus")
    ] + [
        ["release", m, "one.csv", "--epsilon", "1", "--bound", "10", "--out", f"{m}.csv",
         *([] if m == "bt" else ["--time-lag", "300"])]
        for m in ("tops", "topl", "pak", "bt")
    ] + [
        ["query", "rel.csv", "--range", "0", "9"],
        ["plan", "pak", *_P],
        ["forecast", *_F, "--truth", "loads.csv", "--days", "1"],
    ]  # fmt: skip
    for i, argv in enumerate(ok):
        monkeypatch.setenv("DPSTREAM_HOME", str(tmp_path / f"home{i}"))
        assert main(argv) == 0, (argv, capsys.readouterr().err)
    written = set(os.listdir(inputs)) - before
    for m in RELEASE_METHODS:
        assert {f"{m}.csv", f"{m}.csv.privacy.json"} <= written
    assert {"f.csv", "f.csv.privacy.json", "f_errors.csv", "f_errors.csv.privacy.json"} <= written
    for name in written:
        os.remove(name)
