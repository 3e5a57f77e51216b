"""Simulated ARMA series for the forecasting tests (numpy noise: a simulation, releases nothing)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.signal import lfilter


def simulate_arma(
    rng: np.random.Generator,
    n: int,
    *,
    phi: float,
    theta: float = 0.0,
    mean: float = 0.0,
    sigma: float = 1.0,
    burn: int = 500,
) -> np.ndarray:
    """x_t − μ = φ (x_{t−1} − μ) + β_t + θ β_{t−1}, β ~ N(0, σ²), after a burn-in."""
    beta = rng.normal(0.0, sigma, size=n + burn)
    return mean + lfilter([1.0, theta], [1.0, -phi], beta)[burn:]


def half_hours(values: np.ndarray, start: str = "2016-01-01") -> pd.Series:
    """``values`` on a 30-minute DatetimeIndex starting at ``start``."""
    index = pd.date_range(start, periods=len(values), freq="30min", name="time")
    return pd.Series(values, index=index, name="load")
