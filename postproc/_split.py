"""Algorithm 4's tree least squares split into subtrees: a distributed elimination.

The exact fast path (:mod:`postproc._tree`, :mod:`postproc._nonneg`) eliminates the hierarchy
leaf to root. Cut the hierarchy at a depth ``c``: every node of depth ``c`` roots a *subtree*
(it and its descendants), the nodes above form the *top*. A subtree's up pass ends in its
root's summary ``V_a(z) = (z - m_a)^T P_a^{-1} (z - m_a) + const`` (a w-vector and a w x w
matrix, :meth:`postproc._tree.TreeFactor.up`); the top is a small tree whose "leaves" are
those quadratics, solved here by the same two passes (``S_t = sum_c P_c``,
``P_t = (M_t + S_t^{-1})^{-1}``, ``m_t = P_t (b_t + S_t^{-1} μ_t)``; down
``z_c = m_c + P_c S_t^{-1} (z_t - μ_t)``); each subtree then runs its down pass from the
``z_a`` pushed back to it. Every step is the single-process elimination, in another order of
summation only, so the result is the same minimiser to rounding.

Non-negativity (O3) is the single-process primal-dual active set
(:func:`postproc._nonneg._active_set`) with each of its tree solves done as above: a round of
subtree summaries, one top solve, a round of down passes. A leaf's half-gradient is its own
subtree's part plus ``sum_t (M_t z_t - b_t)`` over its top ancestors (one w-vector per
subtree, sent with the down pass); the decisions that need every leaf (stop, refine, count of
infeasible indices) are made from per-subtree maxima and counts. When the active set stalls
(no fewer infeasible indices for ``_CHANCES`` rounds), the problem is gathered and solved by
:func:`postproc._nonneg.solve_tree` (globally convergent projected Newton) in one process.

:func:`solve_split` drives any set of :class:`SubtreeSolver` objects through a ``call``
function: in this process (a loop) or on Dask actors (``dpstream.engine``): the subtrees keep
their data where they live, only summaries and root values travel.

*Privacy*: post-processing of private estimates ([FV19] Theorem 3): no budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mechanisms import SolverError

from ._features import FeatureSet
from ._hierarchy import Hierarchy
from ._nonneg import _CHANCES, _TOL, _Period
from ._tree import FeatureTree, HierarchyLayout, TreeFactor, _masked_inverse

__all__ = ["SubtreeSolver", "TopTree", "node_depths", "solve_split", "subtrees"]

_X_TOL = 1e-11  # as postproc._nonneg: relative tolerance on negative leaf-steps


def node_depths(hierarchy: Hierarchy) -> np.ndarray:
    """Depth of every node (rows in ``hierarchy.nodes`` order)."""
    parent = hierarchy.parent
    depth = np.zeros(parent.size, dtype=np.int64)
    for i in range(1, parent.size):  # BFS order: a parent precedes its children
        depth[i] = depth[parent[i]] + 1
    return depth


def subtrees(
    hierarchy: Hierarchy, cut: int
) -> tuple[list[dict[str, tuple[str, ...]]], list[np.ndarray]]:
    """The subtrees rooted at depth ``cut``, in the order of their roots in
    ``hierarchy.nodes``: their ``{parent: children}`` mappings (build each with
    ``Hierarchy(children=...)``) and the rows of their nodes in ``hierarchy.nodes``, in the
    subtree's own breadth-first order (the global order restricted to the subtree)."""
    depth = node_depths(hierarchy)
    owner = np.full(depth.size, -1)
    roots = np.flatnonzero(depth == cut)
    owner[roots] = np.arange(roots.size)
    parent = hierarchy.parent
    for i in range(depth.size):  # BFS: a node's subtree is its parent's
        if depth[i] > cut:
            owner[i] = owner[parent[i]]
    maps: list[dict[str, tuple[str, ...]]] = [{} for _ in roots]
    for node, kids in hierarchy.children.items():
        s = owner[hierarchy.index(node)]
        if s >= 0:
            maps[s][node] = kids
    order = np.argsort(owner, kind="stable")
    counts = np.bincount(owner[owner >= 0], minlength=roots.size)
    start = int((owner < 0).sum())
    rows = np.split(order[start:], np.cumsum(counts)[:-1])
    return maps, rows


class SubtreeSolver:
    """One subtree's side of the elimination: its factor, leaf-steps and half-gradient.

    Parameters
    ----------
    hierarchy
        The subtree (its root is a node of the cut depth and has children).
    features
        The feature chain of the period.
    estimates, weights
        ``c̃`` and ``W`` (n_nodes, P) of the subtree's nodes, in ``hierarchy.nodes`` order.
    """

    def __init__(
        self, hierarchy: Hierarchy, features: FeatureSet, estimates: np.ndarray, weights: np.ndarray
    ) -> None:
        self.lay = lay = HierarchyLayout(hierarchy)  # (the Hierarchy itself is not kept)
        if lay.n_int == 0:
            raise ValueError("a subtree's root must have children")  # internal misuse
        self.ft = ft = FeatureTree(features)
        self.c = np.asarray(estimates, dtype=np.float64)
        self.w = np.asarray(weights, dtype=np.float64)
        self.ops = _Period(lay, ft, self.w, self.c)
        shape = (lay.n_leaves, ft.w)
        self.factor = TreeFactor(lay, ft, self.w, np.ones(shape, dtype=bool))
        self.zero = np.zeros(shape, dtype=bool)
        self.x = np.zeros(shape)
        self.g = np.zeros(shape)
        self._up: tuple | None = None
        self._infeasible = np.zeros(shape, dtype=bool)

    def _b(self) -> np.ndarray:
        """``A_T^T (W ∘ C)`` per node (n, 1, w), formed when needed (memory at scale)."""
        return ((self.w * self.c) @ self.ops.a_t)[:, None, :]

    def scale(self, offset_b: np.ndarray) -> float:
        """``max |A_H^T (W ∘ C) A_T|`` over the subtree's leaves (top ancestors' ``b`` added)."""
        return float(np.abs(self.lay.a_h_t @ self._b()[:, 0, :] + offset_b[None, :]).max())

    def summary(self, rhs: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Re-factor for the held set, run the up pass; the root's ``(P, m, support)``.

        ``rhs="data"``: the least-squares data; ``"residual"``: ``-g`` on the free leaf-steps
        (a refinement step, :meth:`postproc._tree.TreeFactor.solve`).
        """
        self.factor.update(~self.zero)
        if rhs == "data":
            # the leaf-steps and half-gradient are set again before they are read (the down
            # pass replaces x, then the gradient g): not kept while the summaries travel
            self.x = self.g = None
            b = self._b()
        else:
            b = np.zeros((self.lay.n, 1, self.ft.w))
            b[self.lay.leaf_rows, 0] = np.where(self.zero, 0.0, -self.g)
            self.g = None  # set again (gradient) before it is read
        self._up = self.factor.up(b)
        del b
        return self.factor.p_int[0].copy(), self._up[2][0, 0].copy(), self.factor.support[0].copy()

    def descend(self, z_root: np.ndarray, add: bool) -> None:
        """The down pass from the root's values ``z_root`` (w,): set (or add to) ``x``."""
        dx = self.factor.down(self._up, np.asarray(z_root)[None])[:, 0, :]
        self._up = None  # (L, w) numbers: not kept between rounds
        if add:
            self.x += dx  # (x is this object's own array: the down pass or set_leaves made it)
        else:
            self.x = dx

    def gradient(self, offset: np.ndarray) -> float:
        """Half-gradient of the leaves (top ancestors' part ``offset`` (w,) added); returns
        its largest magnitude on the free leaf-steps."""
        self.g = self.ops.gradient(self.x)
        self.g += offset[None, :]
        return float(np.abs(np.where(self.zero, 0.0, self.g)).max(initial=0.0))

    def extent(self) -> tuple[float, float]:
        """``(max |x|, max(-x))`` of the leaf-steps."""
        return float(np.abs(self.x).max()), float(-self.x.min())

    def start(self) -> None:
        """Hold the negative leaf-steps of the unconstrained optimum at 0 (first active set)."""
        self.zero = self.x < 0

    def infeasible(self, x_tol: float, g_tol: float) -> int:
        """Mark the infeasible indices (negative free values, negative multipliers); count."""
        self._infeasible = (~self.zero & (self.x < -x_tol)) | (self.zero & (self.g < -g_tol))
        return int(self._infeasible.sum())

    def swap(self) -> None:
        """Move every infeasible index in or out of the held set."""
        self.zero ^= self._infeasible

    def node_values(self) -> np.ndarray:
        """Per-step values (n_nodes, w) of every node of the subtree from ``max(x, 0)``."""
        return np.asarray(self.lay.a_h @ np.maximum(self.x, 0.0))

    def set_leaves(self, x: np.ndarray) -> None:
        """Replace the leaf-steps (the gathered fallback's solution)."""
        self.x = np.array(x, dtype=np.float64)

    def problem(self) -> tuple[np.ndarray, np.ndarray]:
        """``(c̃, W)`` of the subtree's nodes (the gathered fallback)."""
        return self.c, self.w


class TopTree:
    """The nodes above the cut and their own terms; solves the top of the elimination.

    Parameters
    ----------
    hierarchy
        The whole hierarchy.
    cut
        Depth of the subtree roots (1 <= cut <= height - 1 and no leaf above or at it).
    features
        The feature chain.
    estimates, weights
        ``c̃`` and ``W`` (T, P) of the top nodes (depth < cut), in their BFS order.
    """

    def __init__(
        self,
        hierarchy: Hierarchy,
        cut: int,
        features: FeatureSet,
        estimates: np.ndarray,
        weights: np.ndarray,
    ) -> None:
        depth = node_depths(hierarchy)
        parent = hierarchy.parent
        self.top_rows = np.flatnonzero(depth < cut)
        self.cut_rows = np.flatnonzero(depth == cut)
        index = np.full(depth.size, -1)
        index[self.top_rows] = np.arange(self.top_rows.size)
        self.top_parent = index[np.maximum(parent[self.top_rows], 0)]
        self.top_parent[0] = -1
        self.cut_parent = index[parent[self.cut_rows]]
        n_top = self.top_rows.size
        self.top_kids = [np.flatnonzero(self.top_parent == t) for t in range(n_top)]
        self.cut_kids = [np.flatnonzero(self.cut_parent == t) for t in range(n_top)]
        a_t = features.matrix
        c = np.asarray(estimates, dtype=np.float64)
        wts = np.asarray(weights, dtype=np.float64)
        self.m = np.einsum("pt,ip,pu->itu", a_t, wts, a_t)  # M_t (T, w, w)
        self.b = (wts * c) @ a_t  # b_t (T, w)
        self.c, self.weights = c, wts
        self.w = a_t.shape[1]
        self._state: tuple | None = None

    @property
    def n_subtrees(self) -> int:
        return self.cut_rows.size

    def _down_sums(self, per_top: np.ndarray) -> np.ndarray:
        """For each subtree, the sum of ``per_top`` (T, w) over its top ancestors (S, w)."""
        acc = np.zeros_like(per_top)
        for t in range(per_top.shape[0]):  # BFS: a parent before its children
            p = self.top_parent[t]
            acc[t] = per_top[t] + (acc[p] if p >= 0 else 0.0)
        return acc[self.cut_parent]

    def b_offsets(self) -> np.ndarray:
        """Sum of the top ancestors' ``b`` per subtree (the gradient scale)."""
        return self._down_sums(self.b)

    def sums(self, cut_values: np.ndarray) -> np.ndarray:
        """Values (T, ...) of the top nodes as sums of the subtree roots' values (S, ...)."""
        out = np.zeros((self.top_rows.size, *cut_values.shape[1:]))
        for t in range(self.top_rows.size - 1, -1, -1):
            out[t] = cut_values[self.cut_kids[t]].sum(axis=0) + out[self.top_kids[t]].sum(axis=0)
        return out

    def offsets(self, z_top: np.ndarray) -> np.ndarray:
        """The top ancestors' half-gradient part ``sum_t (M_t z_t - b_t)`` per subtree."""
        return self._down_sums(np.einsum("itu,iu->it", self.m, z_top) - self.b)

    def solve(
        self, p_cut: np.ndarray, m_cut: np.ndarray, sup_cut: np.ndarray, data: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """Both passes over the top: ``(z_top (T, w), z_cut (S, w))``.

        ``p_cut``, ``m_cut``, ``sup_cut``: the subtrees' root summaries (S, w, w), (S, w),
        (S, w); ``data``: the top's own right-hand sides ``b_t`` (else 0, a refinement).
        """
        n_top, w = self.top_rows.size, self.w
        pt = np.zeros((n_top, w, w))
        mt = np.zeros((n_top, w))
        mu = np.zeros((n_top, w))
        s_inv = np.zeros((n_top, w, w))
        sup = np.zeros((n_top, w), dtype=bool)
        for t in range(n_top - 1, -1, -1):
            kc, kt = self.cut_kids[t], self.top_kids[t]
            s = p_cut[kc].sum(axis=0) + pt[kt].sum(axis=0)
            mu[t] = m_cut[kc].sum(axis=0) + mt[kt].sum(axis=0)
            sup[t] = sup_cut[kc].any(axis=0) | sup[kt].any(axis=0)
            s_inv[t] = _masked_inverse(s[None], sup[t][None])[0]
            pt[t] = _masked_inverse((self.m[t] + s_inv[t])[None], sup[t][None])[0]
            rhs = (np.where(sup[t], self.b[t], 0.0) if data else 0.0) + s_inv[t] @ mu[t]
            mt[t] = pt[t] @ rhs
        z_top = np.zeros((n_top, w))
        z_cut = np.zeros((p_cut.shape[0], w))
        z_top[0] = mt[0]
        for t in range(n_top):
            y = s_inv[t] @ (z_top[t] - mu[t])
            kc, kt = self.cut_kids[t], self.top_kids[t]
            z_top[kt] = mt[kt] + pt[kt] @ y
            z_cut[kc] = m_cut[kc] + p_cut[kc] @ y
        return z_top, z_cut


def _summaries(results: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        np.stack([r[0] for r in results]),
        np.stack([r[1] for r in results]),
        np.stack([r[2] for r in results]),
    )


def solve_split(
    top: TopTree,
    call: Callable[[str, Sequence[tuple]], list],
    *,
    gather: Callable[[], np.ndarray] | None = None,
    max_iter: int = 1000,
) -> dict[str, object]:
    """Solve one period's Algorithm 4 (O1-O3) over the top and the subtrees (module notes).

    Parameters
    ----------
    top
        The nodes above the cut.
    call
        ``call(method, args)`` runs ``SubtreeSolver.<method>(*args[s])`` on every subtree ``s``
        (in order) and returns the results as a list: a loop here, or Dask actors.
    gather
        Called when the active set stalls: solve the whole problem in one process and leave
        every subtree's leaf-steps set (:meth:`SubtreeSolver.set_leaves`); without it a stall
        raises :class:`~mechanisms.SolverError`.
    max_iter
        Cap on the active-set iterations.

    Returns
    -------
    dict
        ``iterations`` (1: the unconstrained optimum was non-negative), ``round_trips``
        (rounds of calls to the subtrees) and ``gathered`` (the stall fallback ran). The
        solution stays in the subtrees (:meth:`SubtreeSolver.node_values`).
    """
    n = top.n_subtrees
    trips = [0]

    def each(method: str, args: Sequence[tuple] | None = None) -> list:
        trips[0] += 1
        return call(method, [()] * n if args is None else args)

    def tree_solve(rhs: str, z_top: np.ndarray | None) -> np.ndarray:
        """One exact solve (summaries, top, down passes); returns the top's values."""
        p, m, sup = _summaries(each("summary", [(rhs,)] * n))
        zt, zc = top.solve(p, m, sup, data=rhs == "data")
        each("descend", [(zc[s], rhs != "data") for s in range(n)])
        return zt if z_top is None else z_top + zt

    b_off = top.b_offsets()
    g_scale = max(each("scale", [(b_off[s],) for s in range(n)]))
    g_scale = g_scale if g_scale > 0 else 1.0
    # the unconstrained optimum with one refinement step (TreeFactor.solve, refine=1)
    z_top = tree_solve("data", None)
    off = top.offsets(z_top)
    each("gradient", [(off[s],) for s in range(n)])
    z_top = tree_solve("residual", z_top)
    ext = each("extent")
    x_max = max(e[0] for e in ext)
    tol = _X_TOL * max(x_max, np.finfo(float).tiny)
    if max(e[1] for e in ext) <= tol:
        return {"iterations": 1, "round_trips": trips[0], "gathered": False}
    # primal-dual active set (postproc._nonneg._active_set), every solve split
    each("start")
    x_tol = _X_TOL * max(x_max, np.finfo(float).tiny)
    g_tol = _TOL * g_scale
    best, chances = np.inf, _CHANCES
    for it in range(1, max_iter + 1):
        z_top = tree_solve("data", None)
        off = top.offsets(z_top)
        if max(each("gradient", [(off[s],) for s in range(n)])) > g_tol:
            z_top = tree_solve("residual", z_top)
            off = top.offsets(z_top)
            each("gradient", [(off[s],) for s in range(n)])
        count = sum(each("infeasible", [(x_tol, g_tol)] * n))
        if count == 0:
            return {"iterations": it, "round_trips": trips[0], "gathered": False}
        if count < best:
            best, chances = count, _CHANCES
        elif chances > 0:
            chances -= 1
        else:
            if gather is None:
                break
            gather()
            return {"iterations": it, "round_trips": trips[0], "gathered": True}
        each("swap")
    raise SolverError(
        f"The split active-set loop did not converge in {max_iter} iterations. Raise "
        "'max_iter' or release in one process.",
        status="max_iter",
    )
