"""Integrity of the bundled datasets and their loaders (dpstream.datasets)."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstream import (
    HOUSEHOLD_YEARS,
    RETAIL_BOUND,
    household_hierarchy,
    household_minutes,
    household_minutes_stream,
    light_tail_check,
    load_household,
    load_regional,
    load_retail_invoices,
    load_simbench,
    regional_hierarchy,
    retail_stream,
    simbench_hierarchy,
)
from mechanisms import DomainError, ParameterError


def _check_time_index(frame: pd.DataFrame, rows: int) -> None:
    assert isinstance(frame.index, pd.DatetimeIndex)
    assert len(frame) == rows
    assert frame.index.is_monotonic_increasing and frame.index.is_unique
    assert ((frame.index[1:] - frame.index[:-1]) == pd.Timedelta(minutes=30)).all()
    assert not frame.isna().to_numpy().any()
    assert (frame.to_numpy() >= 0).all()


def _check_sums(frame: pd.DataFrame, hierarchy: dict[str, list[str]], tol: float) -> None:
    for parent, children in hierarchy.items():
        gap = np.abs(frame[parent].to_numpy() - frame[children].sum(axis=1).to_numpy())
        assert gap.max() <= tol, parent


def test_bundled_files_have_a_readme_and_fit_the_size_budget():
    data = resources.files("dpstream").joinpath("data")
    files = [f for f in data.iterdir() if f.name.endswith(".csv.gz")]
    assert {f.name for f in files} == {
        "retail_invoices.csv.gz",
        "household_power.csv.gz",
        "household_minutes_2007.csv.gz",
        "simbench_feeders_2016.csv.gz",
    }
    assert sum(len(f.read_bytes()) for f in files) < 6_000_000
    readme = data.joinpath("README.md").read_text()
    for f in files:
        assert f.name in readme
    for licence in ("CC BY 4.0", "ODbL"):
        assert licence in readme


# ----------------------------------------------------------------------------- retail


def test_retail_invoices_are_a_positive_stream_in_time_order():
    frame = load_retail_invoices()
    assert list(frame.columns) == ["time", "invoice", "total"]
    assert len(frame) == 36_969
    assert isinstance(frame.index, pd.RangeIndex) and frame.index.name == "event"
    assert not frame.isna().to_numpy().any()
    assert (frame["total"] > 0).all()
    assert frame["time"].is_monotonic_increasing
    # ties in time are ordered by invoice number; invoices are unique and never cancellations
    key = list(zip(frame["time"], frame["invoice"].astype(int), strict=True))
    assert key == sorted(key)
    assert frame["invoice"].is_unique and frame["invoice"].str.fullmatch(r"\d+").all()
    assert frame["time"].min() >= pd.Timestamp("2009-12-01")
    assert frame["time"].max() <= pd.Timestamp("2011-12-10")
    np.testing.assert_array_equal(frame["total"].round(2), frame["total"])


def test_retail_loader_returns_fresh_objects():
    first = load_retail_invoices()
    first.loc[0, "total"] = -1.0
    assert load_retail_invoices().loc[0, "total"] > 0
    stream = retail_stream()
    stream[0] = -1.0
    assert retail_stream()[0] > 0


def test_retail_stream_clips_only_when_asked():
    raw = retail_stream()
    assert raw.dtype == np.float64 and raw.max() > RETAIL_BOUND
    clipped = retail_stream(clip_to=RETAIL_BOUND)
    assert clipped.max() == RETAIL_BOUND
    assert int((raw > RETAIL_BOUND).sum()) == 74  # 0.20 %, as the README states
    np.testing.assert_array_equal(clipped, np.minimum(raw, RETAIL_BOUND))
    with pytest.raises(ParameterError, match="'clip_to' parameter of retail_stream"):
        retail_stream(clip_to=-3.0)


def test_retail_totals_are_not_light_tailed_beyond_their_0005_quantile():
    check = light_tail_check(retail_stream(), p=0.005)
    assert check.quantile == pytest.approx(5493.5)
    assert check.n_tail == 185
    assert not check.holds
    assert check.fraction == pytest.approx(8 / 185)


# ----------------------------------------------------------------------------- household


@pytest.mark.parametrize("year", HOUSEHOLD_YEARS)
def test_household_year_is_a_consistent_half_hour_hierarchy(year):
    frame = load_household(year)
    rows = 17_568 if year == 2008 else 17_520
    _check_time_index(frame, rows)
    assert frame.index[0] == pd.Timestamp(f"{year}-01-01")
    assert frame.index.freqstr == "30min"
    hierarchy = household_hierarchy()
    assert hierarchy == {"total": ["kitchen", "laundry", "heating", "other"]}
    assert list(frame.columns) == [*hierarchy["total"], "total"]
    _check_sums(frame, hierarchy, tol=0.05 + 1e-9)
    # a half-hour cannot hold more than 30 minutes at the 10.67 kW peak: < 5,400 Wh
    assert frame["total"].max() < 30 * 12_000 / 60


def test_household_default_year_and_bad_years():
    assert load_household().index[0].year == 2007
    for bad in (2006, 2010, "2007", True, 2007.0):
        with pytest.raises(ParameterError, match="'year' parameter of load_household"):
            load_household(bad)
    with pytest.raises(ParameterError, match="'year' parameter of household_minutes"):
        household_minutes(2008)


def test_household_total_is_light_tailed():
    check = light_tail_check(load_household(2007)["total"], p=0.005)
    assert check.holds and check.n_tail == 88


def test_household_minutes_2007():
    series = household_minutes()
    assert len(series) == 525_600 - 3_931
    assert series.index.is_monotonic_increasing and series.index.is_unique
    assert series.index.year.unique().tolist() == [2007]
    assert pd.Timestamp("2007-04-29 12:00") not in series.index  # inside the 3,723-minute gap
    assert series.index[0] == pd.Timestamp("2007-01-01 00:00")
    assert not series.isna().any() and (series >= 0).all()
    stream = household_minutes_stream()
    np.testing.assert_array_equal(stream, series.to_numpy())
    assert stream.max() == pytest.approx(10.67)
    # per-minute energy agrees with the half-hour totals where nothing was missing
    half = load_household(2007)
    wh = (series * 1000 / 60).resample("30min").agg(["sum", "size"])
    full = wh["size"] == 30
    gap = (half.loc[full.index[full], "total"] - wh.loc[full, "sum"]).to_numpy()
    assert full.sum() > 17_000
    assert (gap >= -0.05 - 1e-9).all()  # total >= metered energy (remainder clipped at 0)
    assert np.median(np.abs(gap)) <= 0.05


def test_household_minutes_are_light_tailed_beyond_their_0005_quantile():
    check = light_tail_check(household_minutes_stream(), p=0.005)
    assert check.quantile == pytest.approx(5.826)
    assert check.holds and check.n_tail == 2_611


# ----------------------------------------------------------------------------- simbench


def test_simbench_leaves_are_a_2016_half_hour_panel():
    frame = load_simbench()
    _check_time_index(frame, 17_568)
    assert frame.index[0] == pd.Timestamp("2016-01-01 00:00")
    assert frame.index[-1] == pd.Timestamp("2016-12-31 23:30")
    assert frame.shape[1] == 44
    np.testing.assert_array_equal(frame.round(1), frame)
    assert (frame.std() > 0).all()  # every leaf varies
    assert not frame.T.duplicated().any()  # no two leaves identical


def test_simbench_hierarchy_names_are_consistent():
    hierarchy = simbench_hierarchy()
    leaves = list(load_simbench().columns)
    assert hierarchy["national"] == ["rural", "semiurban", "urban", "commercial"]
    children = [c for region in hierarchy["national"] for c in hierarchy[region]]
    assert children == leaves  # every leaf under exactly one region, in column order
    assert set(hierarchy) == {"national", *hierarchy["national"]}
    assert regional_hierarchy() == {"national": hierarchy["national"]}
    hierarchy["national"].append("x")  # a fresh dict each call
    assert "x" not in simbench_hierarchy()["national"]


def test_simbench_parents_sum_children():
    frame = load_simbench(include_parents=True)
    assert frame.shape[1] == 44 + 5
    _check_sums(frame, simbench_hierarchy(), tol=1e-6)
    regional = load_regional()
    _check_time_index(regional, 17_568)
    assert list(regional.columns) == ["rural", "semiurban", "urban", "commercial", "national"]
    _check_sums(regional, regional_hierarchy(), tol=1e-6)
    pd.testing.assert_frame_equal(regional, frame[regional.columns])
    # national load of the four MV grids (133 MW installed): 10-55 MW, mean about 23 MW
    assert 20_000 < regional["national"].mean() < 27_000
    assert regional["national"].max() < 60_000


def test_simbench_national_is_light_tailed():
    assert light_tail_check(load_regional()["national"]).holds


# ----------------------------------------------------------------------------- light_tail_check


def test_light_tail_check_known_answers():
    # exponential quantiles are exactly on the boundary: holds
    n = 2_000
    probs = (np.arange(n) + 0.5) / n
    expo = -np.log1p(-probs)
    assert light_tail_check(expo, p=0.01).holds
    # a Pareto tail (alpha = 1) is heavier than any exponential: fails on most of the tail
    pareto = 1.0 / (1.0 - probs)
    check = light_tail_check(pareto, p=0.01)
    assert not check.holds and check.fraction < 0.5
    # values bounded just above the quantile: light-tailed
    assert light_tail_check(np.minimum(expo, 5.0), p=0.01).holds


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(0.0, 1e6, allow_nan=False), min_size=1, max_size=200),
    st.floats(0.001, 0.5),
)
def test_light_tail_check_quantile_definition(values, p):
    x = np.asarray(values)
    if (x <= 0).all():
        with pytest.raises(ParameterError):
            light_tail_check(x, p=p)
        return
    try:
        check = light_tail_check(x, p=p)
    except ParameterError:
        assert np.mean(x <= 0) >= 1 - p - 1e-9
        return
    # Def. 11: x_p is the smallest sample value with ECDF >= 1 - p
    assert np.mean(x <= check.quantile) >= 1 - p - 1e-12
    assert np.mean(x < check.quantile) < 1 - p + 1e-12
    assert check.n_tail == int((x >= check.quantile).sum())
    assert 0.0 <= check.fraction <= 1.0


def test_light_tail_check_rejects_bad_input():
    with pytest.raises(ParameterError, match="'p' parameter of light_tail_check"):
        light_tail_check([1.0, 2.0], p=0.0)
    with pytest.raises(DomainError):
        light_tail_check([1.0, np.nan])
    with pytest.raises(DomainError):
        light_tail_check([1.0, -2.0])
