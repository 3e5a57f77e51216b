"""The fitted-model record shared by the plain and the noise-aware ARMA fits, and the
warning capture both use (kept apart so that neither fit module imports the other)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from statsmodels.tools.sm_exceptions import ConvergenceWarning

from mechanisms.core._results import summary_text, table_frame

__all__ = ["ArmaFit"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ArmaFit:
    """Maximum-likelihood estimates of an ARMA(p, q) with a constant (and measurement noise)."""

    order: tuple[int, int, int]
    """The order (p, 0, q)."""
    mean: float
    """Process mean μ = c / (1 − Σ φ_i) (statsmodels' ``const`` of ARIMA)."""
    ar: tuple[float, ...]
    """AR coefficients φ_1..φ_p (x_t = c + Σ φ_i x_{t−i} + ...)."""
    ma: tuple[float, ...]
    """MA coefficients θ_1..θ_q (... + β_t + Σ θ_i β_{t−i})."""
    sigma2: float
    """Variance of the innovations β_t."""
    noise_variance: float
    """Variance of the measurement noise (fixed, known); 0 for the plain ARMA fit."""
    loglike: float
    """Maximised log-likelihood."""
    converged: bool
    """Whether the optimiser reported convergence (False: its iteration limit was hit)."""
    nobs: int
    """Number of observations fitted."""

    def params(self) -> dict[str, float]:
        """The estimates by statsmodels-style name: mean, ar.L1.., ma.L1.., sigma2."""
        out = {"mean": self.mean}
        out.update({f"ar.L{k + 1}": v for k, v in enumerate(self.ar)})
        out.update({f"ma.L{k + 1}": v for k, v in enumerate(self.ma)})
        out.update({"sigma2": self.sigma2, "noise_variance": self.noise_variance})
        return out

    def to_frame(self):
        """One row per parameter: its estimate (``noise_variance`` is fixed, not estimated)."""
        params = self.params()
        return table_frame(
            {"estimate": list(params.values())}, index=list(params), index_name="parameter"
        )

    def summary(self) -> str:
        """A short text table, like statsmodels' ``results.summary()`` (estimates only)."""
        p, _, q = self.order
        rows = [("model", f"ARMA({p}, {q}) with a constant"), ("observations", self.nobs)]
        rows += [(name, value) for name, value in self.params().items()]
        rows += [("log-likelihood", self.loglike), ("converged", self.converged)]
        return summary_text("ARMA fit", rows, result=self)


class _Quiet(warnings.catch_warnings):
    """Record (do not show) statsmodels' warnings of one fit; remember non-convergence."""

    def __init__(self) -> None:
        super().__init__(record=True)

    def __enter__(self) -> list[warnings.WarningMessage]:
        caught = super().__enter__()
        warnings.simplefilter("always")
        return caught  # type: ignore[return-value]


def _converged(caught: list[warnings.WarningMessage]) -> bool:
    return not any(issubclass(w.category, ConvergenceWarning) for w in caught)
