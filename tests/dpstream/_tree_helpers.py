"""A synthetic feeder tree and the in-memory planner run shared by the engine and store tests."""

from __future__ import annotations


def feeder_tree(regions: int = 2, subs: int = 3, feeders: int = 12) -> dict:
    """``{parent: [children]}``: N -> regions r* -> substations r*s* -> feeders r*s*f*."""
    ch = {"N": [f"r{i}" for i in range(regions)]}
    for r in ch["N"]:
        ch[r] = [f"{r}s{i}" for i in range(subs)]
        for s in ch[r]:
            ch[s] = [f"{s}f{j}" for j in range(feeders)]
    return ch


def plan_in_memory(frame, hierarchy, seed: int, history=None):
    """``release_optstream(k="auto")``'s own functions over every day of ``frame`` (one
    planner, the store's per-period bits): (cfg, prepared frame, measured, plans, priors)."""
    from dpstream.pipelines._autoplan import _config, run_periods
    from dpstream.pipelines._frames import prepare_frame, to_periods
    from dpstream.pipelines._period import period_bits
    from dpstream.pipelines._period_steps import measure_period

    sf = prepare_frame(frame, owner="t", hierarchy=hierarchy)
    cfg = _config(
        epsilon=1.0, alpha=5.0, w=48, delta=None, noise="laplace", target="all",
        level_shares=None, hierarchy=sf.hierarchy, nodes=sf.nodes, prior=True,
    )  # fmt: skip
    periods = to_periods(sf.values, 48)

    def measure(i, vals, plan):
        return measure_period(vals, plan, cfg, bits=period_bits(seed, i))

    past = None if history is None else prepare_frame(history, owner="t", hierarchy=hierarchy)
    measured, plans, priors = run_periods(
        periods.full, periods.tail, cfg, measure=measure,
        history=None if past is None else past.values,
    )  # fmt: skip
    return cfg, sf, measured, plans, priors


class DayTable:
    """An in-memory leaf source for the split engine: ``day``'s w steps of ``loads`` (rows in
    ``leaves`` order). In one process only: Dask would ship it in the graph."""

    def __init__(self, loads, day: int, leaves, w: int):
        self.rows = {leaf: i for i, leaf in enumerate(leaves)}
        self.loads, self.day, self.w = loads, day, w

    def __call__(self, leaves):
        import numpy as np

        w = self.w
        return np.stack(
            [self.loads[self.rows[x], self.day * w : (self.day + 1) * w] for x in leaves]
        )


def daily_loads(n_leaves: int, w: int, days: int, seed: int = 0):
    """(n_leaves, days * w) synthetic daily profiles with noise (the planner has something to
    learn)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    t = np.arange(w * days)
    scale = rng.gamma(2.0, 1.0, n_leaves)[:, None]
    return scale * (1.2 + np.sin(2 * np.pi * t / w))[None] + rng.gamma(
        1.0, 0.3, (scale.size, t.size)
    )
