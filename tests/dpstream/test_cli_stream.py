"""``dpstream release tops|topl|pak|bt`` and ``dpstream query``: run the commands."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import mechanisms
from dpstream.cli import cli, main
from dpstream.commands.query import read_release, sidecar_path
from planner import pak_defaults

B = 20.0
N, M = 3000, 1000


@pytest.fixture
def stream(tmp_path):
    x = np.round(np.random.default_rng(0).exponential(2.0, N).clip(0, B), 3)
    stamps = pd.date_range("2007-01-01", periods=N, freq="min", name="time")
    path = tmp_path / "power.csv"
    pd.DataFrame({"time": stamps, "kw": x}).to_csv(path, index=False)
    return path, x


def _run(args):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return result


def _query(path, ranges):
    args = ["query", str(path)]
    for i, j in ranges:
        args += ["--range", str(i), str(j)]
    out = _run([*args, "--json"]).output
    return [a["sum"] for a in json.loads(out.splitlines()[-1])["answers"]]


# input steps (the one indexing rule): the first M are withheld by the time lag
RANGES = [(M, N - 1), (M, M), (M + 17, M + 1500), (N - 1, N - 1), (M + 5, M + 1234)]


def test_help_lists_the_stream_methods_with_examples():
    out = _run(["release", "--help"]).output
    assert "tops|topl|pak|bt" in out and "dpstream release tops" in out
    out = _run(["query", "--help"]).output
    assert "Examples:" in out and "dpstream query tops.csv --range 65536 66535" in out


def test_tops_release_and_query_match_the_python_api(stream, tmp_path):
    path, x = stream
    out = tmp_path / "tops.csv"
    args = ["release", "tops", str(path), "--bound", str(B), "--epsilon", "0.5"]
    args += ["--epsilon-threshold", "0.2", "--time-lag", str(M), "--seed", "3", "--out", str(out)]
    result = _run(args)
    assert "NOT private" in result.output and "tops.csv.query.json" in result.output
    frame, meta = read_release(out)
    assert len(frame) == N and list(frame.columns) == ["value", "cumulative"]
    assert frame.index[M] == "2007-01-01 16:40:00"  # row k is input step k, with its stamp
    assert frame.index[0] == "2007-01-01 00:00:00" and frame.iloc[:M].isna().all().all()
    rel = mechanisms.tops_release(
        x, bound=B, epsilon_threshold=0.2, epsilon_perturb=0.5, time_lag=M, seed=3
    )
    assert np.allclose(frame["value"].iloc[M:], rel.values, rtol=0, atol=1e-9)
    assert np.allclose(frame["value"], rel.to_frame()["value"], rtol=0, atol=1e-9, equal_nan=True)
    assert meta["method"] == "tops" and meta["seeded"] is True and meta["time_lag"] == M
    assert meta["threshold"] == rel.threshold and meta["epsilon"] == 0.5
    assert meta["tops"]["leaf_size"] == rel.leaf_size and meta["tops"]["nodes_stored"] is False
    got = _query(out, RANGES)
    assert np.allclose(got, [rel.range_sum(i, j) for i, j in RANGES], rtol=1e-9, atol=1e-6)


def test_pak_release_and_query_match_pak_range_sum(stream, tmp_path):
    path, x = stream
    out = tmp_path / "pak.parquet"
    args = ["release", "pak", str(path), "--bound", str(B), "--epsilon", "1"]
    _run([*args, "--time-lag", str(M), "--delta", "1e-6", "--seed", "4", "--out", str(out)])
    planned = pak_defaults(n=N, bound=B, epsilon=1.0, delta=1e-6, time_lag=M)
    rel = mechanisms.pak_release(
        x, bound=B, epsilon=1.0, delta=1e-6, time_lag=M, seed=4, **planned.release_parameters()
    )
    got = _query(out, RANGES)
    assert np.allclose(got, [rel.range_sum(i, j) for i, j in RANGES], rtol=1e-9, atol=1e-6)
    meta = json.loads(sidecar_path(out).read_text())
    assert meta["delta"] == 1e-6 and meta["pak"]["prefix_sum_at_lag"] == rel.prefix_sums[M - 1]
    recorded = meta["privacy"]["parameters"]
    assert recorded["r"] == planned.r and recorded["eps1_share"] == planned.eps1_share
    assert recorded["parameters"] == "planned"
    # the paper's Table I choices stay reachable
    paper = tmp_path / "paper.csv"
    _run([*args, "--time-lag", str(M), "--delta", "1e-6", "--seed", "4", "--parameters", "paper",
          "--out", str(paper)])  # fmt: skip
    rel = mechanisms.pak_release(x, bound=B, epsilon=1.0, delta=1e-6, time_lag=M, seed=4)
    assert np.allclose(_query(paper, RANGES), [rel.range_sum(i, j) for i, j in RANGES])
    assert read_release(paper)[1]["privacy"]["parameters"]["r"] == 1.5


def test_bt_releases_every_step(stream, tmp_path):
    path, x = stream
    out = tmp_path / "bt.csv"
    args = ["release", "bt", str(path), "--bound", str(B), "--epsilon", "1", "--seed", "5"]
    _run([*args, "--counter", "binary_tree", "--out", str(out)])  # the paper's BT
    rel = mechanisms.binary_tree_release(x, epsilon=1.0, bound=B, seed=5)
    frame, meta = read_release(out)
    assert len(frame) == N and meta["time_lag"] == 0 and meta["counter"] == "binary_tree"
    got = _query(out, [(0, N - 1), (10, 20)])
    assert np.allclose(got, [rel.range_sum(0, N - 1), rel.range_sum(10, 20)], rtol=1e-9)


def test_bt_and_pak_use_the_best_counter_by_default(stream, tmp_path):
    path, x = stream
    out = tmp_path / "bt.csv"
    args = ["release", "bt", str(path), "--bound", str(B), "--epsilon", "1", "--seed", "5"]
    _run([*args, "--out", str(out)])
    rel = mechanisms.pak_release(
        x, bound=B, epsilon=1.0, delta=0.0, time_lag=1, threshold=False, seed=5
    )
    best = mechanisms.best_counter(N, epsilon=1.0, bound=B)
    assert rel.counter.counter == best != "binary_tree"
    frame, meta = read_release(out)
    assert meta["counter"] == best and meta["privacy"]["parameters"]["counter"] == best
    assert meta["delta"] == 0.0
    got = _query(out, [(0, N - 1), (10, 20)])
    assert np.allclose(got, [rel.range_sum(0, N - 1).estimate, rel.range_sum(10, 20).estimate])
    out = tmp_path / "pak.csv"
    args = ["release", "pak", str(path), "--bound", str(B), "--epsilon", "1", "--seed", "4"]
    _run([*args, "--time-lag", str(M), "--delta", "1e-6", "--out", str(out)])
    meta = read_release(out)[1]
    assert meta["counter"] == mechanisms.best_counter(N - M, epsilon=1.0, bound=1.0, delta=1e-6)
    out = tmp_path / "pak_bt.csv"
    _run([*args, "--time-lag", str(M), "--delta", "1e-6", "--counter", "binary_tree"]
         + ["--parameters", "paper", "--out", str(out)])  # fmt: skip
    assert read_release(out)[1]["privacy"]["parameters"]["counter"] == "binary_tree"


def test_topl_release_and_query(stream, tmp_path):
    path, x = stream
    out = tmp_path / "topl.csv"
    lag = 200  # ToPL's EM over the Square Wave reports grows with m: keep the test fast
    args = ["release", "topl", str(path), "--bound", str(B), "--epsilon", "2"]
    _run([*args, "--time-lag", str(lag), "--seed", "6", "--out", str(out)])
    rel = mechanisms.topl_release(x, bound=B, epsilon=2.0, time_lag=lag, seed=6)
    ranges = [*RANGES, (lag, N - 1)]
    got = _query(out, ranges)
    assert np.allclose(got, [rel.range_sum(i, j) for i, j in ranges], rtol=1e-9, atol=1e-6)
    assert "local" in read_release(out)[1]["guarantee"]
    errors, _ = _query_errors(out, ranges)  # exact: (j - i + 1) x the report's variance
    assert np.allclose(errors, [rel.range_sum(i, j).std_error for i, j in ranges], rtol=1e-9)


def test_single_column_parquet_without_time_column(tmp_path):
    x = np.random.default_rng(1).uniform(0, 5, 600)
    path = tmp_path / "s.parquet"
    pd.DataFrame({"load": x}).to_parquet(path)
    out = tmp_path / "o.csv"
    code = main(
        ["release", "tops", str(path), "--bound", "5", "--epsilon", "1", "--time-lag", "100"]
        + ["--smoother", "median", "--fanout", "4", "--out", str(out)]
    )
    assert code == 0
    frame, meta = read_release(out)
    assert frame.index.name == "step" and frame.index[100] == 100 and meta["seeded"] is False
    assert len(frame) == 600 and frame["value"].iloc[:100].isna().all()
    assert meta["tops"]["smoother"] == "median" and meta["tops"]["fanout"] == 4


def test_query_prints_tab_separated_answers(stream, tmp_path):
    path, _ = stream
    out = tmp_path / "bt.csv"
    _run(["release", "bt", str(path), "--bound", str(B), "--epsilon", "1", "--out", str(out)])
    result = _run(["query", str(out), "--range", "0", "9", "--range", "3", "3"])
    lines = result.output.strip().splitlines()
    # a header in words, the columns, then one row per range
    assert lines[0].startswith("# bt release of 'kw'") and "std_error" in lines[1]
    assert lines[2].split("\t") == ["i", "j", "sum", "std_error", "lo-95", "hi-95"]
    rows = [line.split("\t") for line in lines[3:]]
    assert [row[:2] for row in rows] == [["0", "9"], ["3", "3"]]
    frame, _ = read_release(out)
    assert float(rows[1][2]) == pytest.approx(frame["value"].iloc[3])
    se = float(rows[1][3])
    assert se > 0 and float(rows[1][4]) == pytest.approx(float(rows[1][2]) - 1.959964 * se)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["tops", "--epsilon", "1", "--bound", str(B)], "--time-lag"),
        (["tops", "--epsilon", "1", "--time-lag", "10"], "--bound"),
        (["pak", "--epsilon", "1", "--bound", "1", "--time-lag", "1000"], "lie in [0, 1]"),
        (["tops", "--epsilon", "0", "--bound", str(B), "--time-lag", "10"], "'--epsilon'"),
        (["tops", "--epsilon", "1", "--bound", str(B), "--time-lag", str(N)], "'--time-lag'"),
        (["bt", "--epsilon", "1", "--bound", str(B), "--column", "nope"], "--column"),
        (["bt", "--epsilon", "1", "--bound", str(B), "--hierarchy", "t.json"], "--hierarchy"),
    ],
)
def test_bad_stream_options_exit_2_with_one_line(stream, tmp_path, capsys, extra, message):
    path, _ = stream
    method, *rest = extra
    out = tmp_path / "o.csv"
    code = main(["release", method, str(path), *rest, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and not sidecar_path(out).exists()


def test_two_value_columns_need_column(tmp_path, capsys):
    path = tmp_path / "two.csv"
    pd.DataFrame({"a": [1.0] * 10, "b": [2.0] * 10}).to_csv(path, index=False)
    out = tmp_path / "o.csv"
    assert (
        main(["release", "bt", str(path), "--epsilon", "1", "--bound", "5", "--out", str(out)]) == 2
    )
    assert "--column" in capsys.readouterr().err
    args = ["release", "bt", str(path), "--epsilon", "1", "--bound", "5", "--column", "b"]
    assert main([*args, "--out", str(out)]) == 0
    assert read_release(out)[1]["column"] == "b"


def test_query_errors_exit_2(stream, tmp_path, capsys):
    path, _ = stream
    out = tmp_path / "bt.csv"
    _run(["release", "bt", str(path), "--bound", str(B), "--epsilon", "1", "--out", str(out)])
    assert main(["query", str(out), "--range", "0", str(N)]) == 2  # past the last step
    assert main(["query", str(out), "--range", "5", "4"]) == 2
    assert main(["query", str(tmp_path / "missing.csv"), "--range", "0", "1"]) == 2
    sidecar_path(out).unlink()
    assert main(["query", str(out), "--range", "0", "1"]) == 2
    err = capsys.readouterr().err
    assert "'--range' option" in err and "sidecar" in err
    pd.DataFrame({"value": [1.0]}).to_csv(tmp_path / "plain.csv")
    sidecar_path(tmp_path / "plain.csv").write_text('{"format": "other"}')
    assert main(["query", str(tmp_path / "plain.csv"), "--range", "0", "0"]) == 2


def test_query_ranges_count_input_steps_and_refuse_withheld_ones(stream, tmp_path, capsys):
    path, _ = stream
    out = tmp_path / "tops.csv"
    args = ["release", "tops", str(path), "--bound", str(B), "--epsilon", "1"]
    _run([*args, "--time-lag", str(M), "--seed", "8", "--out", str(out)])
    frame, meta = read_release(out)
    got = _query(out, [(M + 10, M + 19)])
    assert got[0] == pytest.approx(frame["value"].iloc[M + 10 : M + 20].sum())
    assert main(["query", str(out), "--range", str(M - 1), str(M + 5)]) == 2
    assert f"first {M} steps are withheld" in capsys.readouterr().err


def test_query_refuses_a_version_1_release_with_a_clear_message(stream, tmp_path, capsys):
    path, _ = stream
    out = tmp_path / "bt.csv"
    _run(["release", "bt", str(path), "--bound", str(B), "--epsilon", "1", "--out", str(out)])
    side = sidecar_path(out)
    meta = json.loads(side.read_text())
    side.write_text(json.dumps({**meta, "version": 1}))
    assert main(["query", str(out), "--range", "0", "9"]) == 2
    err = capsys.readouterr().err
    assert "version 1" in err and "release it again" in err


def _query_errors(path, ranges):
    args = ["query", str(path)]
    for i, j in ranges:
        args += ["--range", str(i), str(j)]
    payload = json.loads(_run([*args, "--json"]).output.splitlines()[-1])
    return [a["std_error"] for a in payload["answers"]], payload["std_error"]


def test_query_std_errors_equal_the_mechanisms_exact_ones(stream, tmp_path):
    """pak and bt: the query's error, rebuilt from the sidecar's public parameters, is the
    mechanism's own exact range error."""
    path, x = stream
    out = tmp_path / "pak.csv"
    args = ["release", "pak", str(path), "--bound", str(B), "--epsilon", "1", "--seed", "4"]
    _run([*args, "--time-lag", str(M), "--delta", "1e-6", "--out", str(out)])
    planned = pak_defaults(n=N, bound=B, epsilon=1.0, delta=1e-6, time_lag=M)
    rel = mechanisms.pak_release(
        x, bound=B, epsilon=1.0, delta=1e-6, time_lag=M, seed=4, **planned.release_parameters()
    )
    got, note = _query_errors(out, RANGES)
    assert np.allclose(got, [rel.range_sum(i, j).std_error for i, j in RANGES], rtol=1e-9)
    assert "clipping" in note and "cannot be estimated" in note
    for counter in ("binary_tree", "auto"):
        out = tmp_path / f"bt_{counter}.csv"
        args = ["release", "bt", str(path), "--bound", str(B), "--epsilon", "1", "--seed", "5"]
        _run([*args, "--counter", counter, "--out", str(out)])
        if counter == "binary_tree":
            rel = mechanisms.binary_tree_release(x, epsilon=1.0, bound=B, seed=5)
        else:
            rel = mechanisms.pak_release(
                x, bound=B, epsilon=1.0, delta=0.0, time_lag=1, threshold=False, seed=5
            )
        ranges = [(0, N - 1), (10, 20), (5, 5)]
        got, _ = _query_errors(out, ranges)
        assert np.allclose(got, [rel.range_sum(i, j).std_error for i, j in ranges], rtol=1e-9)


def test_tops_query_std_errors_are_calibrated():
    """Over seeded ToPS perturbations (θ = B: no clipping) the empirical RMSE of block-aligned,
    partial and tiny ranges is within 0.8-1.25x the stated error."""
    from dpstream.commands.query import range_std_errors

    x = np.random.default_rng(0).exponential(2.0, 3000).clip(0, B)  # test data, not released
    ranges = [(160, 639), (5, 2000), (0, 15), (33, 34), (100, 2900)]
    answers = []
    for seed in range(150):
        rel = mechanisms.tops_perturb(x, threshold=B, bound=B, epsilon=1.0, seed=seed)
        answers.append([rel.range_sum(i, j) for i, j in ranges])
    tops = {"leaf_size": rel.leaf_size, "fanout": rel.fanout, "levels": rel.levels}
    tops.update(tree_size=rel.tree_size, node_variance=rel.noise.variance)
    meta = {"method": "tops", "time_lag": 0, "released_steps": rel.n, "tops": tops}
    stated, note = range_std_errors(meta, ranges)
    truth = [x[i : j + 1].sum() for i, j in ranges]
    rmse = np.sqrt(((np.array(answers) - truth) ** 2).mean(axis=0))
    ratio = rmse / np.array(stated)
    assert ((ratio > 0.8) & (ratio < 1.25)).all(), ratio.round(3)
    assert "clipping" in note
    # past the last complete leaf block there is no closed form: NaN, not a guess
    assert np.isnan(range_std_errors(meta, [(2995, 2999)])[0][0])
