"""One forecast from one training window, for every model; and ``model="auto"``'s backtest.

``auto`` chooses, at every origin t, the candidate with the smallest mean squared error on a
rolling backtest *inside t's training window* [t − train, t): each candidate is refitted on
``train − B·period`` steps ending at each of the B = :data:`BACKTEST_PERIODS` day boundaries
t − period, ..., t − B·period, forecasts the next min(horizon, period) steps, and is scored on
those steps, which all lie in [t − B·period, t). Nothing at or after t (the evaluation window)
is read. A backtest fit depends on its own boundary only, so consecutive origins share all but
one of them (each is computed once). The squared error ranks forecasters as it would on the
noise-free series when the series is a release (its independent noise adds the same R to every
candidate's expected squared error), which the absolute error does not guarantee.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._arma import fit_model
from ._seasonal import holt_winters, min_history, profile, sarima

__all__ = ["BACKTEST_PERIODS", "CANDIDATES", "MODELS", "Backtest", "forecast_once"]

#: Models of :func:`forecasting.rolling_forecast`; "auto" chooses among :data:`CANDIDATES`.
MODELS = ("arma", "sarima", "holt-winters", "profile", "auto")
CANDIDATES = ("arma", "sarima", "holt-winters", "profile")
#: Days of the backtest of "auto" (at most; fewer when the training window is short).
BACKTEST_PERIODS = 7


def forecast_once(
    model: str,
    values: np.ndarray,
    *,
    horizon: int,
    period: int,
    order: tuple[int, int, int],
    noise_variance: float | None,
    warm: dict | None,
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Fit ``model`` on ``values``; (forecasts, forecast variances of an observation, converged)."""
    if model == "arma":
        fit, results = fit_model(values, order, noise_variance, warm)
        pred = results.get_forecast(horizon)  # type: ignore[attr-defined]
        mean = np.asarray(pred.predicted_mean, dtype=np.float64)
        return mean, np.asarray(pred.var_pred_mean, dtype=np.float64), fit.converged
    if model == "sarima":
        return sarima(values, horizon, period, noise_variance, warm)
    # Holt-Winters and the profile know no measurement noise: the error variance they measure
    # on the release already holds R (the caller subtracts R for intervals on the truth).
    if model == "holt-winters":
        return holt_winters(values, horizon, period)
    return profile(values, horizon, period)


def auto_plan(train: int, horizon: int, period: int) -> tuple[int, tuple[str, ...]]:
    """(backtest days B, candidates) of "auto": B <= BACKTEST_PERIODS with >= 10 steps left.

    A candidate is eligible when its fewest training steps (:func:`min_history`) fit in the
    backtest windows of ``train − B·period`` steps; SARIMA also needs ``horizon <= period``.
    """
    days = max(0, min(BACKTEST_PERIODS, (train - 10) // period))
    window = train - days * period
    names = tuple(
        m
        for m in CANDIDATES
        if min_history(m, period) <= window and (m != "sarima" or horizon <= period)
    )
    return days, names


class Backtest:
    """The rolling backtest of "auto" over one series (see the module notes)."""

    def __init__(
        self,
        values: np.ndarray,
        *,
        train: int,
        horizon: int,
        period: int,
        order: tuple[int, int, int],
        noise_variance: float | None,
        warm: dict,
    ) -> None:
        self.days, self.candidates = auto_plan(train, horizon, period)
        self.window = train - self.days * period
        self.steps = min(horizon, period)
        self._values = values
        self._period = period
        self._common = {"period": period, "order": order, "noise_variance": noise_variance}
        self._warm = warm
        self._cache: dict[tuple[str, int], np.ndarray] = {}

    def choose(self, origin: int) -> str:
        """The candidate with the least backtest mean squared error before ``origin``."""
        if len(self.candidates) == 1 or self.days == 0:
            return self.candidates[0]
        bounds = [origin - j * self._period for j in range(self.days, 0, -1)]
        for key in [k for k in self._cache if k[1] < bounds[0]]:
            del self._cache[key]  # boundaries no later origin uses
        scores = [self._score(m, bounds) for m in self.candidates]
        return self.candidates[int(np.argmin(scores))]

    def _score(self, model: str, bounds: Sequence[int]) -> float:
        sq = 0.0
        for b in bounds:
            if (model, b) not in self._cache:
                mean, _, _ = forecast_once(
                    model,
                    self._values[b - self.window : b],
                    horizon=self.steps,
                    warm=self._warm,
                    **self._common,
                )
                self._cache[model, b] = mean
            err = self._cache[model, b] - self._values[b : b + self.steps]
            sq += float(err @ err)
        return sq / (len(bounds) * self.steps)
