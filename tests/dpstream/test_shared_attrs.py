"""A release's large ``attrs`` are shared by the frames derived from it, not copied per column."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pandas as pd
import pytest

from dpstream import release_optstream
from dpstream.pipelines._shared import SharedArray, SharedDict, share


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    idx = pd.date_range("2016-01-01", periods=48 * 3, freq="30min")
    base = 50 + 20 * np.sin(2 * np.pi * np.arange(idx.size) / 48)
    return pd.DataFrame({c: base + rng.normal(0, 3, idx.size) for c in "abcd"}, index=idx)


TREE = {"total": ["ab", "cd"], "ab": ["a", "b"], "cd": ["c", "d"]}


@pytest.mark.parametrize(("k", "key"), [("auto", "measurements"), (6, "estimates")])
def test_a_column_shares_the_release_arrays(frame, k, key):
    out = release_optstream(
        frame, epsilon=1.0, alpha=5.0, hierarchy=TREE, k=k, seed=3, ledger=False
    )
    column = out["a"]  # pandas deep-copies attrs into the column
    mine, theirs = out.attrs[key], column.attrs[key]
    if key == "estimates":
        mine, theirs = mine[0]["estimates"], theirs[0]["estimates"]
    assert isinstance(mine, SharedArray) and theirs is mine
    assert not mine.flags.writeable
    with pytest.raises(ValueError):
        mine[0, 0] = 1.0
    assert column.attrs["hierarchy"] is out.attrs["hierarchy"]  # shared too, and read-only
    assert out.attrs["hierarchy"] == TREE
    with pytest.raises(TypeError):
        out.attrs["hierarchy"]["total"] = ["a"]
    back = pickle.loads(pickle.dumps(out))  # a release still pickles
    assert isinstance(back.attrs["hierarchy"], SharedDict) and back.attrs["hierarchy"] == TREE


def test_shared_array_rules():
    base = np.arange(6.0).reshape(2, 3)
    s = share(base)
    assert copy.deepcopy(s) is s and copy.copy(s) is s
    assert isinstance(s[0], SharedArray) and not s[0].flags.writeable  # views stay shared
    doubled = s * 2  # a result computed from it is an ordinary, writable array
    assert type(doubled) is np.ndarray and doubled.flags.writeable
    np.testing.assert_array_equal(doubled, base * 2)
    assert type(s.sum()) is not SharedArray and float(s.sum()) == 15.0
    assert type(np.asarray(s, dtype=np.float64)) is np.ndarray
    assert share(None) is None
