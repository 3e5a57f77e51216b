"""Benchmark: smooth sensitivity of the λp-quantile ([NRS07] §3.1, [PAK19] §IV-C).

Prints the time of :func:`mechanisms.smooth_sensitivity_quantile` at m = 300,000 as a ratio to
``numpy.sort`` of the same data (a lower bound: the algorithm sorts first), measured in the same
run, and the O(m²) reference definition at m = 3,000 for scale.

    python bench/bench_quantile.py
"""

from __future__ import annotations

import math

import numpy as np
from _timing import best_of

from mechanisms import smooth_sensitivity_quantile, smoothing_parameters
from mechanisms.pak._quantile import _smooth_sensitivity_quantile_reference, quantile_rank


def main() -> None:
    rng = np.random.default_rng(0)
    bound = 1440.0  # [PAK19] §VII-A: minutes in a day
    _, b = smoothing_parameters(0.85, 2.0**-20)
    q = 0.85 * 0.005
    print(f"smoothing b = {b:.5f}, q = λp = {q}")

    m = 300_000
    values = np.minimum(rng.exponential(30.0, m), bound)
    rank = quantile_rank(m, q)
    t_sort = best_of(lambda: np.sort(values), 5)
    t_fast = best_of(lambda: smooth_sensitivity_quantile(values, rank, b, 0.0, bound), 5)
    print(
        f"m = {m:,}: numpy.sort {t_sort * 1e3:.1f} ms, smooth sensitivity "
        f"{t_fast * 1e3:.1f} ms, ratio {t_fast / t_sort:.1f}x sort"
    )

    small = values[:3000]
    r_small = quantile_rank(small.size, q)
    t_ref = best_of(
        lambda: _smooth_sensitivity_quantile_reference(small, r_small, b, 0.0, bound), 1
    )
    t_fast_small = best_of(lambda: smooth_sensitivity_quantile(small, r_small, b, 0.0, bound), 5)
    t_sort_small = best_of(lambda: np.sort(small), 5)
    print(
        f"m = 3,000: O(m²) reference {t_ref * 1e3:.1f} ms "
        f"({t_ref / t_sort_small:.0f}x sort), fast {t_fast_small * 1e3:.2f} ms "
        f"({t_fast_small / t_sort_small:.1f}x sort); reference extrapolated to m = {m:,}: "
        f"~{t_ref * (m / 3000) ** 2 / 60:.0f} min"
    )
    same = math.isclose(
        smooth_sensitivity_quantile(small, r_small, b, 0.0, bound),
        _smooth_sensitivity_quantile_reference(small, r_small, b, 0.0, bound),
        rel_tol=1e-12,
    )
    print(f"fast == reference at m = 3,000: {same}")


if __name__ == "__main__":
    main()
