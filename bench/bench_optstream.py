"""Benchmark: a year of the bundled regional hierarchy post-processed, fast path vs cvxpy + OSQP.

The real problem of ``dpstream.release_optstream`` on ``dpstream.load_regional()`` (2016: 366
periods of 48 half-hours, national -> 4 regions, the default features of [FV19] §6): OptStream's
noisy measurements are drawn once (seeded: an experiment, not a release), then Algorithm 4 is
solved over the whole year by both paths of :func:`postproc.project_consistent` on the same
estimates, in the same process, for three weightings:

* ``LS, variance``: the pipeline's default (L1 sampler, inverse error variances with the
  interpolation-bias term): the weights differ in every period (per-period sample sets), so
  the fast path factors every period densely and cvxpy compiles one problem per period;
* ``ES, variance``: equally spaced samples: one weight matrix for the whole year;
* ``LS, paper``: [FV19]'s 1/m_i, separable: the Kronecker closed form.

Prints the time of each path, their ratio, and the largest relative disagreement of the
released values (they solve the same strictly convex problem).

Usage: ``python bench/bench_optstream.py [--epsilon 1] [--alpha 10] [--seed 0]``.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core per path: OSQP is single-threaded too

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import dpstream  # noqa: E402

try:  # the pipeline's weights moved to the per-period module with the release store
    from dpstream.pipelines._period import _weights  # noqa: E402
except ImportError:  # trees before the store
    from dpstream.pipelines._optstream_pipeline import _weights  # noqa: E402
from mechanisms.optstream._estimates import optstream_estimates  # noqa: E402
from postproc import FeatureSet, Hierarchy, project_consistent  # noqa: E402

W = 48


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--alpha", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    tree = Hierarchy(children=dpstream.regional_hierarchy())
    levels = [[tree.index(n) for n in level] for level in tree.levels]
    data = dpstream.load_regional()[list(tree.nodes)].to_numpy()
    x = data.reshape(-1, W, len(tree.nodes)).transpose(0, 2, 1)  # (366, 5, 48)
    fs = FeatureSet.default(W)
    print(
        f"{x.shape[0]} periods x {W} steps, {len(tree.nodes)} nodes, {fs.n_parts} parts per "
        f"node; epsilon={args.epsilon:g}, alpha={args.alpha:g} kW"
    )
    for sampling, weights in (("l1", "variance"), ("equal", "variance"), ("l1", "paper")):
        est = optstream_estimates(
            x,
            epsilon=args.epsilon,
            k=10,
            alpha=args.alpha,
            sampling=sampling,
            features=fs.partitions,
            levels=levels,
            seed=args.seed,
        )
        kw = _weights(est, fs, levels, weights)
        times, out = {}, {}
        for method in ("fast", "cvxpy"):
            start = time.perf_counter()
            out[method] = project_consistent(
                est.estimates, hierarchy=tree, features=fs, method=method, **kw
            )
            times[method] = time.perf_counter() - start
        fast, slow = out["fast"], out["cvxpy"]
        gap = np.abs(fast.values - slow.values).max() / np.abs(fast.values).max()
        err = np.abs(fast.values - x).mean()
        print(
            f"{'LS' if sampling == 'l1' else 'ES'}, {weights:8s}: fast {times['fast']:7.3f} s "
            f"(separable {fast.separable}, periods with bounds {int((fast.n_active > 0).sum())})"
            f" | cvxpy+OSQP {times['cvxpy']:7.2f} s ({sorted(set(slow.status))}) | ratio "
            f"{times['cvxpy'] / times['fast']:6.1f}x | max rel. disagreement {gap:.1e} | "
            f"mean |x̂ - x| {err:.0f} kW"
        )


if __name__ == "__main__":
    main()
