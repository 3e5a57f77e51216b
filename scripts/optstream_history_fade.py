"""Issue 22 diagnostic: how much of a cell's gap to the exact planner is the two-block variogram
window's fade of the public-history block.

The streaming planner's variogram (``VARIOGRAM_WINDOW = "blocks"``) reads the last L = 28
periods of public history as one block and, as the month's periods come in, weighs it by
(L − n)/L: the history leaves at its mean rate. The exact window (the periods state,
``STREAMING_STATE = False``) drops the oldest history days first. This script releases one
``auto + history`` cell of ``scripts/optstream_defaults.py`` (or one level-share variant) under

* ``exact``: the periods state (the issue's reference);
* ``now``: blocks, the history block leaving at its mean rate (``HISTORY_FADE = "mean"``,
  session 11's default);
* ``trend``: blocks, the history block leaving oldest first with its sums taken as linear in
  the period's position (``HISTORY_FADE = "trend"``: O(N w));
* ``weekly``: as ``trend`` with a weekly cycle in the fit (``HISTORY_FADE = "weekly"``);
* ``periods``: each history period's share of each node's roughness (summed over lags) kept,
  (L, N) numbers (``HISTORY_FADE = "periods"``, the release's default in session 12);
* ``lowrank``: the ``periods`` shares factored by their r leading directions over the nodes,
  (L, r) period profiles and r weights per node (``HISTORY_FADE = "lowrank"``,
  ``HISTORY_RANK = r``: O(N r), whatever L; the default since session 13, r = 8); ``--ranks 1 2
  4`` runs one state ``rank<r>`` per r;
* ``fix``: blocks, but while the previous block is the public history its periods leave oldest
  first, re-read from the history (a prototype, monkeypatched here: it holds the history's L
  periods of variogram sums, so its state grows with L; not the release's code);

and prints the paired differences against ``exact`` (same seeds as the table's).

Run: ``python scripts/optstream_history_fade.py regional Feb 100 --trials 6`` (main table,
``auto + history``) or ``... regional Jun 100 --variant equal`` (the share table's
``equal (ε/h)``; ``--variant root``: ``planned, target=root``). Seeded runs: an experiment.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pandas as pd

import dpstream
import planner._stream_planner as sp
from dpstream.pipelines import _autoplan
from planner._roughness import period_roughness

_SPEC = importlib.util.spec_from_file_location(
    "optstream_defaults", Path(__file__).with_name("optstream_defaults.py")
)
od = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(od)

L = sp.LOOKBACK
_ORIG = (sp.StreamPlanner.add_history, sp.StreamPlanner.update, sp.StreamPlanner.roughness)


def _add_history(self, ms):
    full = [m for m in ms if m.values.shape[1] == self.cfg.w][-L:]
    self._hist_rough = [period_roughness(m.values, m.noise, m.sampled) for m in full]
    self._hist_state = "filled"
    return _ORIG[0](self, ms)


def _update(self, m, plan=None, *, roughness=True):
    rotating = m.values.shape[1] == self.cfg.w and roughness and self._n_rough >= L
    if rotating:  # the block in progress becomes the previous one
        filled = getattr(self, "_hist_state", None) == "filled" and len(self._hist_rough) == L
        self._hist_state = "prev" if filled else None
    return _ORIG[1](self, m, plan, roughness=roughness)


def _roughness(self):
    if getattr(self, "_hist_state", None) == "prev" and self._n_rough < L:
        out = self._rough
        for r in self._hist_rough[self._n_rough :]:  # the history's last L - n periods
            out = r if out is None else out + r
        return out
    return _ORIG[2](self)


STATES = ("exact", "now", "trend", "weekly", "periods", "lowrank", "fix")


def _state(name: str) -> None:
    """Set the planner for state ``name`` (``rank<r>``: ``"lowrank"`` at rank r)."""
    _autoplan.STREAMING_STATE = name != "exact"
    if name.startswith("rank"):
        sp.HISTORY_RANK = int(name[4:])
        name = "lowrank"
    sp.HISTORY_FADE = name if name in ("trend", "weekly", "periods", "lowrank") else "mean"
    patched = (_add_history, _update, _roughness) if name == "fix" else _ORIG
    sp.StreamPlanner.add_history, sp.StreamPlanner.update, sp.StreamPlanner.roughness = patched


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=["regional", "household"])
    parser.add_argument("month", choices=list(od.MONTHS))
    parser.add_argument("alpha", type=float)
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--variant", choices=["equal", "root"], default=None)
    parser.add_argument("--states", nargs="+", choices=STATES, default=list(STATES))
    parser.add_argument(
        "--ranks",
        nargs="+",
        type=int,
        default=[sp.HISTORY_RANK],
        help="the ranks r of the lowrank state (one state rank<r> each)",
    )
    parser.add_argument("--csv", default=None, help="write the per-trial errors here")
    args = parser.parse_args()
    default = (sp.HISTORY_FADE, sp.HISTORY_RANK)
    ranks = [f"rank{r}" for r in args.ranks]
    states = [s for name in args.states for s in (ranks if name == "lowrank" else [name])]
    frame, hierarchy, root, leaves, year = od._data(args.dataset)
    cur, prev = od.MONTHS[args.month]
    truth = frame.loc[f"{year}-{cur}"][[root, *leaves]]
    history = frame.loc[f"{year}-{prev}"][leaves]
    rows = []
    for trial in range(args.trials):
        kw = {"epsilon": 1.0, "alpha": args.alpha, "hierarchy": hierarchy, "history": history}
        kw.update(od._NO_LEDGER)
        if args.variant is None:  # the main table's auto + history (method index 2)
            seed = 100_000 * 2 + 100 * trial + int(args.alpha)
        else:  # the share table's variant (index 0 or 3), without the prior
            i, extra = {"equal": (0, {"level_shares": "equal"}), "root": (3, {"target": "root"})}[
                args.variant
            ]
            kw.update(extra, prior=False)
            seed = 7_000 * i + 100 * trial + int(args.alpha)
        for name in states:
            _state(name)
            out = dpstream.release_optstream(truth[leaves], seed=seed, **kw)
            leaf, top, _ = od._errors(out, truth, leaves, root)
            rows.append({"trial": trial, "state": name, "leaves": leaf, "root": top})
    sp.HISTORY_FADE, sp.HISTORY_RANK = default
    d = pd.DataFrame(rows)
    if args.csv:
        d.to_csv(args.csv, index=False)
    if "exact" not in states:
        return
    for level, name, mean, se, n in od.paired_against_exact(d, states):
        print(f"{level:6s} {name} - exact: {mean:+.3f} ± {se:.3f} % ({n} pairs)")


if __name__ == "__main__":
    main()
