"""Exact weighted least squares over the product of two trees, linear in the number of nodes.

Notation of :mod:`postproc._problem`: ``N`` nodes (``L`` leaves, ``I`` internal nodes) of the
hierarchy, ``P`` feature parts over ``w`` steps, weights ``W`` (N x P) of ANY form (not only
``u v^T``). The leaf-step values ``X`` (L x w) with some entries fixed at 0 (the set ``Z``, the
active bounds) minimise ``f(X) = sum_{a,s} W[a,s] (Y[a,s] - C[a,s])^2``, ``Y = A_H X A_T^T``;
more generally this module solves ``M_FF x_F = r_F`` with ``M = A^T diag(W) A``,
``A = A_H ⊗ A_T`` and ``F`` the free leaf-steps (the Newton systems of :mod:`postproc._nonneg`).

Derivation (the two passes of [HRMS10] §4 with a vector of w steps per hierarchy node).
Write ``z_a = A_H[a] X`` (the w per-step values of node ``a``); the objective is
``sum_a q_a(z_a)`` with ``q_a(z) = z^T M_a z - 2 b_a^T z + const``, ``M_a = A_T^T diag(W[a]) A_T``
and ``b_a = A_T^T (W[a] ∘ C[a])``, under ``z_a = sum_{c child of a} z_c``.

*Up pass.* Let ``V_a(z)`` be the least objective of the subtree of ``a`` given ``z_a = z``. It
is quadratic, ``V_a(z) = (z - m_a)^T P_a^{-1} (z - m_a) + const``: for a leaf ``P_a = M_a^{-1}``
and ``m_a = P_a b_a``; for an internal node the infimal convolution of the children's
quadratics under ``sum_c z_c = z`` is ``(z - μ_a)^T S_a^{-1} (z - μ_a)`` with
``S_a = sum_c P_c`` and ``μ_a = sum_c m_c``, attained at ``z_c = m_c + P_c S_a^{-1} (z - μ_a)``
(Lagrange: every ``P_c^{-1} (z_c - m_c)`` equals one multiplier). Hence
``P_a = (M_a + S_a^{-1})^{-1}`` and ``m_a = P_a (b_a + S_a^{-1} μ_a)``.

*Down pass.* ``z_root = m_root``; then ``z_c = m_c + P_c S_a^{-1} (z_a - μ_a)`` for every child.
With scalars (w = 1) this is exactly the weighted tree BLUE of [HRMS10] (inverse-variance
combination up, discrepancy shared in proportion to variances down); with separable weights it
reduces to the Kronecker closed form of :mod:`postproc._fast`. Every step is an exact
elimination, so the result is the unique minimiser (no iteration, no convergence question).

*Leaves in O(w).* ``M_l`` is the normal matrix of one node over the feature forest, a sum of
``W[l, s] 1_s 1_s^T`` over a laminar family. Sherman-Morrison applied feature by feature (a
part ``s`` with children ``c``: ``M_s = blockdiag(M_c) + v_s 1 1^T``) gives
``M_l^{-1} = diag(γ⁰) - sum_{k>=1} sum_{s in F_k} β_s γ^{k-1}_s γ^{k-1 T}_s`` with
``γ⁰_t = 1/W[l,t]``, ``κ⁰ = γ⁰``, and for a part ``s`` of feature ``k``: ``K_s = sum κ^{k-1}``
over its sub-parts, ``β_s = v_s / (1 + v_s K_s)``, ``κ_s = K_s / (1 + v_s K_s)``,
``γ^k = γ^{k-1} / (1 + v_s K_s)`` on the steps of ``s``. A step held at 0 is a singleton of
infinite weight: ``γ⁰_t = 0``. Applying ``M_l^{-1}`` costs O(w p); its dense form is only
accumulated into ``S_a`` of the parent (one Gram matrix per parent and feature, a BLAS GEMM).

Cost per factorisation: O(L w² p) for the leaves plus O(I w³) for the internal nodes (a
national -> regions -> substations -> feeders tree has I << L); a solve is O(N w p + I w²).
Memory O(N P + I w²). Why hand-written: a general sparse Cholesky (scipy's SuperLU, CHOLMOD)
of ``M`` would fill in completely (leaves under a node are coupled through every ancestor), and
of the equivalent KKT system on the product graph it does not know the elimination order or the
Sherman-Morrison form of the leaves; the two passes above are that sparse elimination written
out in the right order.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from ._features import FeatureSet
from ._hierarchy import Hierarchy

__all__ = ["FeatureTree", "HierarchyLayout", "TreeFactor"]


class FeatureTree:
    """Index structures of the feature forest ([FV19] §3.4) for the vectorised passes."""

    def __init__(self, features: FeatureSet) -> None:
        w = features.w
        self.w = w
        self.sizes = features.sizes
        self.offsets = np.cumsum((0, *self.sizes))
        self.p = len(self.sizes)
        self.a_t = sparse.csr_matrix(features.matrix)
        self.a_t_t = self.a_t.T.tocsr()
        parent = features.parent
        local = np.arange(w)  # part of level k holding each step (local index)
        #: step -> part indicator (w, m_k) of every feature k >= 1
        self.step_part: list[np.ndarray] = [np.eye(w)]
        #: block-diagonal mask (w, w) of the parts of every feature k >= 1
        self.mask: list[np.ndarray] = [np.eye(w, dtype=bool)]
        #: sub-part -> part indicator (m_{k-1}, m_k) of every feature k >= 1
        self.child_part: list[np.ndarray] = [np.eye(w)]
        for k in range(1, self.p):
            lo = self.offsets[k - 1]
            up = parent[lo : lo + self.sizes[k - 1]] - self.offsets[k]
            cp = np.zeros((self.sizes[k - 1], self.sizes[k]))
            cp[np.arange(self.sizes[k - 1]), up] = 1.0
            local = up[local]
            sp = np.zeros((w, self.sizes[k]))
            sp[np.arange(w), local] = 1.0
            self.child_part.append(cp)
            self.step_part.append(sp)
            self.mask.append(local[:, None] == local[None, :])


class HierarchyLayout:
    """Index structures of the hierarchy: leaves, internal nodes by depth, child sums."""

    def __init__(self, hierarchy: Hierarchy) -> None:
        parent = hierarchy.parent
        n = parent.size
        self.n = n
        self.a_h = hierarchy.sparse_matrix
        self.a_h_t = self.a_h.T.tocsr()
        is_leaf = np.ones(n, dtype=bool)
        is_leaf[parent[parent >= 0]] = False
        self.leaf_rows = np.flatnonzero(is_leaf)  # == rows of hierarchy.leaves (BFS order)
        self.int_rows = np.flatnonzero(~is_leaf)
        self.n_leaves, self.n_int = self.leaf_rows.size, self.int_rows.size
        int_index = np.full(n, -1)
        int_index[self.int_rows] = np.arange(self.n_int)
        par = np.where(parent >= 0, int_index[np.maximum(parent, 0)], -1)
        self.leaf_parent = par[self.leaf_rows]  # internal index of each leaf's parent
        self.int_parent = par[self.int_rows]  # internal index of each internal node's parent
        depth = np.zeros(n, dtype=np.int64)
        for i in range(1, n):  # BFS order: a parent precedes its children
            depth[i] = depth[parent[i]] + 1
        int_depth = depth[self.int_rows]
        self.int_levels = [np.flatnonzero(int_depth == d) for d in range(int(depth.max()))]
        ones_l = np.ones(self.n_leaves)
        valid = self.leaf_parent >= 0
        self.child_leaf = sparse.csr_matrix(
            (ones_l[valid], (self.leaf_parent[valid], np.flatnonzero(valid))),
            shape=(self.n_int, self.n_leaves),
        )
        valid = self.int_parent >= 0
        self.child_int = sparse.csr_matrix(
            (np.ones(int(valid.sum())), (self.int_parent[valid], np.flatnonzero(valid))),
            shape=(self.n_int, self.n_int),
        )
        self.child_leaf_at = [self.child_leaf[j] for j in self.int_levels]
        self.child_int_at = [self.child_int[j] for j in self.int_levels]
        order = np.argsort(self.leaf_parent, kind="stable")
        counts = np.bincount(self.leaf_parent[self.leaf_parent >= 0], minlength=self.n_int)
        #: padded groups of leaf children per parent (see _bucket_plan)
        self.gram_plan = _bucket_plan(order, counts)


def _bucket_plan(order: np.ndarray, counts: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Groups of parents with similar numbers of leaf children, padded to a common size.

    Returns ``[(parents (g,), leaf index matrix (g, size) with -1 for padding), ...]``; padding
    at most doubles the work, so the Gram matrices below cost O(L w²) whatever the fan-outs.
    """
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    # leaves with a parent come after those without (-1 sorts first)
    base = order.size - int(counts.sum())
    plan = []
    has = np.flatnonzero(counts > 0)
    if has.size == 0:
        return plan
    bucket = np.ceil(np.log2(counts[has])).astype(np.int64)
    for b in np.unique(bucket):
        parents = has[bucket == b]
        size = int(counts[parents].max())
        col = np.arange(size)
        idx = base + starts[parents][:, None] + col[None, :]
        ok = col[None, :] < counts[parents][:, None]
        plan.append((parents, np.where(ok, order[np.minimum(idx, order.size - 1)], -1)))
    return plan


def _grouped_gram(u: np.ndarray, plan: list[tuple[np.ndarray, np.ndarray]], out: np.ndarray):
    """``out[a] += sum_{leaf child c of a} u_c u_c^T`` for every parent ``a`` (BLAS GEMMs)."""
    for parents, idx in plan:
        block = np.where((idx >= 0)[:, :, None], u[np.maximum(idx, 0)], 0.0)  # (g, size, w)
        out[parents] += np.matmul(block.transpose(0, 2, 1), block)


class LeafInverse:
    """``M_l^{-1}`` of every leaf in the Sherman-Morrison form of the module notes."""

    def __init__(self, ft: FeatureTree, wl: np.ndarray, free: np.ndarray) -> None:
        self.ft = ft
        self.wl = wl
        n = wl.shape[0]
        # γ⁰..γ^{p-2}: apply() and rank_one() never read the last feature's γ^{p-1}
        self.gam = [np.empty((n, ft.w)) for _ in range(max(ft.p - 1, 1))]
        self.beta = [np.empty((n, m)) for m in ft.sizes[1:]]
        self.set_rows(slice(None), free)

    def set_rows(self, rows: np.ndarray | slice, free: np.ndarray) -> None:
        """(Re)compute the leaves ``rows`` for their free masks ``free`` (len(rows), w)."""
        ft, wl = self.ft, self.wl[rows]
        gam = np.where(free, 1.0 / wl[:, : ft.w], 0.0)  # γ⁰; 0 where held at 0
        kap = gam
        self.gam[0][rows] = gam
        for k in range(1, ft.p):
            v = wl[:, ft.offsets[k] : ft.offsets[k + 1]]
            big_k = kap @ ft.child_part[k]  # K_s: (n, m_k)
            denom = 1.0 + v * big_k
            self.beta[k - 1][rows] = v / denom  # β_s
            kap = big_k / denom  # κ_s
            if k < len(self.gam):
                gam = gam / (denom @ ft.step_part[k].T)  # γ^k
                self.gam[k][rows] = gam

    def apply(self, r: np.ndarray) -> np.ndarray:
        """``M_l^{-1} r_l`` for every leaf; ``r`` is (L, R, w)."""
        n, nr, w = r.shape
        y = self.gam[0][:, None, :] * r
        for k in range(1, self.ft.p):
            g = self.gam[k - 1][:, None, :]
            sp = self.ft.step_part[k]
            t = g * r
            seg = (t.reshape(n * nr, w) @ sp).reshape(n, nr, -1)  # (L, R, m_k)
            seg *= self.beta[k - 1][:, None, :]
            np.matmul(seg.reshape(n * nr, -1), sp.T, out=t.reshape(n * nr, w))
            t *= g
            y -= t
        return y

    def copy(self) -> LeafInverse:
        new = object.__new__(LeafInverse)
        new.ft, new.wl = self.ft, self.wl
        new.gam = [g.copy() for g in self.gam]
        new.beta = [b.copy() for b in self.beta]
        return new

    def rank_one(self, k: int) -> np.ndarray:
        """``u`` (L, w) with ``sum_s β_s γ_s γ_s^T = mask_k ∘ u u^T`` at feature ``k``."""
        return self.gam[k - 1] * (np.sqrt(self.beta[k - 1]) @ self.ft.step_part[k].T)


def _masked_inverse(a: np.ndarray, support: np.ndarray) -> np.ndarray:
    """Inverse of each SPD block restricted to its support, embedded with zeros elsewhere."""
    pair = support[:, :, None] & support[:, None, :]
    m = np.where(pair, a, 0.0)
    idx = np.arange(a.shape[1])
    m[:, idx, idx] += ~support
    inv = np.linalg.inv(m)
    inv = np.where(pair, (inv + inv.transpose(0, 2, 1)) / 2.0, 0.0)
    return inv


class TreeFactor:
    """The up pass (module notes) for one weight matrix ``W`` (N, P) and free mask (L, w)."""

    def __init__(
        self, layout: HierarchyLayout, ft: FeatureTree, weights: np.ndarray, free: np.ndarray
    ) -> None:
        self.layout, self.ft = layout, ft
        self.weights = weights
        self.a_t_dense = ft.a_t.toarray()
        self.free = free.copy()
        w = ft.w
        rows = layout.leaf_rows
        contiguous = rows.size and rows[-1] - rows[0] + 1 == rows.size
        leaf_w = weights[rows[0] : rows[-1] + 1] if contiguous else weights[rows]  # a view if
        self.leaf = LeafInverse(ft, leaf_w, self.free)  # the leaves are the last rows
        if layout.n_int == 0:
            return
        self.s_leaf = np.zeros((layout.n_int, w, w))  # leaf children's part of S_a
        self._leaf_sums(np.arange(layout.n_int), None)
        self.s_inv = np.zeros((layout.n_int, w, w))
        self.p_int = np.zeros((layout.n_int, w, w))  # P_a = H_a^{-1}
        self.support = np.zeros((layout.n_int, w), dtype=bool)
        self._internal(np.ones(layout.n_int, dtype=bool))

    def _leaf_sums(self, parents: np.ndarray, plan: list | None) -> None:
        """``S_a`` restricted to the leaf children, ``sum_c M_c^{-1}``, for ``parents``."""
        lay, ft, w = self.layout, self.ft, self.ft.w
        s = np.zeros((lay.n_int, w, w))
        idx = np.arange(w)
        s[:, idx, idx] = lay.child_leaf @ self.leaf.gam[0]
        for k in range(1, ft.p):
            gram = np.zeros_like(s)
            _grouped_gram(self.leaf.rank_one(k), lay.gram_plan if plan is None else plan, gram)
            s -= np.where(ft.mask[k], gram, 0.0)
        self.s_leaf[parents] = s[parents]

    def _internal(self, affected: np.ndarray) -> None:
        lay = self.layout
        leaf_support = (lay.child_leaf @ self.free.astype(np.float64)) > 0
        for d in range(len(lay.int_levels) - 1, -1, -1):
            j = lay.int_levels[d]
            j = j[affected[j]]
            if j.size == 0:
                continue
            ci = lay.child_int[j]
            kids = (ci @ self.p_int.reshape(lay.n_int, -1)).reshape(j.size, *self.p_int.shape[1:])
            s = self.s_leaf[j] + kids
            sup = leaf_support[j] | ((ci @ self.support.astype(np.float64)) > 0)
            self.support[j] = sup
            self.s_inv[j] = _masked_inverse(s, sup)
            self.p_int[j] = _masked_inverse(self._normal(j) + self.s_inv[j], sup)

    def _normal(self, j: np.ndarray) -> np.ndarray:
        """``M_a = A_T^T diag(W[a]) A_T`` of the internal nodes ``j`` (len(j), w, w), formed
        when needed (not kept: I w² numbers)."""
        wi = self.weights[self.layout.int_rows[j]]
        a_t = self.a_t_dense
        return np.einsum("pt,ip,pu->itu", a_t, wi, a_t, optimize=True)

    def copy(self) -> TreeFactor:
        """An independent copy (the arrays :meth:`update` writes into are copied)."""
        new = object.__new__(TreeFactor)
        new.__dict__.update(self.__dict__)
        new.free = self.free.copy()
        new.leaf = self.leaf.copy()
        if self.layout.n_int:
            for name in ("s_leaf", "s_inv", "p_int", "support"):
                setattr(new, name, getattr(self, name).copy())
        return new

    def update(self, free: np.ndarray) -> None:
        """Re-factor for a new free mask, redoing only the leaves that changed, their parents
        and the parents' ancestors (the rest of the up pass is unchanged)."""
        changed = np.flatnonzero((free != self.free).any(axis=1))
        if changed.size == 0:
            return
        lay = self.layout
        self.free = free.copy()
        self.leaf.set_rows(changed, self.free[changed])
        if lay.n_int == 0:
            return
        parents = np.unique(lay.leaf_parent[changed])
        plan = [
            (p[keep], idx[keep]) for p, idx in lay.gram_plan if (keep := np.isin(p, parents)).any()
        ]
        self._leaf_sums(parents, plan)
        affected = np.zeros(lay.n_int, dtype=bool)
        cur = parents
        while cur.size:
            affected[cur] = True
            cur = lay.int_parent[cur]
            cur = np.unique(cur[(cur >= 0)])
            cur = cur[~affected[cur]]
        self._internal(affected)

    def solve(self, b: np.ndarray, refine: int = 1) -> np.ndarray:
        """Leaf-step minimiser (L, R, w) for node right-hand sides ``b`` (N, R, w).

        ``b`` is ``A_T^T (W ∘ C)`` per node for the least-squares data ``C`` (then the result
        minimises ``f`` with the held steps at 0), or a residual placed on the leaves (then it
        solves ``M_FF x_F = r_F``). Entries of held steps are ignored and returned as 0.

        The Sherman-Morrison form of a leaf whose own weights span many orders of magnitude
        loses digits by cancellation even when ``M`` as a whole is well conditioned; ``refine``
        steps of iterative refinement (Wilkinson: solve again for the residual
        ``A_H^T b - M x``, computed in O(N P)) restore them.
        """
        x = self._passes(b)
        if refine:
            lay = self.layout
            nr, w = b.shape[1], self.ft.w
            target = (lay.a_h_t @ b.reshape(lay.n, -1)).reshape(lay.n_leaves, nr, w)
            for _ in range(refine):
                res = np.zeros_like(b)
                res[lay.leaf_rows] = np.where(self.free[:, None, :], target - self.matvec(x), 0.0)
                x += self._passes(res)
        return x

    def matvec(self, x: np.ndarray) -> np.ndarray:
        """``M x`` for leaf-steps ``x`` (L, R, w): ``A_H^T (W ∘ (A_H x A_T^T)) A_T``."""
        lay, a_t = self.layout, self.a_t_dense
        nl, nr, w = x.shape
        steps = (lay.a_h @ x.reshape(nl, -1)).reshape(lay.n, nr, w)
        parts = (steps.reshape(-1, w) @ a_t.T).reshape(lay.n, nr, -1)
        back = (self.weights[:, None, :] * parts).reshape(lay.n * nr, -1) @ a_t  # (N R, w)
        return (lay.a_h_t @ back.reshape(lay.n, -1)).reshape(nl, nr, w)

    def _passes(self, b: np.ndarray) -> np.ndarray:
        """The two passes (module notes) for right-hand sides ``b`` (N, R, w)."""
        return self.down(self.up(b))

    def up(self, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The up pass for right-hand sides ``b`` (N, R, w): ``(m_leaf, μ, m_int)``.

        ``m_int[0]`` (with :attr:`p_int` ``[0]`` and :attr:`support` ``[0]``) is the root's
        summary ``V_root(z) = (z - m)^T P^{-1} (z - m) + const`` of the module notes: what a
        subtree sends to the top of a distributed elimination (:mod:`postproc._split`).
        """
        lay = self.layout
        r, w = b.shape[1], self.ft.w
        bl = np.where(self.free[:, None, :], b[lay.leaf_rows], 0.0)
        m_leaf = self.leaf.apply(bl)  # (L, R, w)
        mu = np.zeros((lay.n_int, r, w))
        m_int = np.zeros((lay.n_int, r, w))
        if lay.n_int == 0:
            return m_leaf, mu, m_int
        bi = b[lay.int_rows]
        flat_leaf = m_leaf.reshape(lay.n_leaves, -1)
        for d in range(len(lay.int_levels) - 1, -1, -1):
            j = lay.int_levels[d]
            mu[j] = (
                lay.child_leaf_at[d] @ flat_leaf
                + lay.child_int_at[d] @ m_int.reshape(lay.n_int, -1)
            ).reshape(j.size, r, w)
            sup = self.support[j][:, None, :]
            rhs = np.where(sup, bi[j], 0.0) + np.einsum("itu,iru->irt", self.s_inv[j], mu[j])
            m_int[j] = np.einsum("itu,iru->irt", self.p_int[j], rhs)
        return m_leaf, mu, m_int

    def down(
        self, up: tuple[np.ndarray, np.ndarray, np.ndarray], z_root: np.ndarray | None = None
    ) -> np.ndarray:
        """The down pass from :meth:`up`'s output: leaf-steps (L, R, w).

        ``z_root`` (R, w) fixes the root's values (a subtree of a distributed elimination,
        its root's values solved at the top); None: the root's own optimum ``m_int[0]``.
        """
        m_leaf, mu, m_int = up
        lay = self.layout
        if lay.n_int == 0:
            return np.where(self.free[:, None, :], m_leaf, 0.0)
        z = np.zeros_like(m_int)
        y = np.zeros_like(m_int)
        for d, j in enumerate(lay.int_levels):
            if d == 0:
                z[j] = m_int[j] if z_root is None else np.asarray(z_root)[None]
            else:
                z[j] = m_int[j] + np.einsum("itu,iru->irt", self.p_int[j], y[lay.int_parent[j]])
            y[j] = np.einsum("itu,iru->irt", self.s_inv[j], z[j] - mu[j])
        out = m_leaf + self.leaf.apply(y[lay.leaf_parent])
        return np.where(self.free[:, None, :], out, 0.0)
