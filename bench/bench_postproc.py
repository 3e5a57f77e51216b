"""Benchmark: OptStream post-processing ([FV19] Alg. 4, §5.2), fast path vs cvxpy + OSQP.

(Also the previous dense exact path, ``method="dense"``; for hierarchies at size see
``bench_hierarchy.py``.)

A year of half-hours (365 periods x 48 steps) of a three-level hierarchy (nation -> 5 groups ->
30 regions) with the default features of [FV19] §6 and the paper's weights 1/m_i. Both solvers
run on the same noisy estimates in the same process; prints each time, the ratio, and the max
relative disagreement. The data are synthetic (daily load shapes) and the noise is drawn with
numpy: this simulation releases nothing.

Usage: ``python bench/bench_postproc.py [--periods 365] [--noise 300] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from postproc import FeatureSet, Hierarchy, project_consistent


def regional_hierarchy(groups: int = 5, per_group: int = 6) -> Hierarchy:
    children = {"nation": [f"g{g}" for g in range(groups)]}
    for g in range(groups):
        children[f"g{g}"] = [f"g{g}r{r}" for r in range(per_group)]
    return Hierarchy(children=children)


def synthetic_loads(rng: np.random.Generator, periods: int, leaves: int, w: int) -> np.ndarray:
    """Leaf-step loads (periods, leaves, w): a daily shape times a regional level, plus noise."""
    t = np.arange(w) / w
    shape = 1.0 + 0.35 * np.sin(2 * np.pi * (t - 0.3)) + 0.15 * np.sin(4 * np.pi * t)
    season = 1.0 + 0.3 * np.cos(2 * np.pi * np.arange(periods) / 365.0)
    level = rng.uniform(300.0, 3000.0, size=leaves)
    x = season[:, None, None] * level[None, :, None] * shape[None, None, :]
    return x * rng.lognormal(0.0, 0.05, size=x.shape)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--periods", type=int, default=365)
    parser.add_argument("--noise", type=float, default=300.0, help="Laplace scale of the noise")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    h = regional_hierarchy()
    fs = FeatureSet.default(48)
    x = synthetic_loads(rng, args.periods, len(h.leaves), fs.w)
    truth = h.matrix @ x @ fs.matrix.T
    estimates = truth + rng.laplace(0.0, args.noise, size=truth.shape)
    print(
        f"{args.periods} periods x {fs.w} steps, {len(h.nodes)} nodes ({len(h.leaves)} leaves, "
        f"height {h.height}), {fs.n_parts} feature parts, Laplace noise scale {args.noise:g}"
    )

    start = time.perf_counter()
    fast = project_consistent(estimates, hierarchy=h, features=fs, method="fast")
    t_fast = time.perf_counter() - start
    start = time.perf_counter()
    slow = project_consistent(estimates, hierarchy=h, features=fs, method="cvxpy")
    t_slow = time.perf_counter() - start
    start = time.perf_counter()
    dense = project_consistent(estimates, hierarchy=h, features=fs, method="dense")
    t_dense = time.perf_counter() - start

    gap = np.abs(fast.values - slow.values).max() / np.abs(fast.values).max()
    obj = np.max(np.abs(fast.objective - slow.objective) / fast.objective)
    print(
        f"fast path     : {t_fast:8.3f} s  (periods with active bounds: "
        f"{int((fast.n_active > 0).sum())}, bounds held at 0: {int(fast.n_active.sum())}, "
        f"max pivoting iterations: {int(fast.iterations.max())}, separable: {fast.separable})"
    )
    print(
        f"cvxpy + OSQP  : {t_slow:8.3f} s  (statuses: {sorted(set(slow.status))}, polish "
        f"succeeded on {int((slow.polish == 1).sum())}/{args.periods} periods)"
    )
    print(
        f"previous dense path: {t_dense:8.3f} s  (max pivoting iterations: "
        f"{int(dense.iterations.max())})"
    )
    print(f"time ratio cvxpy / fast          : {t_slow / t_fast:10.1f}x")
    print(f"time ratio dense / fast          : {t_dense / t_fast:10.1f}x")
    dgap = np.abs(fast.values - dense.values).max() / np.abs(fast.values).max()
    print(f"max relative disagreement fast vs dense: {dgap:.2e}")
    print(f"max relative disagreement (values): {gap:10.2e}")
    print(f"max relative objective difference : {obj:10.2e}")
    print(f"fast KKT residuals : { {k: f'{v:.1e}' for k, v in fast.kkt.items()} }")
    print(f"cvxpy KKT residuals: { {k: f'{v:.1e}' for k, v in slow.kkt.items()} }")
    errors = {
        "noisy": np.abs(estimates - truth)[..., : fs.w].mean(),
        "post-processed": np.abs(fast.parts - truth)[..., : fs.w].mean(),
    }
    print(f"mean abs error per node-step: { {k: round(float(v), 1) for k, v in errors.items()} }")


if __name__ == "__main__":
    main()
