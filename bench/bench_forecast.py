"""Benchmark: a month of rolling day-ahead forecasts, ours vs statsmodels (issue 16 item 3).

One series (``dpstream.load_regional()["rural"]``), February 2016: 29 origins, each model
refitted on the previous 1,344 half-hours and forecasting 48 steps with a 95 % interval
([FV19] §6.1.3). All ratios are measured in this process, runs alternating, best of
``--repeat``:

1. ARMA(1, 1) + constant: statsmodels' default ``ARIMA(x, order=(1, 0, 1)).fit()`` then
   ``get_forecast(48).conf_int()`` against ``rolling_forecast(model="arma")`` (profile
   likelihood, warm starts; :mod:`forecasting._arma`). Also printed: the smallest
   (llf_ours − llf_statsmodels) / |llf_statsmodels| over the origins (must be >= −1e-6) and
   the largest forecast difference. statsforecast's ARIMA if it is installed (optional).
2. Seasonal models: ``model="sarima"`` against statsmodels' default fit of the same model
   (``ARIMA(d[s:], exog=d[:-s], order=(1, 0, 1)).fit()``, d the seasonal difference), with the
   same likelihood check; one likelihood evaluation of the full state-space
   ``SARIMAX(order=(1, 0, 1), seasonal_order=(1, 1, 0, 48))`` against our whole fit;
   ``model="holt-winters"`` (heuristic initial states) against statsmodels' default
   ``ExponentialSmoothing(...).fit()`` (estimated initial states), with both MAPEs.
3. Threads (issue 16 item 4): statsmodels' default fits with the BLAS threads the environment
   gives, the same inside ``threadpool_limits(1)``, and ours (which limits itself), idle and
   with ``--load`` busy processes started (and stopped) by this script (5 origins each). Do
   not set OPENBLAS_NUM_THREADS: the point is that the library needs no such setting. Parts 1
   and 2 run both sides with one BLAS thread (``threadpool_limits``), so that their ratios
   measure the fitting, not the threads.

Usage: ``python bench/bench_forecast.py [--repeat 3] [--column rural] [--month 2] [--load 2]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import pandas as pd
from statsmodels.tsa.arima.model import ARIMA
from threadpoolctl import threadpool_info, threadpool_limits

import dpstream
from forecasting import rolling_forecast
from forecasting._arma import fit_model
from forecasting._profile_mle import profile_loglike
from forecasting._seasonal import sarima

TRAIN, H = 1344, 48


def statsmodels_arma(values: np.ndarray, origins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """statsmodels' defaults: (origins, H) forecasts and each origin's llf."""
    out, llf = np.empty((origins.size, H)), np.empty(origins.size)
    for i, o in enumerate(origins):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence warnings (we flag, statsmodels warns)
            res = ARIMA(values[o - TRAIN : o], order=(1, 0, 1)).fit()
        pred = res.get_forecast(H)
        pred.conf_int(alpha=0.05)
        out[i], llf[i] = pred.predicted_mean, res.llf
    return out, llf


def statsmodels_sarima(values: np.ndarray, origins: np.ndarray) -> np.ndarray:
    """statsmodels' default fit of the seasonal model as ``rolling_forecast`` states it: llf."""
    llf = np.empty(origins.size)
    for i, o in enumerate(origins):
        x = values[o - TRAIN : o]
        d = x[H:] - x[:-H]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = ARIMA(d[H:], exog=d[:-H], order=(1, 0, 1)).fit()
        res.get_forecast(H, exog=d[-H:]).conf_int(alpha=0.05)
        llf[i] = res.llf
    return llf


def statsmodels_holt_winters(values: np.ndarray, origins: np.ndarray) -> np.ndarray:
    from statsmodels.tsa.holtwinters import ExponentialSmoothing

    out = np.empty((origins.size, H))
    for i, o in enumerate(origins):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = ExponentialSmoothing(values[o - TRAIN : o], seasonal="add", seasonal_periods=H)
            out[i] = model.fit().forecast(H)
    return out


def best(fn, repeat: int, threads: int | None = 1) -> tuple[float, object]:
    """Best time of ``repeat`` runs; BLAS limited to ``threads`` (None: as the environment)."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        if threads is None:
            result = fn()
        else:
            with threadpool_limits(limits=threads, user_api="blas"):
                result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def mape(forecasts: np.ndarray, values: np.ndarray, origins: np.ndarray) -> float:
    truth = np.stack([values[o : o + H] for o in origins])
    return float(np.mean(np.abs(forecasts - truth) / truth) * 100)


def part_arma(series: pd.Series, values: np.ndarray, origins: np.ndarray, repeat: int) -> None:
    t_ref, (ref, ref_llf) = best(lambda: statsmodels_arma(values, origins), repeat)
    t_ours, ours = best(lambda: rolling_forecast(series, model="arma"), repeat)
    warm: dict = {}
    llf = np.array(
        [fit_model(values[o - TRAIN : o], (1, 0, 1), None, warm)[0].loglike for o in origins]
    )
    margin = (llf - ref_llf) / np.abs(ref_llf)
    got = ours["forecast"].to_numpy().reshape(origins.size, H)
    print("1. ARMA(1, 1), a month of rolling day-ahead forecasts (one BLAS thread for both)")
    print(f"   statsmodels default fit():      {t_ref:6.2f} s")
    print(f"   rolling_forecast(model='arma'): {t_ours:6.2f} s   ratio {t_ours / t_ref:.2f}x")
    print(
        f"   log-likelihood, ours vs statsmodels: min relative margin {margin.min():+.2e} "
        f"(>= -1e-6 required), better at {np.mean(margin > 1e-12):.0%} of origins; largest "
        f"forecast difference {np.abs(got - ref).max():.3g} kW"
    )
    print(
        f"   MAPE: statsmodels {mape(ref, values, origins):.2f} %, ours "
        f"{mape(got, values, origins):.2f} %"
    )
    try:
        from statsforecast.models import ARIMA as SFArima  # optional
    except ImportError:
        print("   statsforecast: not installed (optional), skipped")
        return

    def sf() -> None:
        for o in origins:
            model = SFArima(order=(1, 0, 1), include_mean=True)
            model.fit(values[o - TRAIN : o]).predict(H, level=[95])

    t_sf, _ = best(sf, repeat)
    print(
        f"   statsforecast ARIMA(1,0,1):     {t_sf:6.2f} s   "
        f"ours / statsforecast {t_ours / t_sf:.2f}x"
    )


def part_seasonal(series: pd.Series, values: np.ndarray, origins: np.ndarray, repeat: int) -> None:
    from statsmodels.tsa.statespace.sarimax import SARIMAX

    print("2. Seasonal models, same month")
    t_ref, ref_llf = best(lambda: statsmodels_sarima(values, origins), repeat)
    t_ours, ours = best(lambda: rolling_forecast(series, model="sarima"), repeat)
    warm: dict = {}
    margin = []
    for i, o in enumerate(origins):
        x = values[o - TRAIN : o]
        sarima(x, H, H, None, warm)
        d = x[H:] - x[:-H]
        ll = profile_loglike(
            d[H:], np.vstack([np.ones(d.size - H), d[:-H]]), *warm["sarima", TRAIN]
        )
        margin.append((ll[0] - ref_llf[i]) / abs(ref_llf[i]))
    print(f"   SARIMA(1,0,1)(1,1,0)_48, statsmodels default fit of the same model: {t_ref:6.2f} s")
    print(f"   rolling_forecast(model='sarima'): {t_ours:6.2f} s   ratio {t_ours / t_ref:.2f}x")
    print(f"   log-likelihood min relative margin {min(margin):+.2e}")
    full = SARIMAX(values[:TRAIN], order=(1, 0, 1), seasonal_order=(1, 1, 0, H), trend="c")
    start = full.start_params
    t_eval, _ = best(lambda: full.loglike(start), 1)
    print(
        f"   full state-space SARIMAX (state {full.k_states}): one likelihood evaluation "
        f"{t_eval * 1e3:.0f} ms = {t_eval / (t_ours / origins.size):.1f}x our whole fit + forecast"
    )
    t_hw_ref, hw_ref = best(lambda: statsmodels_holt_winters(values, origins), 1)
    t_hw, hw = best(lambda: rolling_forecast(series, model="holt-winters"), repeat)
    got = hw["forecast"].to_numpy().reshape(origins.size, H)
    print(
        f"   Holt-Winters: statsmodels default (estimated initial states) {t_hw_ref:6.2f} s, "
        f"MAPE {mape(hw_ref, values, origins):.2f} %; ours (heuristic) {t_hw:.2f} s, MAPE "
        f"{mape(got, values, origins):.2f} %; ratio {t_hw / t_hw_ref:.2f}x"
    )


def part_threads(series: pd.Series, values: np.ndarray, origins: np.ndarray, load: int) -> None:
    blas = [i for i in threadpool_info() if i["user_api"] == "blas"]
    print(
        f"3. Threads: BLAS {[(i['internal_api'], i['num_threads']) for i in blas]}, "
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}"
    )
    subset = origins[:5]
    short = series.iloc[: subset[-1] + H]

    def run_all(label: str) -> None:
        t_def, _ = best(lambda: statsmodels_arma(values, subset), 1, threads=None)
        t_one, _ = best(lambda: statsmodels_arma(values, subset), 1, threads=1)
        t_ours, _ = best(lambda: rolling_forecast(short, model="arma"), 1, threads=None)
        print(
            f"   {label} (load average {os.getloadavg()[0]:.1f}): statsmodels, default threads "
            f"{t_def:.2f} s; inside threadpool_limits(1) {t_one:.2f} s ({t_one / t_def:.2f}x); "
            f"rolling_forecast {t_ours:.2f} s ({t_ours / t_def:.2f}x)"
        )

    run_all("as found")
    if load <= 0:
        return
    spin = [sys.executable, "-c", "while True: pass"]
    busy = [subprocess.Popen(spin) for _ in range(load)]
    try:
        time.sleep(1.0)
        run_all(f"+{load} busy processes")
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--column", default="rural")
    parser.add_argument("--month", type=int, default=2)
    parser.add_argument("--load", type=int, default=2, help="busy processes for part 3")
    parser.add_argument("--parts", default="123")
    args = parser.parse_args()
    series = dpstream.load_regional()[args.column]
    first = pd.Timestamp(2016, args.month, 1)
    last = first + pd.offsets.MonthEnd(0) + pd.Timedelta(hours=23, minutes=30)
    series = series.loc[first - pd.Timedelta(days=28) : last]
    values = series.to_numpy()
    origins = np.arange(TRAIN, values.size - H + 1, H)
    print(
        f"{args.column}, {first:%B %Y}: {origins.size} origins, {TRAIN}-step windows, {H}-step "
        f"forecasts; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    if "1" in args.parts:
        part_arma(series, values, origins, args.repeat)
    if "2" in args.parts:
        part_seasonal(series, values, origins, args.repeat)
    if "3" in args.parts:
        part_threads(series, values, origins, args.load)


if __name__ == "__main__":
    main()
