"""ARMA plus known measurement noise: forecasting the true series from a private release.

A released stream is y_t = x_t + v_t: the load x_t plus the release's noise v_t, whose
variance R is public (it follows from ε, w, α and the mechanism, not from the data). Beyond
[FV19] §6.1.3, which fits ARMA to y_t as if it were the load, the noise-aware fit is the
state-space model

    y_t = x_t + v_t,   v_t ~ WN(0, R) with R fixed,
    x_t = c + Σ φ_i x_{t−i} + β_t + Σ θ_i β_{t−i},

(``statsmodels`` SARIMAX with ``measurement_error=True`` and that variance fixed; [DK12]
§3.4, Kalman filter and exact likelihood). Its forecast of x_{t+h} filters the noise out of
the last observations with the *known* R, and its intervals are for the true x_{t+h}: they
include the uncertainty the noise leaves about the current state, not the noise of a future
release (``interval="release"`` adds it back).

When does it help?  ARMA(p, q) + white noise is again an ARMA(p, max(p, q)) process
([GM76]: autocovariances of MA(q) + white noise vanish beyond lag q), so for q >= p
(ARMA(1, 1), the paper's model) the plain fit already contains the right model and knowing R
only adds a constraint: a gain in estimation efficiency, no gain asymptotically. For q < p
(e.g. AR(1)) the plain fit is misspecified on noisy data (attenuated AR coefficients) and the
noise-aware fit corrects it. ``scripts/forecast_accuracy.py`` measures both on releases.

References
----------
[DK12] Durbin, Koopman. Time Series Analysis by State Space Methods, 2nd ed., 2012.
[GM76] Granger, Morris. Time Series Modelling and Interpretation. J. R. Stat. Soc. A 139(2),
       1976 (sums of ARMA processes).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from statsmodels.tsa.statespace.sarimax import SARIMAX

from mechanisms import DomainError, ParameterError, WEventLaplace
from mechanisms.core._validation import check_integer, check_positive

from ._fit import ArmaFit, _converged, _Quiet

__all__ = ["estimate_noise_variance", "fit_noise_aware", "laplace_noise_variance"]

#: Iteration limit of the noise-aware fit (statsmodels' 50 is often too few with R fixed).
MAXITER = 500


def fit_noise_aware(
    values: np.ndarray, order: tuple[int, int, int], noise_variance: float
) -> tuple[ArmaFit, object]:
    """Maximum likelihood of ARMA(p, q) + const + WN(0, R), R = ``noise_variance`` fixed."""
    model = SARIMAX(values, order=order, trend="c", measurement_error=True)
    with _Quiet() as caught, model.fix_params({"var.measurement_error": noise_variance}):
        params = model.fit(cov_type="none", disp=False, maxiter=MAXITER, return_params=True)
    with _Quiet():
        results = model.filter(params, cov_type="none")
    p, _, q = order
    named = dict(zip(model.param_names, np.asarray(params, dtype=np.float64), strict=True))
    ar = tuple(named[f"ar.L{i}"] for i in range(1, p + 1))
    ma = tuple(named[f"ma.L{i}"] for i in range(1, q + 1))
    fit = ArmaFit(
        order=order,
        mean=float(named["intercept"] / (1.0 - sum(ar))),
        ar=tuple(float(v) for v in ar),
        ma=tuple(float(v) for v in ma),
        sigma2=float(named["sigma2"]),
        noise_variance=float(noise_variance),
        loglike=float(results.llf),
        converged=_converged(caught),
        nobs=int(values.size),
    )
    return fit, results


def laplace_noise_variance(epsilon: float, *, w: int = 48, alpha: float = 1.0) -> float:
    """Exact variance of the noise ``dpstream.release_laplace`` adds to each value of a stream.

    One stream released alone (no hierarchy), (w, α)-indistinguishability, no declared bound:
    each value gets the lattice Laplace of :class:`mechanisms.WEventLaplace`, scale ≈ w·α/ε,
    variance ≈ 2(w·α/ε)² ([FV19] §6). Truncation of negative values at 0 is ignored (it only
    matters for values within a few scales of 0).

    Examples
    --------
    >>> round(laplace_noise_variance(1.0, w=48, alpha=1.0))
    4608
    """
    owner = "laplace_noise_variance"
    eps = check_positive(epsilon, "epsilon", owner)
    w = check_integer(w, "w", owner)
    alpha = check_positive(alpha, "alpha", owner)
    return float(WEventLaplace(epsilon=eps, w=w, delta=alpha).noise.variance)


def estimate_noise_variance(
    release: Callable[[pd.Series], object],
    *,
    level: float,
    w: int = 48,
    periods: int = 365,
    freq: str = "30min",
) -> float:
    """Variance of a release's noise, measured on a public constant stream.

    ``release`` (e.g. ``lambda s: dpstream.release_optstream(s, epsilon=1.0, seed=1)``) is run
    once on the constant stream ``level`` (``periods`` days of ``w`` steps of ``freq``, starting
    2016-01-04 00:00); the result is the mean squared deviation of its output from ``level``.
    Nothing private enters: the stream is public and the variance depends only on the
    release's public parameters, so this costs no privacy. On a constant stream the
    reconstruction of sampled mechanisms (OptStream, DFT) is exact, so the figure is the noise
    alone, not the data-dependent reconstruction bias. Choose ``level`` far from 0 (e.g. the
    public scale of the loads) so that truncation at 0 does not bias it.

    Returns
    -------
    float
        Mean of (release − level)² over the ``w·periods`` steps.

    Raises
    ------
    ParameterError
        ``release`` not callable, bad ``level``, ``w`` or ``periods``.
    DomainError
        The release returned a different length or non-finite values.
    """
    owner = "estimate_noise_variance"
    if not callable(release):
        raise ParameterError(
            f"The 'release' parameter of {owner} must be a callable Series -> Series. "
            f"Got {type(release).__name__} instead."
        )
    level = check_positive(level, "level", owner)
    w = check_integer(w, "w", owner)
    periods = check_integer(periods, "periods", owner)
    index = pd.date_range("2016-01-04", periods=w * periods, freq=freq, name="time")
    public = pd.Series(level, index=index, name="public")
    out = release(public)
    if isinstance(out, pd.DataFrame):
        out = out["public"] if "public" in out.columns else out.iloc[:, 0]
    arr = np.asarray(out, dtype=np.float64).reshape(-1)
    if arr.size != public.size or not np.isfinite(arr).all():
        raise DomainError(
            f"The 'release' of {owner} must return {public.size} finite values for the "
            f"{public.size}-step public stream. Got {arr.size} values."
        )
    return float(np.mean((arr - level) ** 2))
