"""Issue 23: how often PAK's released threshold is ≤ 0 or below the quantile, and the guard.

Mechanism 1 releases τ = τ' + (S/a)·Z, τ' = x̂_λp + (S/a)·G⁻¹(1 − β_lt) ([PAK19] Eqs. 6, 12),
then θ = r·τ clipped to [0, B]. Where S/a ≫ B a draw r·τ ≤ 0 clipped every value to ~0 (the
whole sum lost); the guard (``pak_release(guard=True)``, the default) runs such a release at B
(``mechanisms.pak.mechanism_threshold``). For each bundled stream and each planned setting this
prints, from the calibration on the prefix (a measurement: x̂_λp and S are private values, read
here for the analysis only, nothing is released):

* Pr[r·τ ≤ 0] (Laplace: ½·e^{−τ'·a/S}): before the guard θ = 0, after it θ = B;
* Pr[0 < r·τ < x̂_λp]: a small positive θ below the data's quantile (not detectable from the
  released value; left as [PAK19] has it);
* of seeds 0–59, how many released r·τ ≤ 0 (the first draw of ``pak_release(seed=s)``).

``--ranges`` also re-runs the PAK rows of ``docs/results/std_errors_calibration.md`` (60 CLI
releases, ``scripts/std_errors_calibration.py``'s ``range_table``) and prints them with the
per-seed θ. Writes ``docs/results/pak_threshold_guard.md`` (``--ranges``: its section too).
Run: ``python scripts/pak_threshold_guard.py [--ranges]``. Seeded runs: experiments.
"""

from __future__ import annotations

import argparse
import functools
import math
import time
from pathlib import Path

import numpy as np

from dpstream.datasets import (
    HOUSEHOLD_MINUTES_BOUND,
    RETAIL_BOUND,
    household_minutes_stream,
    retail_stream,
)
from mechanisms import bit_source, pak_threshold_calibration
from mechanisms.pak._threshold import _release_threshold
from planner import pak_defaults, plan_pak_mse

OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "pak_threshold_guard.md"
TABLE_I = {"r": 1.5, "lam": 0.85, "eps1_share": 0.85, "p": 0.005, "beta_lt": 0.004}
SEEDS = 60
RANGES = "\n## The PAK rows of `std_errors_calibration.md`, guarded"


def _laplace_cdf(z: float) -> float:
    return 0.5 * math.exp(z) if z < 0 else 1.0 - 0.5 * math.exp(-z)


def measure(x, m, bound, eps, delta, params) -> dict:
    """Pr[r·τ ≤ 0], Pr[0 < r·τ < x̂_λp] and the seeds' count of r·τ ≤ 0 for ``params``."""
    cal = pak_threshold_calibration(
        x[:m], bound=bound, epsilon=params["eps1_share"] * eps, delta=delta, lam=params["lam"],
        p=params["p"], beta_lt=params["beta_lt"], r=params["r"],
    )  # fmt: skip
    s = cal.scale
    p_zero = _laplace_cdf(-cal.tau_prime / s)
    p_low = _laplace_cdf((cal.quantile / cal.r - cal.tau_prime) / s) - p_zero
    fired = [
        s_
        for s_ in range(SEEDS)
        if _release_threshold(cal, bit_source(s_), clip=False).unclipped <= 0.0
    ]
    return {
        "quantile": cal.quantile,
        "scale": s,
        "tau_prime": cal.tau_prime,
        "p_zero": p_zero,
        "p_low": p_low,
        "fired": fired,
    }


def settings():
    """(stream, m, B, ε, δ, label, parameters) of the planned settings measured."""
    hh = np.asarray(household_minutes_stream(), dtype=np.float64)
    hb = float(HOUSEHOLD_MINUTES_BOUND)
    retail = np.asarray(retail_stream(clip_to=RETAIL_BOUND), dtype=np.float64)
    rb = float(RETAIL_BOUND)
    cases = [
        ("household minutes, first 30,000 (std-errors CLI)", hh[:30_000], 10_000, hb, 1.0, 1e-6),
        ("household minutes, whole stream", hh, 50_000, hb, 1.0, 2.0**-20),
        ("household minutes, whole stream", hh, 50_000, hb, 0.1, 2.0**-20),
        ("retail invoices", retail, min(50_000, retail.size // 5), rb, 1.0, 2.0**-20),
        ("retail invoices", retail, min(50_000, retail.size // 5), rb, 0.1, 2.0**-20),
    ]
    for name, x, m, b, eps, dlt in cases:
        d = pak_defaults(n=x.size, bound=b, epsilon=eps, delta=dlt, time_lag=m)
        yield name, x, m, b, eps, dlt, "CLI default (pak_defaults)", d.release_parameters()
        yield name, x, m, b, eps, dlt, "[PAK19] Table I", TABLE_I
        for guard in (False, True):
            plan = _mse_plan(x, m, b, eps, dlt, guard)
            label = f"plan_pak_mse, {'guarded' if guard else 'unguarded'} law"
            if plan.use_threshold:
                yield name, x, m, b, eps, dlt, label, plan.release_parameters()


def _mse_plan(x, m, b, eps, dlt, guard: bool):
    """``plan_pak_mse`` with its τ law guarded (the default) or as before the guard."""
    import planner._pak_defaults as defaults
    import planner._pak_mse as mse

    original = defaults.pak_mean_square_error
    mse.pak_mean_square_error = functools.partial(original, guard=guard)
    try:
        return plan_pak_mse(x[:m], n=x.size, bound=b, epsilon=eps, delta=dlt)
    finally:
        mse.pak_mean_square_error = original


def ranges_section() -> list[str]:
    """The PAK rows of std_errors_calibration.md re-run, and each seed's θ."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from std_errors_calibration import _markdown, range_table

    import dpstream
    from dpstream.pipelines import release_pak

    table = range_table(SEEDS, n=30_000, lag=10_000, methods=("pak",))
    x = dpstream.household_minutes().to_numpy()[:30_000]
    thetas = []
    for seed in range(SEEDS):
        rel = release_pak(x, bound=36.0, epsilon=1.0, delta=1e-6, time_lag=10_000, seed=seed,
                          ledger=False)  # fmt: skip
        thetas.append(
            (seed, rel.threshold, rel.threshold_release.unclipped, rel.threshold_fallback)
        )
    fired = [f"seed {s}: r·τ = {u:,.1f} → θ = {t:g}" for s, t, u, f in thetas if f]
    kept = sorted({round(t, 6) for _, t, _, f in thetas if not f})
    return [
        "## The PAK rows of `std_errors_calibration.md`, guarded",
        "",
        f"Re-run of the two PAK rows (60 CLI releases, seeds 0–{SEEDS - 1}, the same query and "
        "stream as that document) with the guard:",
        "",
        _markdown(table, 2),
        "",
        "Releases where the guard fired: " + ("; ".join(fired) if fired else "none") + ". "
        f"The other releases' θ: {', '.join(f'{t:g}' for t in kept)}.",
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranges", action="store_true", help="re-run the std-errors PAK rows")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = []
    for name, x, m, b, eps, dlt, label, params in settings():
        r = measure(x, m, b, eps, dlt, params)
        rows.append((name, m, eps, label, params, r))
        print(name, eps, label, r, flush=True)
    lines = [
        "# PAK's released threshold at or below 0, and the guard (issue 23)",
        "",
        "Written by `python scripts/pak_threshold_guard.py"
        f"{' --ranges' if args.ranges else ''}` ({time.perf_counter() - start:.0f} s on the "
        "shared 2-core machine). From the threshold's calibration on the prefix (private "
        "values, read for this measurement only): the probability that the released r·τ is "
        "≤ 0 (before the guard θ = 0 and every value was clipped to ~0; with it θ = B), the "
        "probability of a positive θ below the data's quantile x̂_λp (not detectable from the "
        f"released value, left as [PAK19] has it), and which of seeds 0–{SEEDS - 1} released "
        "r·τ ≤ 0 (the first draw of `pak_release(seed=s)`).",
        "",
        "| stream | m | ε | parameters | x̂_λp | S/a | τ' | Pr[r·τ ≤ 0] | Pr[0 < r·τ < x̂_λp] "
        f"| seeds ≤ 0 of {SEEDS} | r, ε₁/ε, β_lt |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m, eps, label, params, r in rows:
        seeds = r["fired"]
        lines.append(
            f"| {name} | {m:,} | {eps:g} | {label} | {r['quantile']:.4g} | {r['scale']:.4g}"
            f" | {r['tau_prime']:.4g} | {r['p_zero']:.3g} | {r['p_low']:.3g} | "
            f"{len(seeds)}{' (' + ', '.join(map(str, seeds)) + ')' if seeds else ''} | "
            f"{params['r']:g}, {params['eps1_share']:g}, {params['beta_lt']:.3g} |"
        )
    lines.append("")
    old = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
    if args.ranges:
        lines += ranges_section()
    elif RANGES in old:  # kept from the last --ranges run
        lines += old[old.index(RANGES) + 1 : old.index("\n## Reading")].split("\n") + [""]
    notes = old[old.index("\n## Reading") :] if "\n## Reading" in old else ""  # hand-written
    OUT.write_text("\n".join(lines) + notes, encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
