"""Square Wave reports of values in [0, 1] and the server's distribution recovery ([SW20]).

[SW20] Li, Wang, Lopuhaä-Zwakenberg, Li, Škorić. Estimating Numerical Distributions under
       Local Differential Privacy. SIGMOD 2020 (the Square Wave mechanism and EMS, its
       expectation-maximisation with smoothing).

The mechanism (client side)
---------------------------
A user with v ∈ [0, 1] reports ṽ ∈ [−b, 1 + b] with density

    p = e^ε/(2b·e^ε + 1)   if |ṽ − v| ≤ b,        q = 1/(2b·e^ε + 1)   otherwise,

so that 2b·p + 1·q = 1 and p/q = e^ε, with the half-width chosen in [SW20] (maximising an upper
bound on the mutual information between v and ṽ)

    b = (ε·e^ε − e^ε + 1) / (2e^ε·(e^ε − 1 − ε))        (b → 1/2 as ε → 0, b ≈ (ε − 1)/(2e^ε)
                                                          for large ε).

On a lattice (floating-point safety, our design). The report is drawn exactly on the lattice
γℤ, γ = 2⁻²⁴ (N = 2²⁴ cells per unit): v is rounded to k = round(v·N) (the user's own
pre-processing), the half-width becomes W = ⌊b/γ⌋ cells, and the report is the integer
Y ∈ [−W, N + W] with probability p_c on the 2W + 1 window cells k − W..k + W and q_c = p_c/e^ε
on the N others; ṽ = Y·γ. This is *exactly* the continuous Square Wave with half-width
b' = (W + ½)γ (|b' − b| ≤ γ/2) applied to kγ, its output rounded to the nearest lattice point:
the window and the domain [−b', 1 + b'] are unions of whole cells. The window is chosen with
probability (2W + 1)e^ε/((2W + 1)e^ε + N) = 2b'·p (a 53-bit Bernoulli, exact up to 2⁻⁵³), then
a cell uniformly by exact integer sampling. A report is not an unbiased estimate of v:
E[ṽ | v] = q(1 + 2b')/2 + 2b'(p − q)·v, so v̂ = (ṽ − q(1 + 2b')/2)/(2b'(p − q)) is the unbiased
per-report estimate (:meth:`SquareWave.estimate`).

The server (EMS)
----------------
The input domain [0, 1] is cut into d equal bins and the output domain [−b', 1 + b'] into d̃
bins (unions of whole lattice cells, so the histogram of reports is exact). The transition
M[j, i] = P[ṽ ∈ out-bin j | v uniform on in-bin i] is computed in closed form: for in-bin
[a, e] (width h) and out-bin [c, d],

    M[j, i] = q·(d − c) + (p − q)/h · (A(b') − A(−b')),
    A(s) = R(s + e − c) − R(s + e − d) − R(s + a − c) + R(s + a − d),   R(x) = max(x, 0)²/2,

A(s) being the area of {(y, v) ∈ [c, d] × [a, e] : y − v ≤ s}. EM then iterates, on the bin
probabilities f, f ← f ⊙ Mᵀ(n / Mf)/Σn (the multiplicative update of the multinomial
likelihood; n the report counts per out-bin) and, for EMS, smooths f after every step with
the binomial kernel (1, 2, 1)/4 (renormalised to (2, 1)/3 at the ends) and renormalises. It
stops when the log-likelihood changes by less than ``tol`` (default 10⁻³, absolute; our
choice, it also bounds the run time) or after ``max_iter`` steps.

*Privacy*: the Square Wave report is ε-LDP: any output cell has probability p_c or p_c/e^ε
whatever the input. The server's estimates are post-processing of the reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..core._errors import DomainError, ParameterError
from ..core._random import BitSource
from ..core._results import summary_text, table_frame
from ..core._validation import check_integer, check_positive, check_stream
from ._randomizers import bernoulli, check_local_epsilon, uniform_ints

__all__ = [
    "DistributionFit",
    "SquareWave",
    "square_wave_b",
    "square_wave_distribution",
]

#: The Square Wave lattice has 2**SW_LATTICE_BITS cells per unit of the input domain [0, 1].
SW_LATTICE_BITS = 24
_N_CELLS = 1 << SW_LATTICE_BITS


def _series_g_h(eps: float) -> tuple[float, float]:
    """g/ε² and h/ε², g = e^ε(ε − 1) + 1 and h = e^ε − 1 − ε, by their power series (small ε).

    Divided by ε² so that nothing underflows for tiny ε (ε² < 2⁻¹⁰⁷⁴ below ε ≈ 10⁻¹⁶²);
    b only uses the ratio g/h.
    """
    g = h = 0.0
    term = 1.0
    for k in range(2, 16):
        term = 0.5 if k == 2 else term * eps / k  # ε^(k−2) · 2!/k! / 2 = ε^k / k! / ε²
        g += (k - 1) * term
        h += term
    return g, h


def square_wave_b(epsilon: float) -> float:
    """The Square Wave half-width b = (εe^ε − e^ε + 1)/(2e^ε(e^ε − 1 − ε)) ([SW20]).

    Numerator and the bracket of the denominator both behave as ε²/2 near 0: below ε = 10⁻²
    they are summed as power series (no cancellation), so b → 1/2 smoothly.
    """
    eps = check_local_epsilon(epsilon, "square_wave_b")
    if eps < 1e-2:
        g, h = _series_g_h(eps)
    else:
        g = math.exp(eps) * (eps - 1.0) + 1.0
        h = math.expm1(eps) - eps
    return g / (2.0 * math.exp(eps) * h)


@dataclass(frozen=True, slots=True, kw_only=True)
class SquareWave:
    """The Square Wave mechanism on [0, 1], on the lattice 2⁻²⁴ℤ ([SW20]; module notes).

    Notes
    -----
    *Privacy*: ε-LDP. Every lattice report has probability p_c (window) or p_c/e^ε (elsewhere)
    for every input, and the support [−W, N + W]·γ is the same for all inputs.
    """

    epsilon: float
    """Privacy loss ε of one report, in (0, 50]."""
    b: float = field(init=False)
    """The paper's half-width b (:func:`square_wave_b`)."""
    granularity: float = field(init=False)
    """Lattice spacing γ = 2⁻²⁴ of inputs and reports."""
    half_width: int = field(init=False)
    """W = ⌊b/γ⌋, the window's half-width in cells (the window has 2W + 1 cells)."""
    b_lattice: float = field(init=False)
    """b' = (W + ½)γ, the half-width of the continuous Square Wave the lattice one equals."""
    p: float = field(init=False)
    """Density inside the window, e^ε/(2b'e^ε + 1)."""
    q: float = field(init=False)
    """Density outside the window, 1/(2b'e^ε + 1) = p/e^ε."""
    p_window: float = field(init=False)
    """Probability 2b'·p that the report falls in the window."""

    def __post_init__(self) -> None:
        eps = check_local_epsilon(self.epsilon, "SquareWave")
        b = square_wave_b(eps)
        gamma = 1.0 / _N_CELLS
        w = math.floor(b * _N_CELLS)
        b_lat = (w + 0.5) * gamma
        e = math.exp(eps)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "granularity", gamma)
        object.__setattr__(self, "half_width", w)
        object.__setattr__(self, "b_lattice", b_lat)
        object.__setattr__(self, "p", e / (2.0 * b_lat * e + 1.0))
        object.__setattr__(self, "q", 1.0 / (2.0 * b_lat * e + 1.0))
        object.__setattr__(self, "p_window", (2 * w + 1) * e / ((2 * w + 1) * e + _N_CELLS))

    def report(self, values: object, bits: BitSource) -> np.ndarray:
        """One report per value (each in [0, 1]), on the lattice, in [−b', 1 + b']."""
        arr = check_stream(values, "values", "SquareWave.report", bound=1.0)
        return _square_wave_sample(arr, self.half_width, self.p_window, bits)

    def mean(self, v: object) -> np.ndarray:
        """E[ṽ | v] = q(1 + 2b')/2 + 2b'(p − q)·v."""
        bl = self.b_lattice
        return self.q * (1.0 + 2.0 * bl) / 2.0 + 2.0 * bl * (self.p - self.q) * _as(v)

    def estimate(self, reports: object) -> np.ndarray:
        """Unbiased per-report estimates v̂ = (ṽ − q(1 + 2b')/2)/(2b'(p − q)) of the inputs."""
        bl = self.b_lattice
        y = np.asarray(reports, dtype=np.float64)
        return (y - self.q * (1.0 + 2.0 * bl) / 2.0) / (2.0 * bl * (self.p - self.q))

    def variance(self, v: object) -> np.ndarray:
        """Var[v̂ | v] of :meth:`estimate`, exact on the lattice (continuous minus γ²/12)."""
        bl, p, q = self.b_lattice, self.p, self.q
        x = _as(v)
        second = q * ((1.0 + bl) ** 3 + bl**3) / 3.0 + (p - q) * (2.0 * bl * x**2 + 2.0 * bl**3 / 3)
        var_y = second - self.mean(x) ** 2 - self.granularity**2 / 12.0
        return var_y / (2.0 * bl * (p - q)) ** 2

    def output_bins(self, count: int) -> np.ndarray:
        """Integer cell boundaries (offsets from cell −W) of ``count`` output bins that are
        unions of whole lattice cells, as equal as possible; ``count + 1`` entries."""
        total = _N_CELLS + 2 * self.half_width + 1
        return (np.arange(count + 1, dtype=np.int64) * total) // count

    def transition_matrix(self, bins: int, output_bins: int) -> tuple[np.ndarray, np.ndarray]:
        """M[j, i] = P[report in output bin j | v uniform on input bin i], and the output-bin
        edges (``output_bins + 1`` values on [−b', 1 + b']); module notes."""
        a = np.arange(bins, dtype=np.float64)[None, :] / bins
        e = a + 1.0 / bins
        edges = (self.output_bins(output_bins) - self.half_width - 0.5) * self.granularity
        c = edges[:-1, None]
        d = edges[1:, None]
        bl = self.b_lattice

        def area(s: float) -> np.ndarray:
            def r(x):
                return np.maximum(x, 0.0) ** 2 / 2.0

            return r(s + e - c) - r(s + e - d) - r(s + a - c) + r(s + a - d)

        window = (area(bl) - area(-bl)) * bins  # ∫∫ 1[|y − v| ≤ b'] / h
        return self.q * (d - c) + (self.p - self.q) * window, edges


def _as(v: object) -> np.ndarray:
    return np.asarray(v, dtype=np.float64)


def _square_wave_sample(
    values: np.ndarray, half_width: int, p_window: float, bits: BitSource
) -> np.ndarray:
    """Lattice Square Wave reports (module notes). Takes W and the window probability as
    arguments (not ε) so that audits can run the same sampler miscalibrated."""
    size = values.size
    k = np.rint(values * _N_CELLS).astype(np.int64)  # the user's value on the lattice
    inside = bernoulli(bits, size, p_window)
    y_in = k - half_width + uniform_ints(bits, size, 2 * half_width + 1)
    u = uniform_ints(bits, size, _N_CELLS)  # one of the N cells outside the window
    y_out = np.where(u < k, u - half_width, u + half_width + 1)
    return np.where(inside, y_in, y_out).astype(np.float64) / _N_CELLS


@dataclass(frozen=True, slots=True, kw_only=True)
class DistributionFit:
    """A distribution on [0, 1] recovered from Square Wave reports by EM / EMS ([SW20])."""

    edges: np.ndarray
    """Bin edges on [0, 1] (d + 1 values); the mass of a bin is spread uniformly inside it."""
    probabilities: np.ndarray
    """Estimated probability of each bin (d values, non-negative, summing to 1)."""
    iterations: int
    """EM iterations run."""
    converged: bool
    """True when the log-likelihood change fell below the tolerance before ``max_iter``."""
    log_likelihood: float
    """Log-likelihood of the report histogram under the final estimate."""
    n_reports: int
    """Number of reports the fit used."""
    smoothing: bool
    """True for EMS (binomial smoothing after every step), False for plain EM."""

    def __post_init__(self) -> None:
        self.edges.setflags(write=False)
        self.probabilities.setflags(write=False)

    def cdf(self, x: object) -> np.ndarray:
        """The fitted CDF at ``x`` (piecewise linear between edges)."""
        cum = np.concatenate([[0.0], np.cumsum(self.probabilities)])
        return np.interp(_as(x), self.edges, cum)

    def mean(self) -> float:
        """Mean of the fitted distribution."""
        mid = 0.5 * (self.edges[:-1] + self.edges[1:])
        return float(np.dot(self.probabilities, mid))

    def to_frame(self):
        """One row per bin: its edges on [0, 1] and estimated probability."""
        return table_frame(
            {
                "left": self.edges[:-1],
                "right": self.edges[1:],
                "probability": self.probabilities,
            },
            index_name="bin",
        )

    def summary(self) -> str:
        """A short text table of the fit (post-processing of the locally private reports)."""
        rows = [
            ("reports", self.n_reports),
            ("bins", self.probabilities.size),
            ("method", "EMS" if self.smoothing else "EM"),
            ("iterations", self.iterations),
            ("converged", self.converged),
            ("log-likelihood", self.log_likelihood),
            ("mean (on [0, 1])", self.mean()),
        ]
        return summary_text("Distribution from Square Wave reports [SW20]", rows, result=self)


def _smooth(theta: np.ndarray) -> np.ndarray:
    """Binomial (1, 2, 1)/4 smoothing, (2, 1)/3 at the ends ([SW20] EMS)."""
    out = np.empty_like(theta)
    out[1:-1] = 0.25 * theta[:-2] + 0.5 * theta[1:-1] + 0.25 * theta[2:]
    out[0] = (2.0 * theta[0] + theta[1]) / 3.0
    out[-1] = (theta[-2] + 2.0 * theta[-1]) / 3.0
    return out / out.sum()


def square_wave_distribution(
    reports: object,
    *,
    mechanism: SquareWave,
    bins: int = 1024,
    output_bins: int | None = None,
    smoothing: bool = True,
    tol: float = 1e-3,
    max_iter: int = 10_000,
) -> DistributionFit:
    """Recover the input distribution of Square Wave reports by EM or EMS ([SW20]).

    Parameters
    ----------
    reports
        Reports of :meth:`SquareWave.report` (on its lattice, in [−b', 1 + b']).
    mechanism
        The :class:`SquareWave` that produced them (its ε).
    bins
        d, the number of equal input bins on [0, 1], 2 ≤ d ≤ 4096.
    output_bins
        d̃, the number of output bins on [−b', 1 + b'] (default d).
    smoothing
        True: EMS (binomial smoothing after each step); False: plain EM.
    tol, max_iter
        Stop when the log-likelihood changes by less than ``tol`` (after the second step), or
        after ``max_iter`` steps.

    Returns
    -------
    DistributionFit

    Notes
    -----
    Module notes for M and the update. *Privacy*: post-processing of ε-LDP reports.
    """
    owner = "square_wave_distribution"
    if not isinstance(mechanism, SquareWave):
        raise ParameterError(
            f"The 'mechanism' parameter of {owner} must be a SquareWave. Got {mechanism!r} instead."
        )
    d = check_integer(bins, "bins", owner, minimum=2, maximum=4096)
    dt = d if output_bins is None else check_integer(output_bins, "output_bins", owner, minimum=2)
    if not isinstance(smoothing, bool):
        raise ParameterError(
            f"The 'smoothing' parameter of {owner} must be a bool. Got {smoothing!r}."
        )
    tol = check_positive(tol, "tol", owner)
    max_iter = check_integer(max_iter, "max_iter", owner)
    gamma, w = mechanism.granularity, mechanism.half_width
    y = check_stream(
        reports, "reports", owner, bound=1.0 + mechanism.b_lattice, lower=-mechanism.b_lattice
    )
    cells = np.rint(y / gamma).astype(np.int64) + w  # 0 .. N + 2W
    if (
        (cells < 0).any()
        or (cells > _N_CELLS + 2 * w).any()
        or not np.array_equal((cells - w).astype(np.float64) * gamma, y)
    ):
        raise DomainError(
            f"The 'reports' argument of {owner} must hold Square Wave reports of this "
            "mechanism (lattice points in [-b', 1 + b']); some entries are not. Pass the output "
            "of SquareWave.report with the same epsilon."
        )

    counts = np.bincount(
        np.searchsorted(mechanism.output_bins(dt), cells, side="right") - 1, minlength=dt
    ).astype(np.float64)
    m, _ = mechanism.transition_matrix(d, dt)
    used = counts > 0
    m, counts = m[used], counts[used]  # bins without reports do not enter the likelihood
    total = counts.sum()

    theta = np.full(d, 1.0 / d)
    pred = m @ theta
    ll = old_ll = float(counts @ np.log(pred))
    converged = False
    it = 0
    while it < max_iter:
        it += 1
        theta = theta * (m.T @ (counts / pred)) / total  # E and M steps
        theta /= theta.sum()
        if smoothing:
            theta = _smooth(theta)  # [SW20] EMS
        pred = m @ theta
        ll = float(counts @ np.log(pred))
        if it > 1 and abs(ll - old_ll) < tol:
            converged = True
            break
        old_ll = ll
    return DistributionFit(
        edges=np.linspace(0.0, 1.0, d + 1),
        probabilities=theta,
        iterations=it,
        converged=converged,
        log_likelihood=ll,
        n_reports=int(total),
        smoothing=smoothing,
    )
