"""Real datasets bundled with dpstream, and their loaders.

Every loader reads a small gzip-compressed CSV shipped in ``dpstream/data`` (prepared by
``scripts/prepare_datasets.py`` from data files inside PyPI wheels; sources, licences and
processing are stated in ``dpstream/data/README.md``) and returns a fresh object the caller may
modify. Parsed files are cached, so a second call only copies.

==============================  =====================================================  ==========
loader                          content                                                licence
==============================  =====================================================  ==========
:func:`load_retail_invoices`    36,969 invoice totals (GBP), Online Retail II          CC BY 4.0
:func:`load_household`          one household, 30-min energy (Wh), 2007-2009           CC BY 4.0
:func:`household_minutes`       same household, per-minute power (kW), 2007            CC BY 4.0
:func:`load_simbench`           44 SimBench MV feeders, 30-min mean load (kW), 2016    ODbL 1.0
:func:`load_regional`           the 4 SimBench regions and their national total        ODbL 1.0
==============================  =====================================================  ==========
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

import numpy as np
import pandas as pd

from mechanisms import ParameterError
from mechanisms.core._validation import check_positive, check_probability, check_stream

__all__ = [
    "HOUSEHOLD_MINUTES_BOUND",
    "HOUSEHOLD_YEARS",
    "RETAIL_BOUND",
    "LightTailCheck",
    "household_hierarchy",
    "household_minutes",
    "household_minutes_stream",
    "light_tail_check",
    "load_household",
    "load_regional",
    "load_retail_invoices",
    "load_simbench",
    "regional_hierarchy",
    "retail_stream",
    "simbench_hierarchy",
]

RETAIL_BOUND: float = 10_000.0
"""Recommended public bound B (GBP) for :func:`retail_stream`: 74 of 36,969 totals exceed it."""

HOUSEHOLD_MINUTES_BOUND: float = 36.0
"""Public bound B (kW) for :func:`household_minutes_stream`: 36 kVA is the largest residential
supply contract in France (where the household is), a conservative bound of the kind PAK
assumes (its train data use B = 24 h). The stream's maximum is 10.67 kW."""

HOUSEHOLD_YEARS: tuple[int, ...] = (2007, 2008, 2009)
"""Calendar years bundled for :func:`load_household`."""

_HOUSEHOLD_LEAVES = ("kitchen", "laundry", "heating", "other")
_REGIONS = ("rural", "semiurban", "urban", "commercial")


_TIME_INDEXED = {"index_col": "time", "parse_dates": ["time"], "date_format": "%Y-%m-%d %H:%M"}
_READ_OPTIONS: dict[str, dict[str, object]] = {
    "retail_invoices.csv.gz": {"dtype": {"invoice": str}},
    "household_minutes_2007.csv.gz": {"dtype": np.float64, "skip_blank_lines": False},
    "household_power.csv.gz": _TIME_INDEXED,
    "simbench_feeders_2016.csv.gz": _TIME_INDEXED,
}


@functools.cache
def _read(name: str) -> pd.DataFrame:
    """Parse a bundled file once; callers must copy before handing the frame out."""
    with resources.files("dpstream").joinpath("data", name).open("rb") as fh:
        return pd.read_csv(fh, compression="gzip", **_READ_OPTIONS[name])


def load_retail_invoices() -> pd.DataFrame:
    """Return the Online Retail II invoice totals as an event stream, in time order.

    Returns
    -------
    pandas.DataFrame
        One row per invoice (36,969), indexed by the stream position (a ``RangeIndex`` named
        ``event``), with columns ``time`` (``datetime64``, minute resolution, UK local time),
        ``invoice`` (the invoice number, a string) and ``total`` (GBP, 2 decimals, > 0).
        Rows are sorted by time, ties by invoice number. Times are a column, not the index,
        because several invoices often share one minute.

    Notes
    -----
    Per invoice, total = sum of quantity x unit price over its lines; cancellations
    (invoice "C..."), bad-debt adjustments ("A..."), lines without customer or description and
    non-positive totals are dropped (see ``dpstream/data/README.md``). Unlike the supermarket
    data of [PAK19] §VII-A these are wholesale orders, and the totals are *not* light-tailed
    beyond their 0.005-quantile in the sense of [PAK19] Def. 12 (it holds on 4 % of the tail):
    see :func:`light_tail_check`.
    """
    frame = _read("retail_invoices.csv.gz").copy()
    frame["time"] = pd.to_datetime(frame["time"], format="%Y-%m-%d %H:%M")
    frame.index = pd.RangeIndex(len(frame), name="event")
    return frame


def retail_stream(clip_to: float | None = None) -> np.ndarray:
    """Return the invoice totals (GBP) as a float64 array in stream order.

    Parameters
    ----------
    clip_to : float or None, default None
        When given, values above it are replaced by it (e.g. ``clip_to=RETAIL_BOUND``), so that
        the stream lies in ``[0, clip_to]`` as mechanisms with a public bound B require. Nothing
        is clipped by default.
    """
    values = load_retail_invoices()["total"].to_numpy(dtype=np.float64, copy=True)
    if clip_to is not None:
        bound = check_positive(clip_to, "clip_to", "retail_stream")
        np.minimum(values, bound, out=values)
    return values


def household_hierarchy() -> dict[str, list[str]]:
    """Return the household hierarchy ``{"total": ["kitchen", "laundry", "heating", "other"]}``."""
    return {"total": list(_HOUSEHOLD_LEAVES)}


def load_household(year: int = 2007) -> pd.DataFrame:
    """Return one year of one household's energy use per half-hour, by sub-meter.

    Parameters
    ----------
    year : int, default 2007
        One of :data:`HOUSEHOLD_YEARS`: 2007 and 2009 give 17,520 rows, 2008 (leap) 17,568.

    Returns
    -------
    pandas.DataFrame
        ``DatetimeIndex`` named ``time``: start of each half-hour on the source's clock in
        Sceaux, France, which skips no hour and repeats none at daylight-saving changes.
        Columns ``kitchen`` (UCI sub_metering_1: dishwasher, oven, microwave), ``laundry``
        (sub_metering_2: washing machine, tumble drier, fridge, light), ``heating``
        (sub_metering_3: electric water heater and air conditioner), ``other`` (the rest of
        the active energy) and ``total`` (the sum of the four); Wh per half-hour, one decimal.

    Notes
    -----
    ``other`` = max(global active power x 1000/60 - sub-meters, 0) per minute, then summed:
    the source's global active power is a one-minute average in kW, and the sub-meters are Wh
    per minute. Missing minutes (0.75 % in 2007) are filled before summing: gaps up to one
    hour by linear interpolation, longer gaps by the same minutes one week earlier. See
    ``dpstream/data/README.md`` for counts.
    """
    if (
        isinstance(year, bool)
        or not isinstance(year, int | np.integer)
        or year not in HOUSEHOLD_YEARS
    ):
        raise ParameterError(
            f"The 'year' parameter of load_household must be one of {list(HOUSEHOLD_YEARS)}. "
            f"Got {year!r} instead."
        )
    frame = _read("household_power.csv.gz")
    out = frame.loc[str(int(year))].copy()
    out.index.freq = "30min"
    return out


def household_minutes(year: int = 2007) -> pd.Series:
    """Return the observed per-minute global active power (kW, 3 decimals) of 2007.

    The 3,931 missing minutes of 2007 are left out (not filled), so the ``DatetimeIndex`` has
    521,669 minutes with gaps. Only 2007 is bundled.
    """
    if isinstance(year, bool) or year != 2007:
        raise ParameterError(
            f"The 'year' parameter of household_minutes must be 2007 (the only bundled year). "
            f"Got {year!r} instead."
        )
    column = _read("household_minutes_2007.csv.gz")["global_active_power_kw"]
    index = pd.date_range("2007-01-01", periods=len(column), freq="min", name="time")
    series = pd.Series(column.to_numpy(copy=True), index=index, name="global_active_power_kw")
    return series.dropna()


def household_minutes_stream() -> np.ndarray:
    """Return the 521,669 observed per-minute powers (kW) of 2007 in time order.

    Light-tailed beyond its 0.005-quantile (5.826 kW) in the sense of [PAK19] Def. 12: a long
    stream for the PAK mechanism. The maximum is 10.67 kW; the source does not state the
    supply rating; :data:`HOUSEHOLD_MINUTES_BOUND` (36 kW) is the conservative public bound the
    demo uses.
    """
    return household_minutes().to_numpy(dtype=np.float64, copy=True)


def load_simbench(include_parents: bool = False) -> pd.DataFrame:
    """Return the SimBench 2016 feeder loads: mean active power (kW) per half-hour.

    Parameters
    ----------
    include_parents : bool, default False
        Also append the region columns and ``national`` (sums of their children, computed here
        from the rounded leaves, so consistency is exact up to float addition).

    Returns
    -------
    pandas.DataFrame
        17,568 rows (2016 is a leap year), ``DatetimeIndex`` named ``time`` (start of each
        half-hour, Central European Time without daylight saving, UTC+01:00), one column per leaf
        of :func:`simbench_hierarchy` (44: the feeders of four MV grids and each grid's
        substation load), kW with one decimal, non-negative.
    """
    frame = _read("simbench_feeders_2016.csv.gz").copy()
    frame.index.freq = "30min"
    if include_parents:
        hierarchy = simbench_hierarchy()
        for region in _REGIONS:
            frame[region] = frame[hierarchy[region]].sum(axis=1)
        frame["national"] = frame[list(_REGIONS)].sum(axis=1)
    return frame


def simbench_hierarchy() -> dict[str, list[str]]:
    """Return ``{parent: children}``: national -> regions -> leaves (the feeders).

    The regions are SimBench's four MV benchmark grid types, one grid each: ``rural``
    (MV1.101), ``semiurban`` (MV2.101), ``urban`` (MV3.101), ``commercial`` (MV4.101).
    """
    leaves = _read("simbench_feeders_2016.csv.gz").columns
    out: dict[str, list[str]] = {"national": list(_REGIONS)}
    for region in _REGIONS:
        out[region] = [c for c in leaves if c.split("_")[0] == region]
    return out


def regional_hierarchy() -> dict[str, list[str]]:
    """Return ``{"national": ["rural", "semiurban", "urban", "commercial"]}``."""
    return {"national": list(_REGIONS)}


def load_regional() -> pd.DataFrame:
    """Return the "regional -> national" streams of the hierarchical OptStream protocol.

    As in [FV19] §6.1.2 (a hierarchy of height 2: the national total as root, one leaf per
    region, 30-minute steps over 2016), built from SimBench instead of RTE's French regions:
    columns ``rural``, ``semiurban``, ``urban``, ``commercial`` (kW, the sums of their feeders
    in :func:`load_simbench`) and ``national`` (their sum); 17,568 rows. The hierarchy is
    :func:`regional_hierarchy`.
    """
    frame = load_simbench(include_parents=True)
    return frame[[*_REGIONS, "national"]].copy()


@dataclass(frozen=True, slots=True, kw_only=True)
class LightTailCheck:
    """The light-tail test of [PAK19] Def. 12 on an empirical distribution."""

    p: float
    """Tail probability p of the quantile."""
    quantile: float
    """x_p = inf{x : F(x) >= 1 - p} ([PAK19] Def. 11) on the ECDF F."""
    gamma: float
    """Rate of the comparison exponential, gamma = -ln(p) / x_p."""
    n_tail: int
    """Number of values x >= x_p at which the condition is checked."""
    fraction: float
    """Fraction of those values at which ECDF(x) >= 1 - exp(-gamma x)."""

    @property
    def holds(self) -> bool:
        """Whether the condition holds at every tail value (light-tailed beyond x_p)."""
        return self.fraction == 1.0


def light_tail_check(values: object, p: float = 0.005) -> LightTailCheck:
    """Check whether a sample is light-tailed beyond its p-quantile ([PAK19] Def. 12).

    The ECDF F is compared with the exponential CDF H(x) = 1 - exp(-gamma x) whose p-quantile
    equals the sample's, gamma = -ln(p) / x_p ([PAK19] Fact 1), at every sample value
    x >= x_p. [PAK19] §V-B uses p = 0.005 for its two datasets.

    Parameters
    ----------
    values : array_like
        Non-negative finite sample (e.g. :func:`retail_stream`); at least one value above 0.
    p : float, default 0.005
        Tail probability in (0, 1).
    """
    p = check_probability(p, "p", "light_tail_check", closed_low=False)
    x = np.sort(check_stream(values, "values", "light_tail_check", bound=np.inf))
    rank = max(int(np.ceil(x.size * (1.0 - p) - 1e-9)), 1)  # guard float error in n(1 - p)
    quantile = float(x[rank - 1])  # [PAK19 Def. 11]
    if quantile <= 0.0:
        raise ParameterError(
            "The 'values' argument of light_tail_check must have a positive p-quantile. "
            "Choose a smaller p."
        )
    tail = x[x >= quantile]
    ecdf = np.searchsorted(x, tail, side="right") / x.size
    with np.errstate(over="ignore"):  # a subnormal x_p gives gamma = inf and H = 1: fine
        gamma = -np.log(p) / quantile  # [PAK19 Def. 12]
        ok = ecdf >= -np.expm1(np.log(p) * (tail / quantile))  # H(x) = 1 - p^(x / x_p)
    return LightTailCheck(
        p=p, quantile=quantile, gamma=float(gamma), n_tail=int(tail.size), fraction=float(ok.mean())
    )
