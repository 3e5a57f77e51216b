"""The streaming BLT counter: ``push`` a value, get the released prefix sum ([DMRST24]).

The strategy, the lattice and its rounding bounds, the calibration and the batch release are in
:mod:`._blt` (module notes there); this module holds the counter that streams them: the push
generated per strategy (the d buffers of the encoder and of the decoder unrolled), the wide
encoder's sub-blocks (n > 2²⁰ and the open BLT of :mod:`._open_blt`) and ``push_many``.

The push (issue 27): the noise blocks do not depend on the data and are drawn ahead, 4,096
steps at a time, through the noise module's sampler (the batch release's blocks, in its order);
a step is then the d = 8 buffers of the encoder and of the decoder unrolled in plain doubles
(:func:`_push_function`), rint by adding 2⁵², the state in tuples: a single push costs less
than a binary-tree push (``bench/bench_factorisation.py``).
"""

from __future__ import annotations

import functools
import math
from numbers import Real

import numpy as np

from ..core._budget import Budget
from ..core._errors import DomainError, ParameterError
from ..core._noise import GaussianNoise
from ..core._random import bit_source
from ..core._samplers import discrete_gaussian
from ..core._units import EventLevel, PrivacyGuarantee
from ..core._validation import check_integer, clamp_stream
from ._blt import _PROOF, _SUB, _WIDE_FROM, BLTStrategy, _calibrate, _check
from ._factorisation import _BLOCK

__all__ = ["BLTCounter"]

#: push_many pushes fewer steps than this one at a time (cheaper than its filters).
_FEW = 128


@functools.lru_cache(maxsize=16)
def _carry_tables(strategy: BLTStrategy) -> tuple[np.ndarray, np.ndarray]:
    """(P, θᴸ): P[r, i] = ωᵢ·θᵢʳ for r < L by sequential products in extended precision (the
    γ_{r+1} of :func:`_block_slack`), rounded to doubles; θᵢᴸ the next power, in extended
    precision. Public constants, memoised."""
    th = np.array(strategy.theta, dtype=np.longdouble)
    steps = np.empty((_SUB + 1, th.size), dtype=np.longdouble)
    steps[0] = 1.0
    steps[1:] = th
    powers = np.cumprod(steps, axis=0)
    table = (powers[:_SUB] * np.array(strategy.omega, dtype=np.longdouble)).astype(np.float64)
    table.setflags(write=False)
    last = powers[_SUB].copy()
    last.setflags(write=False)
    return table, last


@functools.lru_cache(maxsize=16)
def _modes(strategy: BLTStrategy) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(λ, V, V⁻¹1, ωV) of M = Θ − 1ωᵀ = VΛV⁻¹: the decoder in M's eigenbasis (real: checked
    by :class:`BLTStrategy`). Public constants, memoised."""
    th = np.array(strategy.theta)
    om = np.array(strategy.omega)
    lam, vec = np.linalg.eig(np.diag(th) - np.outer(np.ones_like(th), om))
    lam, vec = lam.real, vec.real
    return lam, vec, np.linalg.solve(vec, np.ones_like(th)), om @ vec


#: 2⁵²: for 0 ≤ v < 2⁵², (v + 2⁵²) − 2⁵² is v rounded to an integer, half to even (as rint).
_TWO52 = 4503599627370496.0


def _push_source(d: int, wide: bool) -> str:
    """Source of :func:`_push_function` for d buffers (the unrolled step, module notes)."""
    idx = range(d)

    def row(fmt: str, sep: str = ", ") -> str:
        return sep.join(fmt.format(i=i) for i in idx)

    carry = (
        """
            r = t & MASK
            if not r:
                counter._next_carry(t)
            start = u + counter._carry[r]"""
        if wide
        else """
            start = u"""
    )
    return f"""
def factory({row("a{i}")}, {row("w{i}")}):
    def bind(counter, bound, scale, top, g):
        def push(x):
            if type(x) is not float or not 0.0 <= x <= bound:
                x = counter._clamp(x)
            t = counter._t
            pos = t & BLOCK_MASK
            if not pos:
                counter._draw_block(t)
            try:
                z = counter._block[pos]
            except IndexError:  # past n in the last block
                counter._draw_block(t)
            u = (x * scale + TWO52) - TWO52
            if u > top:
                u = top{carry}
            {row("e{i}")}, = counter._enc
            {row("q{i}")}, = counter._dec
            last = counter._last
            {row("q{i} = a{i} * q{i} + last", "; ")}
            counter._dec = ({row("q{i}")},)
            acc = start + {row("w{i} * e{i}", " + ")}
            counter._enc = ({row("a{i} * e{i} + u")},)
            step = ((acc + TWO52) - TWO52) + z - ({row("w{i} * q{i}", " + ")})
            counter._last = step
            counter._t = t + 1
            total = counter._sum + step
            counter._sum = total
            return total * g
        return push
    return bind
"""


@functools.lru_cache(maxsize=64)
def _push_function(strategy: BLTStrategy, wide: bool):
    """``bind(counter, B, 1/γ, ⌊B/γ⌋, γ)`` → the push of a counter with ``strategy``: the d
    buffers of the encoder and the decoder unrolled, the constants in the closure
    (:meth:`BLTCounter.push`, module notes); ``wide`` adds the sub-block's carry.

    Generated once per strategy from :func:`_push_source` (as :mod:`dataclasses` generates
    ``__init__``): a loop over the buffers costs the interpreter about twice the work. Per
    step, in this order (the floating-point operations of ``push_many`` and of the rounding
    bounds): q_t = Θq_{t−1} + 1·x̂_{t−1} (the decoder, deferred by a step); y_t = rint(u_t
    (+ carry) + ω₀s₀ + … + ω_{d−1}s_{d−1}) summed left to right (0 ≤ y < 2⁵², so rint is
    adding and subtracting 2⁵², half to even); s_{t+1} = Θs_t + 1·u_t; x̂_t = y_t + z_t − ω·q_t;
    c̃(t) = c̃(t − 1) + x̂_t.
    """
    namespace = {"TWO52": _TWO52, "MASK": _SUB - 1, "BLOCK_MASK": _BLOCK - 1}
    exec(_push_source(strategy.buffers, wide), namespace)  # our own template, no input
    return namespace["factory"](*strategy.theta, *strategy.omega)


class BLTCounter:
    """Streaming BLT counter: ``push(x)`` returns the prefix sum so far in O(d) per step.

    Sized to n in advance (σ depends on ‖c‖₂ over n steps). Draws the same noise blocks as
    :func:`blt_release` from the same bits; the releases agree to floating point (the two
    encodings may round a coordinate of y differently by one lattice step, both within η).

    Examples
    --------
    >>> counter = BLTCounter(4, epsilon=1.0, delta=1e-6, bound=2.0, seed=7)
    >>> sums = [counter.push(x) for x in [1.0, 0.0, 2.0, 1.0]]
    >>> from mechanisms.counting._blt import blt_release
    >>> rel = blt_release([1.0, 0.0, 2.0, 1.0], epsilon=1.0, delta=1e-6, bound=2.0, seed=7)
    >>> bool(np.allclose(sums, rel.prefix_sums, rtol=0, atol=1e-6))
    True
    """

    #: The wide encoder (module notes: sub-blocks, state in extended precision).
    _wide = False

    def __init__(
        self,
        n: int,
        *,
        epsilon: float,
        delta: float,
        bound: float,
        at: str = "max",
        seed: object = None,
    ) -> None:
        n, eps, dlt, bnd, strat = _check(n, epsilon, delta, bound, at, "BLTCounter")
        self._wide = n > _WIDE_FROM
        self._setup(n, eps, dlt, bnd, strat, _calibrate(n, eps, dlt, bnd, strat), seed)

    def _setup(self, n, eps, dlt, bnd, strat, cal, seed) -> None:
        """State of a counter of at most n steps with validated inputs and calibration."""
        self.n, self.epsilon, self.delta, self.bound, self.strategy = n, eps, dlt, bnd, strat
        self._cal = cal
        self._theta = list(strat.theta)
        self._omega = list(strat.omega)
        self._enc = (0.0,) * strat.buffers  # s (wide: the sub-block's part w of s)
        self._dec = (0.0,) * strat.buffers  # the decoder's buffers (same Θ, module notes)
        self._last = 0.0  # x̂ of the last step, not yet added to the decoder's buffers
        # wide encoder (module notes): ŝ at the sub-block's start (extended precision) and
        # the carry ω·Θʳŝ of its steps (doubles)
        self._base = np.zeros(strat.buffers, dtype=np.longdouble)
        self._carry: list[float] = []
        self._carry_array = np.zeros(0)
        th, om = np.array(strat.theta), np.array(strat.omega)
        reach = cal.units_bound * (1.0 + float(np.sum(om / (1.0 - th))))
        if not reach < 2.0**51:  # rint by adding 2⁵² needs 0 ≤ y < 2⁵² (public: never met)
            raise ParameterError(
                f"The 'bound' parameter of {type(self).__name__} is too large for its lattice."
            )
        self._bits = bit_source(seed)
        self._block: list[float] = []  # the current noise block (lattice units): step t
        self._block_array = np.zeros(0)  # draws its (t mod 4096)-th entry
        self._sum = 0.0
        self._t = 0
        self._bind()

    def _bind(self) -> None:
        """The instance's ``push``: the strategy's generated step bound to this counter's
        state and constants (:func:`_push_function`; 1/γ is exact, γ a power of two)."""
        cal = self._cal
        bind = _push_function(self.strategy, self._wide)
        self._step = bind(
            self, self.bound, 1.0 / cal.granularity, float(cal.units_bound), cal.granularity
        )
        self.push = self._step

    def __getstate__(self) -> dict:
        """State without the bound step (copies and pickles rebind their own)."""
        return {k: v for k, v in self.__dict__.items() if k not in ("push", "_step")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._bind()

    @property
    def noise(self) -> GaussianNoise:
        """One coordinate's noise (σ and the lattice γ, in the values' units)."""
        return GaussianNoise(
            sigma=self._cal.sigma_units * self._cal.granularity, granularity=self._cal.granularity
        )

    @property
    def guarantee(self) -> PrivacyGuarantee:
        """Event-level (ε, δ) of the whole stream of n steps."""
        return PrivacyGuarantee(
            unit=EventLevel(), budget=Budget(self.epsilon, self.delta), proof=_PROOF
        )

    def push(self, x: float) -> float:
        """Add step t's value and return the released prefix sum c̃(t).

        ``x`` is clamped to [0, B] (as :meth:`BinaryTreeCounter.push`: an error that depends
        on a private value would leak it); a non-number or NaN raises a typed error. O(d) in
        plain doubles: the encoder's and decoder's buffers, unrolled (module notes).
        """
        return self._step(x)

    def _clamp(self, x: object) -> float:
        """``x`` as a float in [0, B]: clamped (an error that depends on a private value would
        leak it), or a typed error for a non-number or NaN (nothing consumed)."""
        kind = type(x)
        if kind is not float and (kind is bool or kind is np.bool_ or not isinstance(x, Real)):
            raise DomainError(
                f"The 'x' argument of {type(self).__name__}.push must be a real number. Got "
                f"{kind.__name__}."
            )
        xf = float(x)
        if math.isnan(xf):
            raise DomainError(
                f"The 'x' argument of {type(self).__name__}.push must be a number, not NaN (a "
                "NaN cannot be clamped to the bound). Impute missing values before pushing."
            )
        return min(max(xf, 0.0), self.bound)

    def _draw_block(self, t: int) -> None:
        """Draw the noise block that starts at step t (t a multiple of the block size): the
        blocks of :func:`blt_release`, in its order, from the same bits. Refuses a step
        beyond n (nothing drawn)."""
        if t >= self.n:
            raise ParameterError(
                f"{type(self).__name__} was sized for n={self.n} steps; every step has been "
                "pushed. Size a new counter for the whole stream."
            )
        self._block_array = discrete_gaussian(
            self._bits, min(_BLOCK, self.n - t), self._cal.sigma_units
        )
        self._block = self._block_array.tolist()

    def _next_carry(self, t: int) -> None:
        """At a sub-block's first step t₀ (a multiple of L): ŝ(t₀) = fl(θᴸ·ŝ(t₀ − L)) + w in
        extended precision, w back to zero, and the carry ω·Θʳŝ(t₀) of its steps, in doubles
        (:func:`_block_slack`)."""
        table, last = _carry_tables(self.strategy)
        base = last * self._base + np.array(self._enc, dtype=np.longdouble)
        self._base = base
        self._enc = (0.0,) * base.size
        size = min(_SUB, self.n - t)
        self._carry_array = table[:size] @ base.astype(np.float64)
        self._carry = self._carry_array.tolist()

    def push_many(self, values: object) -> np.ndarray:
        """Push several steps at once and return their released prefix sums, one per step.

        The same release as calling :meth:`push` on each value (the same noise blocks from the
        same bits, the same encoding ŷ to the last bit: the encoder's buffers run as
        first-order filters, ``scipy.signal.lfilter``, whose two roundings per step are the
        push's); the decoder, post-processing of ŷ, runs in the eigenbasis of M = Θ − 1ωᵀ
        (module notes) and agrees with :meth:`push` to floating point (a chunk of fewer than
        128 steps is simply pushed step by step: cheaper than the filters). Steps may be mixed
        freely with :meth:`push`. Values are clamped to [0, B] as in :meth:`push`; a
        non-number or NaN raises a typed error before anything is consumed.

        Parameters
        ----------
        values
            The next steps' values (one-dimensional; may be empty).

        Returns
        -------
        numpy.ndarray
            c̃(t) for each pushed step.
        """
        return self._push_many(values, "BLTCounter.push_many", encoding=False)[0]

    def _push_many(
        self, values: object, owner: str, *, encoding: bool = True
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """:meth:`push_many`, also returning the published encoding γ·ŷ of the steps (unless
        ``encoding`` is false: then a chunk of fewer than 128 steps is pushed one step at a
        time, which costs less than the filters' set-up; the same encoder, bit for bit)."""
        from scipy.signal import lfilter

        arr, _ = clamp_stream(values, "values", owner, bound=self.bound)  # typed errors first
        t, k, cal = self._t, arr.size, self._cal
        if t + k > self.n:
            raise ParameterError(
                f"{type(self).__name__} was sized for n={self.n} steps; {t} have been pushed, so "
                f"{self.n - t} remain and {k} were given. Size a new counter for the whole "
                "stream."
            )
        if k == 0:
            return np.zeros(0), np.zeros(0)
        if k < _FEW and not encoding:
            push = self._step
            return np.array([push(v) for v in arr.tolist()]), None
        units = np.clip(arr, 0.0, self.bound)
        units /= cal.granularity  # as push: x/γ, rounded half to even, clipped
        np.rint(units, out=units)
        np.clip(units, 0.0, cal.units_bound, out=units)
        if self._wide:  # sub-block by sub-block, each with its carry (module notes)
            acc = np.empty(k)
            done = 0
            while done < k:
                start = (t + done) % _SUB
                rows = min((k - done) // _SUB, 64) if start == 0 else 0
                if rows:  # whole sub-blocks, as rows
                    span = rows * _SUB
                    block = units[done : done + span].reshape(rows, _SUB)
                    acc[done : done + span] = self._encode_rows(block, t + done).ravel()
                    done += span
                    continue
                if start == 0:
                    self._next_carry(t + done)
                take = min(k - done, len(self._carry) - start)
                acc[done : done + take] = self._encode(
                    units[done : done + take], self._carry_array[start : start + take]
                )
                done += take
        else:
            acc = self._encode(units, None)
        noise = np.empty(k)
        done = 0
        while done < k:  # the noise blocks of push, drawn at the same steps
            start = (t + done) % _BLOCK
            if start == 0:
                self._draw_block(t + done)
            take = min(k - done, len(self._block) - start)
            noise[done : done + take] = self._block_array[start : start + take]
            done += take
        encoded = np.rint(acc).astype(np.float64) + noise  # ŷ (integers, exact)
        lam, vec, gain, out = _modes(self.strategy)
        dec = [a * q + self._last for a, q in zip(self._theta, self._dec, strict=True)]
        q = np.linalg.solve(vec, np.array(dec))  # decoder state q_t in M's eigenbasis
        back = np.zeros(k)
        for j in range(lam.size):  # q̃_{t+1} = Λ q̃_t + V⁻¹1·ŷ_t; ω·q_t = (ωV)·q̃_t
            q_j = lfilter([0.0, gain[j]], [1.0, -lam[j]], encoded, zi=[q[j]])[0]
            back += out[j] * q_j
            q[j] = q_j[-1]
        steps = encoded - back  # x̂_t = ŷ_t − ω·q_t
        self._dec = tuple((vec @ q).tolist())  # as push leaves it: the last q and x̂ (deferred)
        self._last = float(steps[-1])
        steps[0] += self._sum  # c̃ accumulated in the push's order
        sums = np.cumsum(steps)
        self._sum = float(sums[-1])
        self._t = t + k
        return sums * cal.granularity, encoded * cal.granularity

    def _encode(self, units: np.ndarray, carry: np.ndarray | None) -> np.ndarray:
        """u + (carry) + ω·s for consecutive steps, the buffers as first-order filters
        (``scipy.signal.lfilter``: the push's two roundings per step, so the same doubles),
        summed in the push's order; moves the encoder's buffers."""
        from scipy.signal import lfilter

        acc = units.copy() if carry is None else units + carry
        one = np.array([0.0, 1.0])
        enc = []
        for th, w, e in zip(self._theta, self._omega, self._enc, strict=True):
            s_i, zf = lfilter(one, np.array([1.0, -th]), units, zi=np.array([e]))
            acc += w * s_i  # the push's order: u (+ carry), then ω₀s₀, ω₁s₁, ...
            enc.append(float(zf[0]))
        self._enc = tuple(enc)
        return acc

    def _encode_rows(self, block: np.ndarray, t: int) -> np.ndarray:
        """:meth:`_encode` of whole sub-blocks (rows of ``block``, the first starting at step t,
        a multiple of L): each row's buffers from zero as 2-D filters, then the chain of bases
        and carries (:meth:`_next_carry`, row by row), then the sums in the push's order. The
        same doubles as the push (a row's filter is the push's recursion from zero)."""
        from scipy.signal import lfilter

        rows = block.shape[0]
        one, zero = np.array([0.0, 1.0]), np.zeros((rows, 1))
        dens = [np.array([1.0, -th]) for th in self._theta]
        ends = np.empty((rows, len(dens)))
        for i, den in enumerate(dens):
            ends[:, i] = lfilter(one, den, block, axis=1, zi=zero)[1][:, 0]
        acc = np.empty_like(block)
        for j in range(rows):
            self._next_carry(t + j * _SUB)
            acc[j] = block[j] + self._carry_array
            self._enc = tuple(ends[j].tolist())  # w at the row's end
        for w, den in zip(self._omega, dens, strict=True):
            acc += w * lfilter(one, den, block, axis=1, zi=zero)[0]
        return acc

    def variance(self, t: int | None = None) -> float:
        """Exact noise variance of c̃(t) (default: the last step pushed)."""
        t = self._t if t is None else check_integer(t, "t", "BLTCounter.variance")
        b = np.cumsum(self.strategy.inverse_coefficients(max(t, 1)))[:t]
        sig = self._cal.sigma_units * self._cal.granularity
        return float(b @ b) * sig * sig
