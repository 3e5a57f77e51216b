"""Benchmark of the PAK planner ([PAK19] §VI-A): one plan at m = 300,000.

Prints (1) the time of plan_pak as a ratio to sorting the prefix once (np.sort, same run), and
(2) TNC against L-BFGS-B and SLSQP on the same objective, same starts: time and optimum α.

    python bench/bench_planner.py
"""

from __future__ import annotations

import time

import numpy as np
from _timing import best_of

from planner import PakObjective, plan_pak, solve_pak

N, BOUND, M = 25_000_000, 1440.0, 300_000
FACTS = {"n": N, "bound": BOUND, "epsilon": 1.0, "delta": 2.0**-20, "beta": 0.02}


def main() -> None:
    rng = np.random.default_rng(2019)
    prefix = np.minimum(rng.gamma(2.0, 15.0, size=M), BOUND)  # PAK-like trips, minutes
    t_sort = best_of(lambda: np.sort(prefix), repeat=5)
    t_plan = best_of(lambda: plan_pak(prefix, **FACTS), repeat=1)
    plan = plan_pak(prefix, **FACTS)
    print(
        f"m = {M:,}: np.sort {t_sort * 1e3:.1f} ms, plan_pak {t_plan:.2f} s "
        f"-> ratio {t_plan / t_sort:.0f}x sort; IF = {plan.improvement_factor:.3f}"
    )
    obj_args = {**FACTS, "p_max": 0.005}
    print(
        f"{'method':<10}{'time (s)':>10}{'nfev':>8}{'alpha (relaxed)':>18}{'alpha (exact)':>16}"
        f"{'IF':>8}"
    )
    ref = None
    for method in ("TNC", "L-BFGS-B", "SLSQP"):
        obj = PakObjective(np.sort(prefix), **obj_args)
        t0 = time.perf_counter()
        z, f, nfev = solve_pak(obj, method=method)
        dt = time.perf_counter() - t0
        r, p, share, betas = obj.decode(z)
        exact = obj.exact(r=r, lam=obj.lam_from(z), p=p, share=share, betas=betas).error_bound
        ref = ref or dt
        print(
            f"{method:<10}{dt:>10.2f}{nfev:>8}{f:>18.1f}{exact:>16.1f}"
            f"{obj.baseline_error_bound / exact:>8.3f}   ({dt / ref:.2f}x TNC time)"
        )


if __name__ == "__main__":
    main()
