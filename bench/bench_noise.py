"""Benchmark: 10⁷ lattice Laplace / Gaussian draws from the secure source vs numpy's float samplers.

Prints each time as a ratio to ``numpy.random.Generator.laplace`` (resp. ``.normal``) measured in
the same run. Usage: ``python bench/bench_noise.py [--size N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from _timing import best_of

from mechanisms import GaussianNoise, LaplaceNoise, SecureBits, bit_source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.size
    rng = np.random.default_rng(0)
    lap = LaplaceNoise(sensitivity=1.0, epsilon=1.0)
    gau = GaussianNoise(sigma=1.0)

    t_np_lap = best_of(lambda: rng.laplace(scale=1.0, size=n), args.repeat)
    t_np_nor = best_of(lambda: rng.normal(scale=1.0, size=n), args.repeat)
    t_sec = best_of(lambda: lap.sample(n, SecureBits()), args.repeat)
    t_seed = best_of(lambda: lap.sample(n, bit_source(1)), args.repeat)
    t_gau = best_of(lambda: gau.sample(n, SecureBits()), args.repeat)
    t_raw = best_of(lambda: SecureBits().random_raw(n), args.repeat)

    print(f"{n:,} draws, best of {args.repeat}; load average {os.getloadavg()[0]:.2f}")
    print(f"  numpy Generator.laplace (baseline)      {t_np_lap:7.3f} s   1.00x")
    print(f"  lattice Laplace, OS secure source       {t_sec:7.3f} s   {t_sec / t_np_lap:5.2f}x")
    print(f"  lattice Laplace, seeded PCG64           {t_seed:7.3f} s   {t_seed / t_np_lap:5.2f}x")
    t_urd = best_of(lambda: os.urandom(8 * n), args.repeat)
    print(f"  os.urandom of the same bytes            {t_urd:7.3f} s   {t_urd / t_np_lap:5.2f}x")
    print(f"  secure words alone (ChaCha20 keystream) {t_raw:7.3f} s   {t_raw / t_np_lap:5.2f}x")
    print(f"  numpy Generator.normal (baseline)       {t_np_nor:7.3f} s   1.00x")
    print(f"  lattice Gaussian, OS secure source      {t_gau:7.3f} s   {t_gau / t_np_nor:5.2f}x")
    print(f"  lattice Gaussian / lattice Laplace                  {t_gau / t_sec:5.2f}x")


if __name__ == "__main__":
    main()
