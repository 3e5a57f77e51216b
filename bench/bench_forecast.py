"""Benchmark: a month of day-ahead ARMA(1,1) forecasts, our fit options vs statsmodels' default.

One series (``dpstream.load_regional()["rural"]``), February 2016: 29 origins, each an
ARMA(1, 1) + constant fitted on the previous 1,344 half-hours and a 48-step forecast with its
95 % interval ([FV19] §6.1.3). The baseline is statsmodels' default,
``ARIMA(x, order=(1, 0, 1)).fit()`` then ``get_forecast(48)``; ours is
``forecasting.rolling_forecast`` (``cov_type="none"``, ``return_params=True`` + one filter
pass). Runs alternate (best of ``--repeat``), in the same process, one BLAS thread by default
(set OPENBLAS_NUM_THREADS to change it). Prints each time, the ratio, and the largest
disagreement of the forecasts and intervals (expected: 0).

Usage: ``python bench/bench_forecast.py [--repeat 3] [--column rural] [--month 2]``.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # tiny Kalman-filter solves: BLAS threads only contend

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from statsmodels.tsa.arima.model import ARIMA  # noqa: E402

import dpstream  # noqa: E402
from forecasting import rolling_forecast  # noqa: E402

TRAIN, H = 1344, 48


def default_fits(values: np.ndarray, origins: np.ndarray) -> np.ndarray:
    """statsmodels' defaults: (origins, H, 3) forecasts, lower, upper."""
    out = np.empty((origins.size, H, 3))
    for i, o in enumerate(origins):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence warnings (we flag, statsmodels warns)
            res = ARIMA(values[o - TRAIN : o], order=(1, 0, 1)).fit()
        pred = res.get_forecast(H)
        out[i, :, 0] = pred.predicted_mean
        out[i, :, 1:] = pred.conf_int(alpha=0.05)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--column", default="rural")
    parser.add_argument("--month", type=int, default=2)
    args = parser.parse_args()
    series = dpstream.load_regional()[args.column]
    first = pd.Timestamp(2016, args.month, 1)
    last = first + pd.offsets.MonthEnd(0) + pd.Timedelta(hours=23, minutes=30)
    series = series.loc[first - pd.Timedelta(days=28) : last]
    values = series.to_numpy()
    origins = np.arange(TRAIN, values.size - H + 1, H)
    print(
        f"{args.column}, {first:%B %Y}: {origins.size} origins x ARMA(1,1) on {TRAIN} steps, "
        f"{H}-step forecasts; BLAS threads: {os.environ['OPENBLAS_NUM_THREADS']}"
    )
    t_ref, t_ours = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        ref = default_fits(values, origins)
        t_ref.append(time.perf_counter() - start)
        start = time.perf_counter()
        ours = rolling_forecast(series)
        t_ours.append(time.perf_counter() - start)
    got = ours[["forecast", "lower", "upper"]].to_numpy().reshape(origins.size, H, 3)
    diff = np.abs(got - ref).max(axis=(0, 1))
    print(f"statsmodels default fit():  {min(t_ref):7.2f} s (best of {args.repeat})")
    print(f"forecasting.rolling_forecast: {min(t_ours):5.2f} s")
    print(f"speed-up: {min(t_ref) / min(t_ours):.2f}x")
    print(
        f"largest |difference|: forecast {diff[0]:.3g}, lower {diff[1]:.3g}, upper {diff[2]:.3g} "
        f"(kW; loads ~{np.mean(values):.0f} kW); converged: {ours['converged'].mean():.0%}"
    )


if __name__ == "__main__":
    main()
