"""The input-frame layer: validation, hierarchy resolution, aggregates, period reshaping."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstream import load_regional, regional_hierarchy
from dpstream.pipelines._frames import (
    from_periods,
    prepare_frame,
    resolve_hierarchy,
    to_periods,
    value_neighbours,
)
from mechanisms import DomainError, ParameterError, WAlphaIndistinguishability, WEvent
from postproc import Hierarchy

SECRET = 987654.321  # a value that must never appear in a message


def frame(n=10, cols=("a", "b"), start=1.0):
    index = pd.date_range("2016-01-01", periods=n, freq="30min", name="time")
    data = {c: start + np.arange(n, dtype=float) + i for i, c in enumerate(cols)}
    return pd.DataFrame(data, index=index)


def test_leaves_aggregates_and_node_order():
    f = frame(cols=("a", "b", "c"))
    out = prepare_frame(f, owner="t", hierarchy={"top": ["x", "c"], "x": ["a", "b"]})
    assert out.nodes == ("top", "x", "c", "a", "b")
    assert out.leaves == ("c", "a", "b")
    assert list(out.level) == [0, 1, 1, 2, 2]
    assert out.n_levels == 3
    v = out.values
    np.testing.assert_allclose(v[:, 1], f["a"] + f["b"])
    np.testing.assert_allclose(v[:, 0], f["a"] + f["b"] + f["c"])
    assert not v.flags.writeable


def test_no_hierarchy_keeps_columns_as_one_flat_level():
    out = prepare_frame(frame(), owner="t")
    assert out.nodes == ("a", "b") and out.n_levels == 1 and out.hierarchy is None


def test_consistent_parent_column_is_accepted_and_rederived():
    f = load_regional().iloc[:96]
    out = prepare_frame(f, owner="t", hierarchy=regional_hierarchy())
    assert out.nodes[0] == "national"
    np.testing.assert_allclose(out.values[:, 0], f["national"], rtol=1e-12)


def test_parent_listed_as_a_column_that_disagrees_is_refused():
    f = frame()
    f["ab"] = SECRET
    with pytest.raises(DomainError, match="'ab'.*parent.*first at time stamp") as err:
        prepare_frame(f, owner="t", hierarchy={"ab": ["a", "b"]})
    assert "987654" not in str(err.value)
    f.iloc[1:, 2] = f.iloc[1:, 0] + f.iloc[1:, 1]  # disagrees at one step only
    with pytest.raises(DomainError) as one:
        prepare_frame(f, owner="t", hierarchy={"ab": ["a", "b"]})
    assert str(one.value) == str(err.value)  # the first step, never how many (issue 24)


def test_series_round_trips_as_a_series():
    s = frame()["a"]
    out = prepare_frame(s, owner="t")
    back = out.to_frame(out.values)
    assert isinstance(back, pd.Series) and back.name == "a"
    pd.testing.assert_index_equal(back.index, s.index)


def test_to_frame_is_aligned_to_the_input_index():
    f = frame(n=7).set_index(pd.Index(np.arange(10, 17)))
    out = prepare_frame(f, owner="t", hierarchy={"ab": ["a", "b"]})
    back = out.to_frame(out.values)
    assert list(back.columns) == ["ab", "a", "b"]
    pd.testing.assert_index_equal(back.index, f.index)


@pytest.mark.parametrize(
    ("value", "rule"),
    [(np.nan, "first NaN"), (np.inf, "first infinite"), (-SECRET, "first negative")],
)
def test_bad_values_are_neither_counted_nor_shown(value, rule):
    f = frame()
    f.iloc[3, 1] = value
    with pytest.raises(DomainError, match=rule) as one:
        prepare_frame(f, owner="release_x")
    f.iloc[5, 0] = value  # a second bad entry, later: the message must not change
    with pytest.raises(DomainError, match=rule) as two:
        prepare_frame(f, owner="release_x")
    msg = str(one.value)
    assert "'frame' argument of release_x" in msg
    assert "column 'b', time stamp 2016-01-01 01:30:00" in msg  # the first offending entry
    assert msg == str(two.value)  # no count of offending values
    assert "987654" not in msg and "inf" not in msg.replace("infinite", "")


def test_missing_policies_zero_and_unmeasured():
    f = frame(cols=("a", "b", "c"))
    f.iloc[3, 1] = np.nan
    tree = {"t": ["a", "b", "c"]}
    zero = prepare_frame(f, owner="t", hierarchy=tree, missing="zero")
    unm = prepare_frame(f, owner="t", hierarchy=tree, missing="unmeasured")
    assert zero.observed is None
    np.testing.assert_array_equal(zero.values, unm.values)  # aggregates over observed leaves
    assert zero.values[3, zero.nodes.index("b")] == 0.0
    want = np.ones((10, 4), dtype=bool)
    want[3, unm.nodes.index("b")] = False
    np.testing.assert_array_equal(unm.observed, want)
    assert prepare_frame(frame(), owner="t", missing="unmeasured").observed is None
    with pytest.raises(ParameterError, match="'missing' parameter of t must be one of"):
        prepare_frame(f, owner="t", missing="drop")
    g = f.copy()
    g.iloc[4, 0] = np.inf  # inf is never a missing reading
    with pytest.raises(DomainError, match="first infinite"):
        prepare_frame(g, owner="t", missing="unmeasured")


def test_values_above_the_declared_bound():
    f = frame()
    f.iloc[0, 0] = SECRET
    with pytest.raises(DomainError, match=r"\[0, 100\].*some leaf entries") as err:
        prepare_frame(f, owner="t", bound=100.0)
    assert "987654" not in str(err.value) and "1 leaf" not in str(err.value)
    prepare_frame(frame(), owner="t", bound=100.0)  # within the bound: fine


@pytest.mark.parametrize(
    ("mutate", "rule"),
    [
        (lambda f: f.iloc[:0], "at least 1 time step"),
        (lambda f: f.iloc[:, :0], "no columns"),
        (lambda f: f.iloc[::-1], "increasing time stamps"),
        (lambda f: pd.concat([f, f.iloc[-1:]]), "duplicated time stamp"),
        (lambda f: f.set_index(pd.Index([str(i) for i in range(len(f))])), "indexed by time"),
        (lambda f: f.assign(a=["x"] * len(f)), "not numeric"),
        (lambda f: f.values, "pandas DataFrame"),
    ],
)
def test_malformed_frames(mutate, rule):
    with pytest.raises(DomainError, match=rule):
        prepare_frame(mutate(frame()), owner="t")


def test_too_short():
    with pytest.raises(DomainError, match="at least 48 time step"):
        prepare_frame(frame(n=10), owner="t", min_length=48)


def test_missing_time_stamps():
    f = frame()
    f.index = f.index.where(np.arange(10) != 4)
    with pytest.raises(DomainError, match="1 missing time"):
        prepare_frame(f, owner="t")


@pytest.mark.parametrize(
    ("tree", "rule"),
    [
        ({"ab": ["a", "b", "zz"]}, "leaves that are not frame columns: \\['zz'\\]"),
        ({"x": ["a"]}, "does not name the frame column\\(s\\) \\['b'\\]"),
        ({"ab": ["a", "b"], "b": ["ab"]}, "not a tree"),
        ({"ab": []}, "not a tree"),
        (["a", "b"], "must be a mapping"),
    ],
)
def test_bad_hierarchies(tree, rule):
    with pytest.raises(ParameterError, match=rule):
        prepare_frame(frame(), owner="t", hierarchy=tree)


def test_resolve_accepts_a_hierarchy_object():
    h = Hierarchy(children={"ab": ["a", "b"]})
    assert resolve_hierarchy(h, ["a", "b"], "t") is h
    assert resolve_hierarchy(None, ["a"], "t") is None


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 200), nodes=st.integers(1, 4), w=st.integers(1, 60))
def test_periods_round_trip(n, nodes, w):
    values = np.arange(n * nodes, dtype=float).reshape(n, nodes)
    p = to_periods(values, w)
    assert p.full.shape == (n // w, nodes, w) and p.tail.shape == (nodes, n % w)
    assert p.n_steps == n and p.n_periods == -(-n // w)
    np.testing.assert_array_equal(from_periods(p.full, p.tail), values)
    if n >= w:  # period 0, node j holds the first w steps of stream j
        np.testing.assert_array_equal(p.full[0, -1], values[:w, -1])


def test_value_neighbours():
    a = value_neighbours(w=48, alpha=10.0, bound=None, owner="t")
    assert a.delta == 10.0 and a.unit == WAlphaIndistinguishability(w=48, alpha=10.0)
    b = value_neighbours(w=48, alpha=None, bound=500.0, owner="t")
    assert b.delta == 500.0 and b.unit == WEvent(w=48)
    assert value_neighbours(w=4, alpha=float("inf"), bound=2.0, owner="t").delta == 2.0
    with pytest.raises(ParameterError, match="'bound' parameter of t"):
        value_neighbours(w=48, alpha=None, bound=None, owner="t")
    with pytest.raises(ParameterError, match="'alpha' parameter of t"):
        value_neighbours(w=48, alpha=-1.0, bound=None, owner="t")
    with pytest.raises(ParameterError, match="'w' parameter of t"):
        value_neighbours(w=0, alpha=1.0, bound=None, owner="t")
