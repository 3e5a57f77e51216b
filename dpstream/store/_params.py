"""The public parameters of a store release, validated, and the store's configuration."""

from __future__ import annotations

import numpy as np

from mechanisms import ParameterError
from mechanisms.core._validation import check_integer, check_positive
from mechanisms.optstream._estimates import OPTSTREAM_SAMPLINGS
from postproc import FeatureSet

from ..engine._run import ENGINES
from ..pipelines._frames import value_neighbours
from ..pipelines._optstream_pipeline import OPTSTREAM_WEIGHTS
from ._grid import Grid

__all__: list[str] = []

_OWNER = "ReleaseStore.release_optstream"


def _params(
    *,
    epsilon,
    w,
    k,
    sampling,
    theta,
    alpha,
    bound,
    weights,
    shares,
    seed,
    engine,
    n_workers,
    auto=None,
    lock_timeout=0.0,
) -> dict:
    """The release's public parameters, validated (nothing read, drawn or charged)."""
    eps = check_positive(epsilon, "epsilon", _OWNER)
    w = check_integer(w, "w", _OWNER)
    if k != "auto":
        k = check_integer(k, "k", _OWNER, minimum=1, maximum=w)
        sampling = "l1" if sampling is None else sampling
        auto = None
    else:
        auto = dict(auto or {})
        auto.setdefault("noise", "laplace")
        off = [
            name
            for name, bad in (
                ("sampling", sampling not in (None, "equal")),
                ("weights", weights != "variance"),
                ("theta", theta is not None),
                ("shares", shares is not None),
                ("alpha", alpha is None),
            )
            if bad
        ]
        if off:
            raise ParameterError(
                f"The 'k' parameter of {_OWNER} is 'auto', which plans each period from the one "
                "before with equally spaced samples, its own weights and an alpha; the "
                "parameter(s) "
                f"{', '.join(repr(n) for n in off)} need an int k (or their defaults)."
            )
        sampling = "equal"
    if (
        not isinstance(lock_timeout, int | float)
        or isinstance(lock_timeout, bool)
        or not (0 <= lock_timeout < float("inf"))
    ):
        raise ParameterError(
            f"The 'lock_timeout' parameter of {_OWNER} must be a float in [0, inf). Got "
            f"{lock_timeout!r} instead."
        )
    for name, value, allowed in (
        ("sampling", sampling, OPTSTREAM_SAMPLINGS),
        ("weights", weights, OPTSTREAM_WEIGHTS),
        ("engine", engine, ENGINES),
    ):
        if value not in allowed:
            raise ParameterError(
                f"The {name!r} parameter of {_OWNER} must be one of {allowed}. Got {value!r} "
                "instead."
            )
    if theta is not None:
        theta = check_positive(theta, "theta", _OWNER, allow_zero=True)
    n_workers = check_integer(n_workers, "n_workers", _OWNER)
    if seed is not None and engine == "dask" and not isinstance(seed, int | np.integer):
        raise ParameterError(
            f"The 'seed' parameter of {_OWNER} must be None or an int with engine='dask'."
        )
    neighbours = value_neighbours(w=w, alpha=alpha, bound=bound, owner=_OWNER)
    return {
        "epsilon": eps,
        "w": w,
        "k": k,
        "sampling": sampling,
        "theta": theta,
        "alpha": alpha,
        "bound": bound,
        "weights": weights,
        "shares": shares,
        "seed": seed,
        "engine": engine,
        "n_workers": n_workers,
        "neighbours": neighbours,
        "features": FeatureSet.default(w),
        "auto": auto,
        "lock_timeout": float(lock_timeout),
    }


def _config(p: dict, nodes, tree, grid: Grid) -> dict:
    return {
        "mechanism": "optstream",
        "unit": type(p["neighbours"].unit).__name__,
        "epsilon": p["epsilon"],
        "alpha": None if p["alpha"] is None else p["neighbours"].delta,
        "bound": p["bound"],
        "w": p["w"],
        "k": p["k"],
        "sampling": p["sampling"],
        "theta": p["theta"],
        "weights": p["weights"],
        "shares": None if p["shares"] is None else [float(s) for s in p["shares"]],
        "nodes": list(nodes),
        "hierarchy": None if tree is None else {a: list(c) for a, c in tree.children.items()},
        "grid": grid.to_config(),
        # A store is an experiment (seeded, NOT private) or a release, never a mix of both.
        "seeded": p["seed"] is not None,
        # k="auto" only (None otherwise): the in-stream planner's settings.
        **{
            key: None if p["auto"] is None else _plain(p["auto"].get(key))
            for key in ("delta", "noise", "target", "level_shares", "prior")
        },
    }


def _plain(value):
    """A JSON-able copy of a setting (tuples of shares as lists)."""
    return list(value) if isinstance(value, tuple | list) else value
