"""Random instances and independent reference solvers for the post-processing tests."""

from __future__ import annotations

import numpy as np
from scipy import optimize

from postproc import FeatureSet, Hierarchy


def fanout_tree(fanouts: list[int]) -> Hierarchy:
    """A complete tree under "R": every node of level i has ``fanouts[i]`` children
    ("R.0", "R.0.1", ...)."""
    children, level = {}, ["R"]
    for f in fanouts:
        nxt = []
        for p in level:
            children[p] = [f"{p}.{i}" for i in range(f)]
            nxt += children[p]
        level = nxt
    return Hierarchy(children=children)


def random_hierarchy(rng: np.random.Generator, n_nodes: int) -> Hierarchy:
    """A random tree on nodes "n0".."n{k-1}" (n0 the root); a single stream if n_nodes == 1."""
    if n_nodes == 1:
        return Hierarchy.single("n0")
    parent = [int(rng.integers(0, i)) for i in range(1, n_nodes)]
    children: dict[str, list[str]] = {}
    for child, par in enumerate(parent, start=1):
        children.setdefault(f"n{par}", []).append(f"n{child}")
    return Hierarchy(children=children)


def random_features(rng: np.random.Generator, w: int, n_extra: int) -> FeatureSet:
    """Singletons then ``n_extra`` random coarsenings (parts need not be contiguous)."""
    partitions = [[[t] for t in range(w)]]
    for _ in range(n_extra):
        current = partitions[-1]
        groups = int(rng.integers(1, len(current) + 1))
        labels = rng.integers(0, groups, size=len(current))
        merged: dict[int, list[int]] = {}
        for part, label in zip(current, labels, strict=True):
            merged.setdefault(int(label), []).extend(part)
        partitions.append(list(merged.values()))
    return FeatureSet(w=w, partitions=partitions)


def random_instance(
    rng: np.random.Generator,
    hierarchy: Hierarchy,
    features: FeatureSet,
    n_periods: int,
    noise: float,
    weights_kind: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(truth parts (B, N, P), noisy estimates, weights (N, P))."""
    leaves = len(hierarchy.leaves)
    x = rng.uniform(0.0, 10.0, size=(n_periods, leaves, features.w))
    x[rng.random(x.shape) < 0.2] = 0.0  # some true zeros, so bounds matter
    truth = hierarchy.matrix @ x @ features.matrix.T
    estimates = truth + rng.normal(0.0, noise, size=truth.shape)
    n, p = truth.shape[1:]
    if weights_kind == "paper":
        weights = np.broadcast_to(features.paper_weights(), (n, p)).copy()
    elif weights_kind == "separable":
        weights = np.outer(rng.uniform(0.2, 5.0, n), rng.uniform(0.2, 5.0, p))
    else:
        weights = rng.uniform(0.2, 5.0, size=(n, p))
    return truth, estimates, weights


def weighted_norm(diff: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``||d||_{2,λ}`` per period (the norm of [FV19] Theorem 12)."""
    return np.sqrt(np.einsum("bnp,...np->b", diff * diff, weights))


def nnls_reference(
    estimates: np.ndarray, weights: np.ndarray, hierarchy: Hierarchy, features: FeatureSet
) -> np.ndarray:
    """Leaf-step optimum of one period by scipy's Lawson-Hanson NNLS (an independent solver)."""
    a = np.kron(hierarchy.matrix, features.matrix)
    sw = np.sqrt(weights.reshape(-1))
    x, _ = optimize.nnls(sw[:, None] * a, sw * estimates.reshape(-1), maxiter=50 * a.shape[1])
    return x.reshape(len(hierarchy.leaves), features.w)


def tree_blue(values: np.ndarray, weights: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Weighted tree BLUE by the two passes of [HRMS10] §4, generalised to any tree.

    ``values``/``weights``: one noisy observation per tree node; ``parent[j]`` the parent node of
    j (-1 for roots); returns the consistent estimate of every node. Up pass: each node's
    subtree estimate combines its own observation with the sum of its children's subtree
    estimates, by inverse variance. Down pass: a parent's final value minus the sum of its
    children's subtree estimates is shared among the children in proportion to their variances.
    """
    n = len(values)
    kids: list[list[int]] = [[] for _ in range(n)]
    for j, par in enumerate(parent):
        if par >= 0:
            kids[par].append(j)
    order: list[int] = [j for j in range(n) if parent[j] < 0]
    for j in order:
        order.extend(kids[j])
    z = np.zeros(n)
    var = np.zeros(n)
    for j in reversed(order):  # up pass
        v_own = 1.0 / weights[j]
        if kids[j]:
            s = sum(z[k] for k in kids[j])
            v_kids = sum(var[k] for k in kids[j])
            z[j] = (values[j] / v_own + s / v_kids) / (1.0 / v_own + 1.0 / v_kids)
            var[j] = 1.0 / (1.0 / v_own + 1.0 / v_kids)
        else:
            z[j], var[j] = values[j], v_own
    out = z.copy()
    for j in order:  # down pass
        if kids[j]:
            gap = out[j] - sum(z[k] for k in kids[j])
            total = sum(var[k] for k in kids[j])
            for k in kids[j]:
                out[k] = z[k] + gap * var[k] / total
    return out
