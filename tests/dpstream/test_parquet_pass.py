"""The blockwise validation pass over a Parquet file says what the whole-file pass says (issue 25).

Every defect of the messy meter files (``test_messy_files``) is written as long and as wide
Parquet and diagnosed by :func:`dpstream.io._parquet_pass.diagnose_parquet` forced into its
blockwise mode (tiny record batches and blocks that cut periods and stamps across batches); the
message must equal the one :func:`dpstream.io.read_readings` gives for the same readings read
whole. Then the CLI: a Parquet INPUT with ``--store`` is refused by the pass before the ledger or
the store exists.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from test_messy_files import DEFECTS, IDS, SECRET, _gap, _negative, clean

from dpstream import regional_hierarchy
from dpstream.cli import main
from dpstream.io import _parquet_pass as pp
from dpstream.io import read_readings
from mechanisms import DomainError, ParameterError

OWNER = "dpstream release optstream"
PARQUET_OK = [d for d in DEFECTS if d[0] != "unparseable time stamp"]  # typed stamps only


@pytest.fixture
def blockwise(monkeypatch):
    monkeypatch.setattr(pp, "WHOLE_CELLS", 0)  # every file in blocks
    monkeypatch.setattr(pp, "BLOCK_CELLS", 4 * 7)  # 7 steps of 4 series: blocks cut periods
    monkeypatch.setattr(pp, "_BATCH", 50)  # batches cut series and stamps


def _whole_message(path) -> str:
    with pytest.raises(DomainError) as err:
        read_readings(str(path), owner=OWNER)
    return str(err.value)


def _wide(long: pd.DataFrame) -> pd.DataFrame:
    """The wide twin of a long frame (only for defects a wide table can hold)."""
    return long.pivot(index="ds", columns="unique_id", values="y").rename_axis(None, axis=1)


@pytest.mark.parametrize(("name", "build", "rule", "where"), PARQUET_OK, ids=IDS[:7] + IDS[8:])
def test_blockwise_long_parquet_names_what_the_whole_pass_names(
    tmp_path, blockwise, name, build, rule, where
):
    path = tmp_path / "in.parquet"
    table = build(clean())
    if table["y"].dtype == object:  # text among the values: a string column, as in a CSV
        table["y"] = table["y"].astype(str)
    table.to_parquet(path, index=False)
    expected = _whole_message(path)
    with pytest.raises(DomainError) as err:
        pp.diagnose_parquet(path, owner=OWNER)
    assert str(err.value) == expected
    assert rule in expected and where in expected and "123456" not in expected


@pytest.mark.parametrize(
    "build", [_gap, _negative, lambda d: d.assign(y=d["y"].where(d.index != 300, np.inf))]
)
def test_blockwise_wide_parquet_names_what_the_whole_pass_names(tmp_path, blockwise, build):
    wide = _wide(build(clean())).reset_index().rename(columns={"ds": "time"})
    path = tmp_path / "wide.parquet"
    wide.to_parquet(path, index=False)
    expected = _whole_message(path)
    with pytest.raises(DomainError) as err:
        pp.diagnose_parquet(path, owner=OWNER)
    assert str(err.value) == expected


def test_blockwise_wide_rows_out_of_order_and_a_repeated_row(tmp_path, blockwise):
    wide = _wide(clean()).reset_index().rename(columns={"ds": "time"})
    for name, table in (
        ("order", pd.concat([wide.iloc[:60], wide.iloc[[10]], wide.iloc[60:]])),
        ("text", wide.assign(urban=wide["urban"].astype(str).where(wide.index != 77, "ERR"))),
    ):
        path = tmp_path / f"{name}.parquet"
        table.to_parquet(path, index=False)
        expected = _whole_message(path)
        with pytest.raises(DomainError) as err:
            pp.diagnose_parquet(path, owner=OWNER)
        assert str(err.value) == expected, name


def test_priorities_across_blocks(tmp_path, blockwise):
    """A negative early in the file and a duplicate late: the duplicate is named (as whole)."""
    d = _negative(clean())
    d = pd.concat([d, d.iloc[[len(d) - 1]]])  # the last row twice
    path = tmp_path / "two.parquet"
    d.to_parquet(path, index=False)
    expected = _whole_message(path)
    assert "duplicated" in expected
    with pytest.raises(DomainError, match="duplicated") as err:
        pp.diagnose_parquet(path, owner=OWNER)
    assert str(err.value) == expected


def test_clean_files_pass_in_blocks(tmp_path, blockwise):
    clean().to_parquet(tmp_path / "long.parquet", index=False)
    assert pp.diagnose_parquet(tmp_path / "long.parquet", owner=OWNER) is True
    wide = _wide(clean()).reset_index().rename(columns={"ds": "time"})
    wide.to_parquet(tmp_path / "wide.parquet", index=False)
    assert pp.diagnose_parquet(tmp_path / "wide.parquet", owner=OWNER) is False


def test_string_stamps_need_the_whole_pass(tmp_path, blockwise):
    clean().assign(ds=lambda d: d["ds"].astype(str)).to_parquet(tmp_path / "s.parquet")
    with pytest.raises(DomainError, match="Parquet timestamps or integers"):
        pp.diagnose_parquet(tmp_path / "s.parquet", owner=OWNER)
    with pytest.raises(ParameterError, match="could not be read as Parquet"):
        (tmp_path / "bad.parquet").write_text("not parquet")
        pp.diagnose_parquet(tmp_path / "bad.parquet", owner=OWNER)


def _snapshot(root):
    return {str(p): p.stat().st_size for p in root.rglob("*")}


@pytest.mark.parametrize(("name", "build", "rule", "where"), PARQUET_OK[:3], ids=IDS[:3])
def test_cli_parquet_with_store_goes_through_the_pass(
    tmp_path, capsys, blockwise, name, build, rule, where
):
    (tmp_path / "reg.json").write_text(json.dumps(regional_hierarchy()))
    build(clean()).to_parquet(tmp_path / "in.parquet", index=False)
    before = _snapshot(tmp_path)
    args = ["release", "optstream", str(tmp_path / "in.parquet"), "--epsilon", "1"]
    args += ["--alpha", "50", "--k", "10", "--hierarchy", str(tmp_path / "reg.json")]
    args += ["--store", str(tmp_path / "ops.db"), "--out", str(tmp_path / "out.parquet")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and rule in err[0] and where in err[0], err
    assert "INPUT" in err[0] and "123456" not in err[0] and str(SECRET) not in err[0]
    assert _snapshot(tmp_path) == before  # no store, no ledger, no output


def test_cli_parquet_with_store_refuses_a_timezone(tmp_path, capsys):
    clean().to_parquet(tmp_path / "in.parquet", index=False)
    args = ["release", "optstream", str(tmp_path / "in.parquet"), "--epsilon", "1"]
    args += ["--alpha", "50", "--timezone", "Europe/Paris"]
    args += ["--store", str(tmp_path / "ops.db"), "--out", str(tmp_path / "out.parquet")]
    assert main(args) == 2
    assert "'--timezone'" in capsys.readouterr().err
    assert not (tmp_path / "ops.db").exists()
