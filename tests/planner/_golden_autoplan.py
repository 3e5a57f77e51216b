"""Golden outputs of ``release_optstream(k="auto")`` recorded with seeds BEFORE issue 22's
planner rebuild (commit e6d6b85), for ``test_stream_planner_golden.py``.

    python tests/planner/_golden_autoplan.py   # rewrites tests/planner/data/autoplan_golden.npz

Only re-record on purpose (the test pins today's plans and releases to rounding).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

import dpstream

OUT = Path(__file__).with_name("data") / "autoplan_golden.npz"


def frame(n_leaves: int, days: int, seed: int = 0) -> pd.DataFrame:
    idx = pd.date_range("2016-03-01", periods=48 * days, freq="30min")
    rng = np.random.default_rng(seed)
    t = np.arange(idx.size)
    base = 50 + 30 * np.sin(2 * np.pi * t / 48) + 10 * np.sin(2 * np.pi * t / 16)
    walk = np.cumsum(rng.normal(0, 2, (idx.size, n_leaves)), axis=0)
    values = base[:, None] * rng.uniform(0.5, 2, n_leaves)[None, :] + walk
    values = np.clip(values + rng.uniform(0, 5, values.shape), 0, None)
    return pd.DataFrame(values, index=idx, columns=[f"f{i}" for i in range(n_leaves)])


def tree(n_sub: int, per: int) -> dict:
    children = {"national": [f"s{i}" for i in range(n_sub)]}
    for i in range(n_sub):
        children[f"s{i}"] = [f"f{i * per + j}" for j in range(per)]
    return children


def cases() -> dict:
    """name -> (frame, kwargs) of every recorded release."""
    hist = frame(8, 3, seed=5)
    return {
        "flat": (frame(5, 6), dict(epsilon=1.0, alpha=5.0, seed=1)),
        "small_tree": (frame(8, 6), dict(epsilon=1.0, alpha=5.0, hierarchy=tree(2, 4), seed=2)),
        "large_tree": (frame(80, 4), dict(epsilon=0.5, alpha=5.0, hierarchy=tree(8, 10), seed=3)),
        "auto_noise": (
            frame(8, 5),
            dict(epsilon=1.0, alpha=5.0, hierarchy=tree(2, 4), delta=1e-6, noise="auto", seed=4),
        ),
        "history": (
            frame(8, 4, seed=1),
            dict(epsilon=1.0, alpha=2.0, hierarchy=tree(2, 4), history=hist, seed=6),
        ),
        "no_prior_leaves": (
            frame(8, 5),
            dict(
                epsilon=2.0, alpha=5.0, hierarchy=tree(2, 4), prior=False, target="leaves", seed=7
            ),
        ),
        "tail": (frame(6, 3).iloc[:-10], dict(epsilon=1.0, alpha=5.0, seed=8)),
        # k changes (6 -> 48 -> 32): the window rule between differently planned periods
        "k_changes": (frame(8, 6), dict(epsilon=20.0, alpha=1.0, hierarchy=tree(2, 4), seed=1)),
        "history_long": (
            frame(8, 4, seed=1),
            dict(
                epsilon=0.1, alpha=20.0, hierarchy=tree(2, 4), history=frame(8, 10, seed=5), seed=9
            ),
        ),
        "history_rough": (
            frame(8, 4, seed=1),
            dict(
                epsilon=20.0, alpha=1.0, hierarchy=tree(2, 4), history=frame(8, 10, seed=5), seed=10
            ),
        ),
    }


def run(name: str) -> tuple[np.ndarray, str]:
    df, kw = cases()[name]
    if "history" in kw:
        h = kw["history"]
        h = h.set_axis(df.columns, axis=1)
        h.index = pd.date_range(
            end=df.index[0] - pd.Timedelta("30min"), periods=len(h), freq="30min"
        )
        kw = {**kw, "history": h}
    out = dpstream.release_optstream(df, **kw)
    plans = [
        {
            key: p[key]
            for key in ("k", "noise", "shares", "budget", "predicted", "predicted_with_prior")
        }
        for p in out.attrs["plan"]
    ]
    return out.to_numpy(), json.dumps(plans)


def main() -> None:
    arrays = {}
    for name in cases():
        values, plans = run(name)
        arrays[f"{name}_values"] = values
        arrays[f"{name}_plans"] = np.array(plans)
        print(name, plans[:300])
    OUT.parent.mkdir(exist_ok=True)
    np.savez_compressed(OUT, **arrays)


if __name__ == "__main__":
    main()
