"""What ``dpstream.std_errors`` states and where it does not hold: one section for every
``docs/results/std_errors_*.md`` (issue 30, item 4), imported by the scripts that write them.

Numbers quoted here come from those documents; change them when a script's table changes.
"""

from __future__ import annotations

SCOPE = [
    "## What the stated figure includes, and where it does not hold",
    "",
    "The stated figure is a root-mean-square error per released value, computed from public "
    "parameters and the released values only (post-processing: no budget):",
    "",
    "- the mechanism's noise, carried exactly through Algorithm 4's linear post-processing "
    "([FV19] Alg. 4, features and the hierarchy included);",
    '- the interpolation error between samples: with `k="auto"` as the planner predicts it '
    "from the variogram of the published measurements, and at least the larger of the "
    "Brownian bridge of the roughness by step of day and the white noise of a nugget "
    "(`V(h) = c + σ²h`: a household's appliances switching within a spacing, read from the "
    "anti-correlation of consecutive increments between published samples); with an int k "
    "by the kriging identity "
    "with one random-walk variogram per node (its sill pooled over every pair of published "
    "samples, the noise taken out);",
    '- with `k="auto"`, the prior\'s shrinkage (its empirical-Bayes variance, checked '
    "against the published residuals and fitted there as `s·τ² + b²`: the forecast's bias "
    "against the true period, which does not shrink as periods accumulate), and the errors "
    "the levels share (dense up to 64 leaves, a Monte Carlo factor beyond);",
    "- where a released value is 0 (non-negativity binds), a parametric bootstrap: with an "
    "int k around each leaf's linear estimate shrunk to the truth's spread, with Laplace noise "
    'as the release draws it; with `k="auto"` around the released values, which stand in for '
    "the truth there, as a factor on the linear figure at the steps holding a 0 (the "
    "bootstrap's error with non-negativity over its error without, from the same draws).",
    "",
    'Unmeasured readings (`missing="unmeasured"`, with or without `--store`): the value is '
    "published empty and so is its error; an aggregate's figure is its error against the sum "
    "of the observed leaves, the quantity it releases.",
    "",
    "Where it does not hold:",
    "",
    "- **Single households** (sub-meters, `std_errors_domain.md`): 0.92-1.68 per node "
    "since the nugget (1.39-2.29 before); the spikiest sub-meters are still understated "
    "(laundry 1.68, kitchen 1.38, other 1.14), the total and heating hold (1.02, 0.92). "
    "Aggregated loads "
    "(`std_errors_calibration.md`): regional hierarchy 0.90-0.97 per node at ε = 1, "
    "0.81-0.99 at ε = 0.1 over 28 days (rural 0.808 the lowest; 0.794 before session 11) "
    "and 0.87-1.05 over 60; 0.79-0.99 on issue 28's slice (`std_errors_domain.md`). "
    '`interpolation="rough"` overstates aggregated loads about 3x.',
    "- **Biases the released values cannot show**: the clipping of ToPS and PAK at the "
    "released threshold (`dpstream query` states the noise only; ToPS ratios 1.28-1.36, "
    "about 1.0-1.2 once the bias is removed, `std_errors_calibration.md`).",
    '- **Steps holding a 0** (`k="auto"`): where the truth is small but the release is 0, the '
    "bootstrap clips around 0, and its factor may lower the figure more than the error falls "
    "(rare on the regional hierarchy: 3 of 28 periods at ε = 0.1).",
    '- **Trees above 64 leaves** (`k="auto"`): one correlation between all leaves; the '
    "national's figure is conservative there (ratio 0.74 at ε = 1, `std_errors_large_tree.md`).",
    "- **Not computed** (a typed error): int k above 64 leaves, int k with unmeasured "
    'readings or `weights="paper"`, OptStream releases that did not publish their '
    "measurements, other mechanisms' streams (their range queries: `dpstream query`).",
    "",
]


def markdown(rows) -> str:
    """``rows`` (a DataFrame: index = node) as a pipe table, 3 decimals (no tabulate dependency)."""
    head = [rows.index.name or ""] + [str(c) for c in rows.columns]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for idx, row in rows.iterrows():
        out.append("| " + " | ".join([str(idx)] + [f"{v:,.3f}" for v in row]) + " |")
    return "\n".join(out)
