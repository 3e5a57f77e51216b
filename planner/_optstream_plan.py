"""Choosing OptStream's number of samples k from history, with the error each k predicts.

[FV19] §4 splits OptStream's error into the noise of the k perturbed samples and the error of
reconstructing the other w − k steps by linear interpolation (Theorem 12 bounds the first,
the second depends on the data). [FV19] §6 fixes k = 10 (5 at α = 100 MW); on rougher data the
best k moves with α/ε (``docs/results/optstream_findings.md``: from w at α/ε = 1 down to about
6 at α/ε = 100). :func:`plan_optstream` predicts both parts for every candidate k from
*history* — data the operator may read without spending budget: an earlier, already public
period, or a held-out one in an experiment — and returns the k with the smallest prediction.

The prediction (for equally spaced samples, the budget on the samples only, as the held-out
tuning of ``scripts/optstream_accuracy.py`` found best):

* each sample gets Laplace noise of scale b = kα/ε_p with ε_p = ε/h ([FV19] Theorem 8, the
  k samples of a period have L1 sensitivity kα; Theorem 13, h levels get ε/h each);
* step t is reconstructed as Σ_j M_tj ỹ_j ([FV19] §3.3, M the interpolation operator), so its
  noise has variance σ_t² = 2b²·Σ_j M_tj², and its bias on the history is β_t = (M x)_t − x_t;
* the predicted mean absolute error of step t is E|β_t + Z| for Z ~ N(0, σ_t²) (a normal
  approximation of the sum of Laplace terms; exact in the limit of many terms, 13% high for
  k = w where the error is one Laplace variable), averaged over steps, periods and nodes.

Post-processing (non-negativity, consistency) only lowers the error, so the prediction is an
estimate of the release before Algorithm 4's line 2. Laplace per value (w-event, the same
unit) is predicted as its exact mean absolute noise w·α·h/ε.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import erf

from mechanisms import ParameterError
from mechanisms.core._results import summary_text, table_frame
from mechanisms.core._validation import check_integer, check_positive, check_real_array
from mechanisms.optstream._sampling import interpolation_matrix, sample_equal

__all__ = ["OptStreamPlan", "plan_optstream"]

_NOTE = (
    "Planned on history: an analysis of the data passed in, which must not be the data to be "
    "released (use an earlier, public period)."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class OptStreamPlan:
    """The k with the smallest predicted error, and the prediction for every candidate."""

    k: int
    """Samples per period with the smallest predicted error."""
    candidates: np.ndarray = field(hash=False)
    """The candidate k."""
    predicted: np.ndarray = field(hash=False)
    """Predicted mean absolute error per step and series, per candidate."""
    noise: np.ndarray = field(hash=False)
    """Its noise part: mean noise standard deviation per step, per candidate."""
    bias: np.ndarray = field(hash=False)
    """Its reconstruction part: mean |interpolation error| on the history, per candidate."""
    predicted_laplace: float
    """Mean absolute error of Laplace per value under the same unit: w·α·h/ε."""
    epsilon: float
    """Total ε of the release."""
    alpha: float
    """α of the privacy unit, in the data's units."""
    w: int
    """Period length."""
    n_levels: int
    """Levels h of the hierarchy."""
    private: bool = False
    """Always False: the plan reads the history."""
    note: str = _NOTE
    """What the plan may be used for."""

    def release_parameters(self) -> dict:
        """Keyword arguments of ``dpstream.release_optstream`` that realise this plan.

        Equally spaced samples, the whole budget on them, no feature queries (the feature
        chain is the singletons alone; post-processing still enforces consistency and
        non-negativity).
        """
        return {
            "k": self.k,
            "sampling": "equal",
            "shares": (0.0, 1.0, 0.0),
            "features": [[[t] for t in range(self.w)]],
        }

    @property
    def predicted_gain(self) -> float:
        """Laplace's predicted error over the plan's."""
        return self.predicted_laplace / float(self.predicted[self.candidates == self.k][0])

    def to_frame(self):
        """One row per candidate k: the predicted error and its noise and bias parts."""
        return table_frame(
            {
                "predicted": self.predicted,
                "noise": self.noise,
                "bias": self.bias,
                "chosen": self.candidates == self.k,
            },
            index=np.asarray(self.candidates),
            index_name="k",
        )

    def summary(self) -> str:
        """A short text table: the chosen k and the error it predicts."""
        chosen = float(self.predicted[self.candidates == self.k][0])
        rows = [
            ("samples per period k", self.k),
            ("period w", self.w),
            ("levels h", self.n_levels),
            ("epsilon", self.epsilon),
            ("alpha α of the (w, α) unit", self.alpha),
            ("predicted MAE per step and series", chosen),
            ("Laplace's predicted MAE", self.predicted_laplace),
            ("predicted gain over Laplace", self.predicted_gain),
        ]
        return summary_text("OptStream plan [FV19]", rows, result=self)


def _mean_abs_normal(mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """E|μ + Z|, Z ~ N(0, σ²) (folded normal mean)."""
    sigma = np.maximum(sigma, 1e-300)
    z = mu / sigma
    return sigma * math.sqrt(2.0 / math.pi) * np.exp(-0.5 * z**2) + mu * erf(z / math.sqrt(2.0))


def plan_optstream(
    history: object,
    *,
    epsilon: float,
    alpha: float,
    w: int = 48,
    n_levels: int = 1,
    candidates: object = None,
) -> OptStreamPlan:
    """Choose k for OptStream with equally spaced samples by predicting each k's error.

    Parameters
    ----------
    history
        Past values of every node to be released, shape (T,) or (T, N), T ≥ w; only the
        first ⌊T/w⌋ whole periods are used. **Read as data**: pass public history (e.g. last
        month), never the values to be released (see the module notes).
    epsilon, alpha
        ε of the release and α of its (w, α) unit (data units), both > 0.
    w
        Period length (and privacy window), ≥ 2.
    n_levels
        Levels h of the hierarchy (ε/h each; [FV19] Theorem 13).
    candidates
        Candidate k (each in [1, w]); default every k in {2, 3, 4, 6, 8, 10, 12, 16, 24, 32, w}
        not above w.

    Returns
    -------
    OptStreamPlan

    Examples
    --------
    >>> import numpy as np
    >>> t = np.arange(48 * 30)
    >>> history = 1000 + 300 * np.sin(2 * np.pi * t / 48)        # smooth daily profile
    >>> plan_optstream(history, epsilon=1.0, alpha=50.0).k < 48   # few samples suffice
    True
    """
    owner = "plan_optstream"
    eps = check_positive(epsilon, "epsilon", owner)
    a = check_positive(alpha, "alpha", owner)
    w = check_integer(w, "w", owner, minimum=2)
    h = check_integer(n_levels, "n_levels", owner, maximum=1 << 20)
    x = check_real_array(history, "history", owner)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] < w:
        raise ParameterError(
            f"The 'history' argument of {owner} must be a (T,) or (T, N) array with T >= w = {w}. "
            f"Got shape {np.shape(history)}."
        )
    if not np.isfinite(x).all():
        raise ParameterError(f"The 'history' argument of {owner} must be finite (no NaN/inf).")
    if candidates is None:
        ks = np.array(sorted({k for k in (2, 3, 4, 6, 8, 10, 12, 16, 24, 32, w) if k <= w}))
    else:
        ks = np.unique([check_integer(k, "candidates", owner, maximum=w) for k in candidates])
        if ks.size == 0:
            raise ParameterError(f"The 'candidates' parameter of {owner} must not be empty.")
    periods = x[: (x.shape[0] // w) * w].reshape(-1, w, x.shape[1])  # (P, w, N)
    predicted, noise, bias = [], [], []
    for k in ks:
        mask = np.zeros((1, w), dtype=bool)
        mask[0, sample_equal(w, int(k))] = True
        m = interpolation_matrix(mask)[0]  # (w, w), columns of unsampled steps are 0
        scale = int(k) * a / (eps / h)  # Laplace scale of each sample (Theorem 8, 13)
        sigma = np.sqrt(2.0 * scale**2 * (m**2).sum(axis=1))  # (w,)
        beta = np.einsum("ts,psn->ptn", m, periods) - periods  # (P, w, N)
        predicted.append(float(_mean_abs_normal(beta, sigma[None, :, None]).mean()))
        noise.append(float(sigma.mean()))
        bias.append(float(np.abs(beta).mean()))
    predicted_arr = np.array(predicted)
    return OptStreamPlan(
        k=int(ks[int(np.argmin(predicted_arr))]),
        candidates=ks,
        predicted=predicted_arr,
        noise=np.array(noise),
        bias=np.array(bias),
        predicted_laplace=w * a * h / eps,
        epsilon=eps,
        alpha=a,
        w=w,
        n_levels=h,
    )
