"""Issue 22 diagnostic: why the default ``auto`` (no history) is worse than the exact planner.

Releases one main-table ``auto`` cell of ``scripts/optstream_defaults.py`` (method index 0,
seed ``100 * trial + alpha``) under

* ``exact``: the periods state (``STREAMING_STATE = False``, the issue's reference);
* ``stream``: the default streaming state (``postproc.PriorState``, two-block variogram;
  relative folded weights, ``FOLD_RELATIVE``, since session 13);
* ``absolute``: the streaming state with session 7's absolute frozen weights (the default
  until session 12; ``sigma_frozen``, ``weights_frozen``, ``loo`` and ``linear`` below are
  variants of it);
* ``pin_first``: relative weights, the first released period held instead of folded (how
  much of what is left is that period's frozen relative weight; the default does this since
  ``HOLD_FIRST``);
* ``recent6``: the default with six held periods instead of seven;
* ``recent31``: the streaming state with ``recent = 31`` (nothing frozen in a month);
* ``prior_stream``: the exact planner (periods, exact variogram) whose prior -- for the plan
  and for the merge -- is the running sums' (isolates the prior from the variogram);
* ``plan_exact``: the exact planner's plan (k, shares from the exact prior), the running sums'
  prior merged into the release;
* ``plan_stream``: the running sums' plan, the exact prior merged;
* ``sigma_frozen`` / ``weights_frozen``: the streaming state with only σ̂² from the frozen
  moments (the forecast weighs every period at it exactly), or only the forecast's weights
  frozen (at the exact σ̂²): which of the two frozen parts is the gap;
* ``fold_linear``: the streaming state with ``postproc._prior.FOLD_LINEAR = True`` (the
  package's opt-in of the correction below);
* ``linear``: a prototype (here) of ``fold_linear``: the frozen weights corrected to first
  order in σ² around each period's fold σ_q² (the moments' correction iterated outside the
  package's iteration);
* ``loo``: the streaming state, a period folded at the σ̂² of the other periods (leave-one-out:
  the σ̂² it was folded at included its own excess, which biased σ̂² low);
* ``exact_pc0``: the exact planner with ``profile_prior(prior_count=0)`` (no pseudo-
  observations in the moments of σ̂², which ``PriorState`` does not have);

all monkeypatched here (never in the package), and prints the paired differences against
``exact`` (same seeds as the table's).

Run: ``python scripts/optstream_prior_gap.py regional Feb 100 --trials 10``. Seeded runs: an
experiment.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd

import dpstream
import planner._stream_planner as sp
import postproc._prior as _prior_module
from dpstream.pipelines import _autoplan
from postproc import profile_prior
from postproc._prior import _FLOOR, PriorState

_SPEC = importlib.util.spec_from_file_location(
    "optstream_defaults", Path(__file__).with_name("optstream_defaults.py")
)
od = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(od)

_ORIG_INIT, _ORIG_UPDATE, _ORIG_PLAN = (
    sp.StreamPlanner.__init__,
    sp.StreamPlanner.update,
    sp.StreamPlanner.plan,
)
_ORIG_STATE = _autoplan.PriorState
_ORIG_MODEL = _autoplan.profile_prior
MODE = {"side": None}  # None, or which prior a side-state exact planner uses


def _init(self, cfg, *, prior_model=None, prior_state=None):
    _ORIG_INIT(self, cfg, prior_model=prior_model, prior_state=prior_state)
    self._side = self._side_agg = None
    if MODE["side"] is not None and self.prior_model is not None and not self.streaming:
        self._side = PriorState(cfg.matrix.shape[0], cfg.w, days=sp.PRIOR_DAYS)
        if self._agg.size:
            self._side_agg = PriorState(self._agg.size, cfg.w, days=sp.PRIOR_DAYS)


def _update(self, m, plan=None, *, roughness=True):
    _ORIG_UPDATE(self, m, plan, roughness=roughness)
    if getattr(self, "_side", None) is not None and m.values.shape[1] == self.cfg.w:
        error, own = self._errors[-1], self._independent[-1]
        self._side.add(m.values, m.noise, m.sampled, error, own, public=plan is None)
        if self._side_agg is not None:
            a = self._agg
            self._side_agg.add(m.values[a], m.noise[a], np.asarray(m.sampled)[a], error[a],
                               np.ones(a.size, dtype=bool), public=plan is None)  # fmt: skip


def _side_prior(self, r):
    prior = self._side.prior(r, period=self.cfg.w)
    if prior is None:
        return None, None
    out = np.array(prior.variance, dtype=np.float64)
    if self._side_agg is not None:
        whole = self._side_agg.prior(r, period=self.cfg.w)
        if whole is not None:
            out[self._agg] = whole.variance
    return prior, out


def _plan(self, r=None, *, tail_of=None, scores=None):
    if getattr(self, "_side", None) is None:
        return _ORIG_PLAN(self, r, tail_of=tail_of, scores=scores)
    r = self.cfg.w if r is None else r
    exact = self._prior(r)
    side = _side_prior(self, r)
    planned, merged = {
        "both": (side, side),
        "plan_exact": (exact, side),
        "plan_stream": (side, exact),
    }[MODE["side"]]
    plan = self._call(r, tail_of, planned[0], planned[1], scores=scores)
    return plan, merged[0]


class _Absolute(PriorState):
    """Session 7's absolute frozen weights (the default until ``FOLD_RELATIVE``)."""

    def __init__(self, n_nodes, w, *, days=28, recent=7, shrink=True, relative=False):
        super().__init__(n_nodes, w, days=days, recent=recent, shrink=shrink, relative=relative)


class _Recent31(PriorState):
    def __init__(self, n_nodes, w, *, days=28, recent=31, shrink=True):
        super().__init__(n_nodes, w, days=days, recent=recent, shrink=shrink)


class _Recent6(PriorState):
    """The default with six held periods (with the first period held past them: seven)."""

    def __init__(self, n_nodes, w, *, days=28, recent=6, shrink=True):
        super().__init__(n_nodes, w, days=days, recent=recent, shrink=shrink)


class _PinFirst(PriorState):
    """Relative weights, the first released period held (weighted exactly) instead of folded:
    how much of the rest is that period's frozen relative weight (a diagnostic; the σ̂² a
    period is folded at here leaves the pinned period out)."""

    def add(self, *args, **kw):
        pinned = getattr(self, "_pin", None)
        self._held = [h for h in self._held if h is not pinned]
        super().add(*args, **kw)
        if pinned is None and self._held and not kw.get("public", False):
            self._pin = self._held[0]  # the first released period: stays held
        elif pinned is not None:
            self._held.insert(0, pinned)


class _Twin(PriorState):
    """Two states fed the same periods; :meth:`prior` forecasts with ``self``'s sums and
    held periods at the σ̂² of ``twin`` (which of the two is frozen picks the part)."""

    RECENT = (31, 7)

    def __init__(self, n_nodes, w, *, days=28, recent=None, shrink=True):
        mine, twin = self.RECENT  # (session 7's absolute frozen weights: what they isolate)
        super().__init__(n_nodes, w, days=days, recent=mine, shrink=shrink, relative=False)
        self.twin = PriorState(n_nodes, w, days=days, recent=twin, shrink=shrink, relative=False)

    def add(self, *args, **kw):
        super().add(*args, **kw)
        self.twin.add(*args, **kw)

    def prior(self, r=None, *, period=None):
        self._sigma2 = self.twin._sigma2  # σ̂² from the twin, forecast from self
        try:
            return super().prior(r, period=period)
        finally:
            del self._sigma2


class _MomentsFrozen(_Twin):
    """σ̂² from the frozen (recent = 7) moments, the forecast's weights exact."""


class _WeightsFrozen(_Twin):
    """σ̂² exact (recent = 31), the forecast's weights frozen (recent = 7)."""

    RECENT = (7, 31)


class _LeaveOut(_Absolute):
    """A period leaving the held ones is folded at the σ̂² of the other periods (the folded
    sums, the history and the other held periods), not at one that includes its own excess
    (absolute frozen weights otherwise)."""

    def _fold(self, held, sigma2):
        if self._held and self._held[0] is held:
            del self._held[0]
            try:
                sigma2 = self._sigma2(self.w)
            finally:
                self._held.insert(0, held)
        super()._fold(held, sigma2)


class _Linear(_Absolute):
    """Frozen weights corrected to first order in σ² (a prototype of an O(N w) fix): a
    period folded at σ_q² adds, beside its weighted terms, their derivatives in σ² (as sums
    of k·X and σ_q²·k·X), so that the sums are re-weighted at the current σ̂²:
    ``Σ g(σ²) X ≈ Σ g(σ_q²) X + (σ² − σ_q²) Σ g'(σ_q²) X``. A (node, step) whose corrected
    total weight falls below half the frozen one keeps the frozen terms."""

    _EXTRA = ("ka", "kay", "kayy", "karv", "kb", "kby", "kbyy", "kbrv",
              "u2y", "su2", "su2y", "u3", "su3", "u3e", "su3e")  # fmt: skip
    _ARRAYS = PriorState._ARRAYS + _EXTRA

    def _fold(self, held, sigma2):
        super()._fold(held, sigma2)
        y, rv, s, e, own, f = held
        c = np.flatnonzero(s[:, : self.w].any(axis=0))
        parts = self._excess(held, self.w, self._common(self.w), c)
        spread, mask = parts[1], parts[2]
        k = np.where(mask, f / (sigma2[:, None] + spread + _FLOOR) ** 3, 0.0)
        ks = k * sigma2[:, None]
        yc, rvc = y[:, c], rv[:, c]
        for a, b, x in (("ka", "kb", 1.0), ("kay", "kby", yc), ("kayy", "kbyy", yc * yc),
                        ("karv", "kbrv", rvc)):  # fmt: skip
            getattr(self, a)[:, c] += k * x
            getattr(self, b)[:, c] += ks * x
        u = np.maximum(e + sigma2[:, None], self._floor())
        u = own[:, None] / u
        u2, u3 = f * u * u, f * u * u * u
        q2 = sigma2[:, None]
        self.u2y += u2 * y
        self.su2 += q2 * u2
        self.su2y += q2 * u2 * y
        self.u3 += u3
        self.su3 += q2 * u3
        self.u3e += u3 * e
        self.su3e += q2 * u3 * e

    def _sigma2_rows(self, r, rows, folded, cols):
        if not folded:
            return super()._sigma2_rows(r, rows, folded, cols)
        base = {n: getattr(self, n)[rows, :r].copy() for n in ("g", "gy", "gyy", "grv")}
        sig = self.sigma2[rows]
        for _ in range(3):
            q = sig[:, None]
            new = {}
            for n, a, b in (("g", "ka", "kb"), ("gy", "kay", "kby"), ("gyy", "kayy", "kbyy"),
                            ("grv", "karv", "kbrv")):  # fmt: skip
                new[n] = base[n] + 2.0 * (
                    getattr(self, b)[rows, :r] - q * getattr(self, a)[rows, :r]
                )
            ok = new["g"] >= 0.5 * base["g"]
            saved = {}
            for n in base:
                arr = getattr(self, n)
                saved[n] = arr[rows, :r].copy()
                arr[rows, :r] = np.where(ok, new[n], base[n])
            self_sigma = self.sigma2[rows].copy()
            self.sigma2[rows] = sig
            try:
                sig = super()._sigma2_rows(r, rows, folded, cols)
            finally:
                for n in base:
                    getattr(self, n)[rows, :r] = saved[n]
                self.sigma2[rows] = self_sigma
        return sig

    def _prior_rows(self, r, rows, sigma2v, floor, period):
        q = sigma2v[:, None]
        names = ("wt", "wy", "w2", "w2e")
        base = {n: getattr(self, n)[rows, :r].copy() for n in names}
        g = lambda n: getattr(self, n)[rows, :r]  # noqa: E731
        new = {
            "wt": base["wt"] - q * base["w2"] + g("su2"),
            "wy": base["wy"] - q * g("u2y") + g("su2y"),
            "w2": base["w2"] - 2.0 * q * g("u3") + 2.0 * g("su3"),
            "w2e": base["w2e"] - 2.0 * q * g("u3e") + 2.0 * g("su3e"),
        }
        ok = (new["wt"] >= 0.5 * base["wt"]) & (new["w2"] >= 0.25 * base["w2"])
        try:
            for n in names:
                getattr(self, n)[rows, :r] = np.where(ok, new[n], base[n])
            return super()._prior_rows(r, rows, sigma2v, floor, period)
        finally:
            for n in names:
                getattr(self, n)[rows, :r] = base[n]


_CLASSES = {
    "absolute": _Absolute,
    "pin_first": _PinFirst,
    "recent6": _Recent6,
    "recent31": _Recent31,
    "linear": _Linear,
    "loo": _LeaveOut,
    "sigma_frozen": _MomentsFrozen,
    "weights_frozen": _WeightsFrozen,
}
STATES = ("exact", "stream", "absolute", "pin_first", "recent6", "recent31", "fold_linear",
          "linear", "loo", "sigma_frozen", "weights_frozen", "prior_stream", "plan_exact",
          "plan_stream", "exact_pc0")  # fmt: skip


def _state(name: str) -> None:
    sp.StreamPlanner.__init__, sp.StreamPlanner.update, sp.StreamPlanner.plan = (
        _init, _update, _plan
    )  # fmt: skip
    _prior_module.FOLD_LINEAR = name == "fold_linear"
    _autoplan.STREAMING_STATE = name in ("stream", "fold_linear") or name in _CLASSES
    _autoplan.PriorState = _CLASSES.get(name, _ORIG_STATE)
    _autoplan.profile_prior = (
        functools.partial(profile_prior, prior_count=0.0) if name == "exact_pc0" else _ORIG_MODEL
    )
    MODE["side"] = {"prior_stream": "both", "plan_exact": "plan_exact",
                    "plan_stream": "plan_stream"}.get(name)  # fmt: skip


def _restore() -> None:
    sp.StreamPlanner.__init__, sp.StreamPlanner.update, sp.StreamPlanner.plan = (
        _ORIG_INIT, _ORIG_UPDATE, _ORIG_PLAN
    )  # fmt: skip
    _autoplan.STREAMING_STATE = True
    _prior_module.FOLD_LINEAR = False
    _autoplan.PriorState = _ORIG_STATE
    _autoplan.profile_prior = _ORIG_MODEL
    MODE["side"] = None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=["regional", "household"])
    parser.add_argument("month", choices=list(od.MONTHS))
    parser.add_argument("alpha", type=float)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--states", nargs="+", choices=STATES, default=list(STATES))
    parser.add_argument("--csv", default=None, help="write the per-trial errors here")
    args = parser.parse_args()
    frame, hierarchy, root, leaves, year = od._data(args.dataset)
    cur, _ = od.MONTHS[args.month]
    truth = frame.loc[f"{year}-{cur}"][[root, *leaves]]
    rows = []
    for trial in range(args.trials):
        kw = {"epsilon": 1.0, "alpha": args.alpha, "hierarchy": hierarchy, **od._NO_LEDGER}
        seed = 100 * trial + int(args.alpha)  # the main table's auto (method index 0)
        for name in args.states:
            _state(name)
            out = dpstream.release_optstream(truth[leaves], seed=seed, **kw)
            leaf, top, _ = od._errors(out, truth, leaves, root)
            ks = [p["k"] for p in out.attrs.get("plan", []) if isinstance(p, dict) and "k" in p]
            rows.append({"trial": trial, "state": name, "leaves": leaf, "root": top,
                         "mean_k": float(np.mean(ks)) if ks else np.nan})  # fmt: skip
        _restore()
    d = pd.DataFrame(rows)
    if args.csv:
        d.to_csv(args.csv, index=False)
    if "exact" not in args.states:
        return
    print(f"{args.dataset} {args.month} {args.alpha:g}: {args.trials} trials")
    print(d.groupby("state")[["leaves", "root", "mean_k"]].mean().to_string())
    for level, name, mean, se, n in od.paired_against_exact(d, args.states):
        print(f"{level:6s} {name:12s} - exact: {mean:+.3f} ± {se:.3f} % ({n})")


if __name__ == "__main__":
    main()
