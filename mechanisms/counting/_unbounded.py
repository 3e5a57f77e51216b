"""A pure-ε continual counter for a stream without a known end: k-ary epochs, one tree each.

[CSS11] Chan, Shi and Song, "Private and continual release of statistics", ACM TISSEC 14(3),
2011, §4 (the hybrid mechanism: completed epochs plus a tree inside the current one); [APT24]
the k-ary tree with negative digits (:mod:`._kary`).

Construction (a variant of [CSS11] §4, our derivation)
------------------------------------------------------
The stream is cut into epochs j = 0, 1, 2, ... of public lengths n_j = k_jᵐʲ (k_j odd, m_j ≥ 0):
epoch j holds the steps S_j < t ≤ S_j + n_j, S_j = Σ_{i<j} n_i. Epoch j runs its own k_j-ary
tree with negative digits sized for n_j steps (:class:`KaryTreeCounter`, L_j = m_j + 1 levels,
every block with Laplace noise of scale (L_j·B + γ_j)/ε on its lattice γ_j), at the **full**
ε. The epochs are either kʲ for one fanout k (``fanout=k``: (k_j, m_j) = (k, j)) or the
shipped :data:`SCHEDULE` (the default), public constants fitted offline. The release at t in
epoch j, in-epoch position p = t − S_j, is

    c̃(t) = Σ_{i<j} õ_i(n_i) + õ_j(p),

with õ_i(n_i) the last output of epoch i's tree (its noisy total, released when the epoch
closed) and õ_j(p) the current tree's output.

* **Privacy.** Epochs hold disjoint steps, so an event-level neighbour (one step moved in
  [0, B]) changes the data of one epoch's tree only; each tree is ε-DP (the block sums of
  :mod:`._kary`, Laplace mechanism with Δ₁ = L_j·B), and the trees' noises are independent:
  parallel composition gives ε-DP for the release of all trees' blocks, of every epoch that
  ever starts. Every c̃(t) is a ±1 sum of released blocks (post-processing); it reads steps
  ≤ t only (as in :mod:`._kary`, blocks of the current tree ending after t contribute their
  noise only). Unlike [CSS11] §4 the epoch totals need no budget of their own: a closed
  epoch's total is its tree's own output at n_j = k_jᵐʲ, one block of level m_j (one
  balanced digit), so its variance is that of a single block.
* **Variance (exact).** With v_j = 2((L_j·B + γ_j)/ε)² the variance of one block of epoch j
  (:attr:`LaplaceNoise.variance`) and |d_h(p)| the balanced base-k digits of p,

      Var c̃(t) = Σ_{i<j} v_i + v_j·Σ_h |d_h(p)|,

  (the trees' noises are independent, and õ_i(n_i) is one block). No n appears anywhere: the
  counter runs for ever, epoch after epoch.
* **Cost against a counter sized for t.** With one fanout (epochs kʲ) the current tree has
  j + 1 levels where the best tree sized for t may need one fewer (t early in a long epoch),
  so the ratio to the sized tree's worst step reaches 2.2 – 2.5 at some t for every k
  (``bench/bench_unbounded.py``). The shipped schedule mixes fanouts and exponents so that
  every epoch's tree is about as deep as the sized tree at the steps it serves: its largest
  ratio on 16 points per octave, t = 2⁶ … 2²⁴, is stated in
  ``docs/results/counting_unbounded.md``. Beyond the table the last fanout continues.

Draws: epoch j's tree draws from the j-th child of the bit source, spawned one at a time as
the epochs start, so the streaming :class:`UnboundedKaryCounter` and the batch
:func:`unbounded_kary_release` release identical values with one seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np

from ..core._budget import Budget
from ..core._errors import DomainError, ParameterError
from ..core._random import BitSource, bit_source
from ..core._units import EventLevel, PrivacyGuarantee
from ..core._validation import check_positive, check_stream
from ._kary import KaryTreeCounter, _digits, _kary_release, kary_noise

__all__ = [
    "UnboundedKaryCounter",
    "UnboundedKaryRelease",
    "unbounded_kary_range_variance",
    "unbounded_kary_release",
    "unbounded_kary_variance",
]

_PROOF = (
    "[CSS11] §4 epochs (public lengths k_j^m_j), each a k-ary tree with negative digits at "
    "the full ε ([APT24], Laplace mechanism with Δ₁ = L_j·B) on disjoint steps: parallel "
    "composition; prefix sums are ±1 post-processing of the released blocks"
)
#: The shipped epochs (fanout k_j, exponent m_j: epoch j holds k_j^m_j steps), fitted offline
#: by ``bench/bench_unbounded.py --fit`` (a greedy search over odd k ∈ [3, 21], largest ratio
#: to the sized tree's worst step on 16 points per octave, t = 2⁶ … 2²⁴); after the table, the
#: last fanout with the exponent growing by one per epoch. Public constants, no data.
SCHEDULE: tuple[tuple[int, int], ...] = (
    (7, 2),
    (3, 3),
    (5, 2),
    (5, 2),
    (7, 2),
    (7, 2),
    (11, 2),
    (11, 2),
    (13, 2),
    (17, 2),
    (7, 3),
    (7, 3),
    (21, 2),
    (9, 3),
    (13, 3),
    (7, 4),
    (15, 3),
    (19, 3),
    (21, 3),
    (7, 5),
    (13, 4),
    (19, 4),
    (13, 5),
    (19, 5),
    (17, 6),
)


def _check_fanout(fanout: object, owner: str) -> int | None:
    if fanout is None:
        return None
    if (
        isinstance(fanout, bool)
        or not isinstance(fanout, Integral)
        or fanout < 3
        or fanout % 2 == 0
    ):
        raise ParameterError(
            f"The 'fanout' parameter of {owner} must be None (the shipped epochs) or an odd "
            f"integer >= 3 (balanced digits). Got {fanout!r} instead."
        )
    return int(fanout)


def _epoch(j: int, fanout: int | None) -> tuple[int, int]:
    """(k_j, m_j) of epoch j: k_j^m_j steps, a k_j-ary tree of m_j + 1 levels."""
    if fanout is not None:
        return fanout, j
    if j < len(SCHEDULE):
        return SCHEDULE[j]
    k, m = SCHEDULE[-1]
    return k, m + j - len(SCHEDULE) + 1


def _epochs(fanout: int | None, last: int) -> list[tuple[int, int, int]]:
    """(start S_j, fanout k_j, exponent m_j) of every epoch holding a step ≤ ``last``."""
    out, start, j = [], 0, 0
    while start < last:
        k, m = _epoch(j, fanout)
        out.append((start, k, m))
        start += k**m
        j += 1
    return out


def unbounded_kary_variance(
    steps: object, *, epsilon: float, bound: float, fanout: int | None = None
) -> np.ndarray:
    """Exact noise variance of c̃(t) for each step t ≥ 1 in ``steps`` (module notes).

    Var c̃(t) = Σ_{i<j} v_i + v_j·Σ_h |d_h(t − S_j)|: public inputs only, no stream length.
    """
    owner = "unbounded_kary_variance"
    eps = check_positive(epsilon, "epsilon", owner)
    bnd = check_positive(bound, "bound", owner)
    fan = _check_fanout(fanout, owner)
    t = np.asarray(steps)
    if t.dtype.kind not in "iu" or t.ndim > 1 or (t.size and int(t.min()) < 1):
        raise ParameterError(
            f"The 'steps' parameter of {owner} must be integers >= 1 (1-based steps). Got an "
            f"array of dtype {t.dtype} instead."
        )
    t = t.astype(np.int64).ravel()
    out = np.zeros(t.size, dtype=np.float64)
    if t.size == 0:
        return out
    closed = 0.0
    for start, k, m in _epochs(fan, int(t.max())):
        size = k**m
        v = kary_noise(size, epsilon=eps, bound=bnd, fanout=k).variance
        mask = (t > start) & (t <= start + size)
        if np.any(mask):
            units = np.abs(_digits(t[mask] - start, k, m + 1)).sum(axis=0)
            out[mask] = closed + v * units
        closed += v  # the epoch's total: one block (module notes)
    return out


def _prefix_blocks(t: int, fanout: int | None) -> dict[tuple[int, int, int], int]:
    """The signed blocks (epoch, level, index) → ±1 whose noisy sums make c̃(t) (t ≥ 0)."""
    out: dict[tuple[int, int, int], int] = {}
    for e, (start, k, m) in enumerate(_epochs(fanout, t)):
        if t >= start + k**m:  # a closed epoch: its total, one block of level m
            out[(e, m, 0)] = 1
            continue
        p = np.array([t - start], dtype=np.int64)
        digits = _digits(p, k, m + 1)[:, 0]
        pos = 0
        for h in reversed(range(m + 1)):
            d = int(digits[h])
            j = pos // k**h
            for b in range(j, j + d) if d > 0 else range(j + d, j):
                out[(e, h, b)] = 1 if d > 0 else -1
            pos += d * k**h
    return out


def unbounded_kary_range_variance(
    first: int, last: int, *, epsilon: float, bound: float, fanout: int | None = None
) -> float:
    """Exact noise variance of c̃(last) − c̃(first − 1), the sum of steps first..last (1-based,
    inclusive): blocks shared by both prefixes cancel, the others add v of their epoch."""
    owner = "unbounded_kary_range_variance"
    eps = check_positive(epsilon, "epsilon", owner)
    bnd = check_positive(bound, "bound", owner)
    fan = _check_fanout(fanout, owner)
    ok = all(not isinstance(v, bool) and isinstance(v, Integral) for v in (first, last))
    if not ok or not 1 <= first <= last:
        raise ParameterError(
            f"The 'first' and 'last' parameters of {owner} must be ints with 1 <= first <= "
            f"last. Got {first!r} and {last!r} instead."
        )
    hi, lo = _prefix_blocks(int(last), fan), _prefix_blocks(int(first) - 1, fan)
    var, epochs = 0.0, _epochs(fan, int(last))
    for key in hi.keys() | lo.keys():
        coef = hi.get(key, 0) - lo.get(key, 0)
        if coef:
            _, k, m = epochs[key[0]]
            var += coef * coef * kary_noise(k**m, epsilon=eps, bound=bnd, fanout=k).variance
    return var


@dataclass(frozen=True, slots=True, kw_only=True)
class UnboundedKaryRelease:
    """Prefix sums of the first t steps of an open stream (module notes)."""

    prefix_sums: np.ndarray
    """c̃(1..t) (index t − 1): identical to what :class:`UnboundedKaryCounter` pushes out."""
    fanout: int | None
    """None (the shipped epochs, :data:`SCHEDULE`) or k (odd): epoch j holds kʲ steps."""
    epsilon: float
    """Privacy loss ε of the whole (unbounded) stream."""
    bound: float
    """Public bound B."""
    guarantee: PrivacyGuarantee
    """Event-level ε-DP."""
    n: int = field(init=False)
    """Steps released so far."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", int(self.prefix_sums.size))
        self.prefix_sums.setflags(write=False)

    @property
    def variance(self) -> np.ndarray:
        """Exact noise variance of every released prefix sum."""
        out = unbounded_kary_variance(
            np.arange(1, self.n + 1), epsilon=self.epsilon, bound=self.bound, fanout=self.fanout
        )
        out.setflags(write=False)
        return out

    def range_variance(self, i: int, j: int) -> float:
        """Exact noise variance of the released sum of steps i..j (0-based, inclusive)."""
        return unbounded_kary_range_variance(
            i + 1, j + 1, epsilon=self.epsilon, bound=self.bound, fanout=self.fanout
        )


def _guarantee(epsilon: float) -> PrivacyGuarantee:
    return PrivacyGuarantee(unit=EventLevel(), budget=Budget(epsilon), proof=_PROOF)


def _unbounded_release(
    values: object,
    *,
    epsilon: float,
    bound: float,
    bits: BitSource,
    fanout: int | None = None,
    owner: str = "unbounded_kary_release",
) -> UnboundedKaryRelease:
    """Validate everything, then release epoch after epoch with noise from ``bits``."""
    eps = check_positive(epsilon, "epsilon", owner)
    bnd = check_positive(bound, "bound", owner)
    fan = _check_fanout(fanout, owner)
    vals = check_stream(values, "values", owner, bound=bnd)
    out = np.empty(vals.size, dtype=np.float64)
    closed = 0.0
    for start, k, m in _epochs(fan, vals.size):
        size = k**m
        child = bits.spawn(1)[0]
        part = vals[start : start + size]
        if part.size == size:  # a closed epoch: the batch tree (same draws as the counter)
            rel = _kary_release(part, epsilon=eps, bound=bnd, bits=child, fanout=k, owner=owner)
            sums = np.asarray(rel.prefix_sums)
        else:  # the open epoch: a tree sized for kʲ steps, fed the steps so far
            tree = KaryTreeCounter(size, epsilon=eps, bound=bnd, fanout=k, seed=child)
            sums = np.array([tree.push(float(x)) for x in part])
        out[start : start + part.size] = closed + sums
        closed += float(sums[-1])
    return UnboundedKaryRelease(
        prefix_sums=out, fanout=fan, epsilon=eps, bound=bnd, guarantee=_guarantee(eps)
    )


def unbounded_kary_release(
    values: object,
    *,
    epsilon: float,
    bound: float,
    fanout: int | None = None,
    seed: object = None,
) -> UnboundedKaryRelease:
    """Release the prefix sums of the first steps of an open stream (pure ε, no n).

    Parameters
    ----------
    values
        The steps so far, every value in [0, ``bound``].
    epsilon
        Privacy loss ε of the whole stream, however long it runs.
    bound
        Public bound B.
    fanout
        ``None`` (default): the shipped epochs (:data:`SCHEDULE`); or k, odd ≥ 3: epoch j
        holds kʲ steps and runs a k-ary tree.
    seed
        ``None`` (secure source) or an int / bit source (tests, not for release).

    Notes
    -----
    Var c̃(t) = Σ_{i<j} v_i + v_j·Σ_h |d_h(t − S_j)| (module notes). Closed epochs are
    released in batch; the open one is fed step by step (about 10 µs per step), so that the
    values are those :class:`UnboundedKaryCounter` pushes out.
    *Privacy*: event-level ε-DP: [APT24] trees on the disjoint epochs of [CSS11] §4, parallel
    composition; the prefix sums are post-processing.

    Examples
    --------
    >>> rel = unbounded_kary_release([1.0, 0.0, 2.0, 1.0], epsilon=1.0, bound=2.0, fanout=3,
    ...                              seed=7)
    >>> counter = UnboundedKaryCounter(epsilon=1.0, bound=2.0, fanout=3, seed=7)
    >>> [counter.push(x) for x in [1.0, 0.0, 2.0, 1.0]] == rel.prefix_sums.tolist()
    True
    """
    return _unbounded_release(
        values, epsilon=epsilon, bound=bound, bits=bit_source(seed), fanout=fanout
    )


class UnboundedKaryCounter:
    """Streaming pure-ε counter with no stream length: ``push(x)`` returns c̃(t) (module notes).

    State: the sum of the closed epochs' totals and the current epoch's
    :class:`KaryTreeCounter` (O(k·log t) noises in use). Same draws as
    :func:`unbounded_kary_release` with one seed.

    Examples
    --------
    >>> counter = UnboundedKaryCounter(epsilon=1.0, bound=1.0, fanout=3, seed=3)
    >>> _ = [counter.push(0.5) for _ in range(20)]
    >>> counter.steps, counter.epoch  # epochs of 1, 3, 9, 27 steps
    (20, 3)
    """

    def __init__(
        self,
        *,
        epsilon: float,
        bound: float,
        fanout: int | None = None,
        seed: object = None,
    ) -> None:
        owner = "UnboundedKaryCounter"
        self.epsilon = check_positive(epsilon, "epsilon", owner)
        self.bound = check_positive(bound, "bound", owner)
        self.fanout = _check_fanout(fanout, owner)
        self.guarantee = _guarantee(self.epsilon)
        self.steps = 0
        self.epoch = -1
        self._bits = bit_source(seed)
        self._tree: KaryTreeCounter | None = None
        self._closed = 0.0
        self._last = 0.0

    def push(self, x: float) -> float:
        """Add the next value (in [0, B]) and return the noisy prefix sum c̃(t)."""
        kind = type(x)
        if kind is not float and (kind is bool or not isinstance(x, Real)):
            raise DomainError(
                "The 'x' argument of UnboundedKaryCounter.push must be a finite real number."
            )
        val = float(x)
        if not 0.0 <= val <= self.bound:  # NaN fails too
            raise DomainError(
                "The 'x' argument of UnboundedKaryCounter.push must be finite and lie in "
                f"[0, {self.bound:g}] (the declared bound). Clip the value or declare a larger "
                "bound."
            )
        if self._tree is None or self._tree.steps == self._tree.n:
            if self._tree is not None:
                self._closed += self._last  # the closed epoch's total (module notes)
            self.epoch += 1
            k, m = _epoch(self.epoch, self.fanout)
            self._tree = KaryTreeCounter(
                k**m,
                epsilon=self.epsilon,
                bound=self.bound,
                fanout=k,
                seed=self._bits.spawn(1)[0],
            )
        self._last = self._tree.push(val)
        self.steps += 1
        return self._closed + self._last

    def variance(self, t: int | None = None) -> float:
        """Exact noise variance of c̃(t) (default: the last step pushed; 0 before any)."""
        t = self.steps if t is None else t
        if isinstance(t, bool) or not isinstance(t, Integral) or t < 0:
            raise ParameterError(
                "The 't' parameter of UnboundedKaryCounter.variance must be an int >= 0. "
                f"Got {t!r} instead."
            )
        if t == 0:
            return 0.0
        return float(
            unbounded_kary_variance(
                np.array([t]), epsilon=self.epsilon, bound=self.bound, fanout=self.fanout
            )[0]
        )
