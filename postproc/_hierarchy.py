"""Hierarchies of streams: an aggregation tree of named nodes ([FV19] §5.2).

Each internal node (an *aggregation entry*) reports the sum of its children at every time step;
the leaves are the base streams. [FV19] §5.2 requires aggregation sets to be nested or disjoint,
i.e. a tree; this module checks it (one root, no cycle, no node with two parents).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
from scipy import sparse

from mechanisms import ParameterError

__all__ = ["Hierarchy"]

_OWNER = "Hierarchy"


def _bad(rule: str, hint: str = "") -> ParameterError:
    msg = f"The 'children' parameter of {_OWNER} must be {rule}."
    return ParameterError(msg + (" " + hint if hint else ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class Hierarchy:
    """A validated aggregation tree of streams ([FV19] §5.2).

    Parameters
    ----------
    children
        Mapping ``parent -> children`` (node names are strings). Every parent has at least one
        child; a node that is nobody's parent is a leaf. Use :meth:`single` for one stream.

    Raises
    ------
    ParameterError
        If a parent has no children, a node has two parents or is its own ancestor (a cycle),
        there is not exactly one root, or a name is not a non-empty string.

    Examples
    --------
    >>> h = Hierarchy(children={"FR": ["north", "south"], "south": ["a", "b"]})
    >>> h.nodes, h.leaves, h.height
    (('FR', 'north', 'south', 'a', 'b'), ('north', 'a', 'b'), 2)
    """

    children: Mapping[str, tuple[str, ...]]
    """Read-only mapping parent -> children, as given (children tuples in the given order)."""
    nodes: tuple[str, ...] = field(init=False)
    """Every node, breadth-first from the root (the row order of every array)."""
    leaves: tuple[str, ...] = field(init=False)
    """The leaves, in breadth-first order (the base streams)."""
    depth: Mapping[str, int] = field(init=False, repr=False)
    """Distance of each node from the root (root 0)."""
    _matrix: np.ndarray | None = field(init=False, repr=False, compare=False)
    _sparse: sparse.csr_matrix = field(init=False, repr=False, compare=False)
    _parent: np.ndarray = field(init=False, repr=False, compare=False)
    _pos: Mapping[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        raw = self.children
        if not isinstance(raw, Mapping):
            raise _bad("a mapping parent -> sequence of children", f"Got {type(raw).__name__}.")
        kids: dict[str, tuple[str, ...]] = {}
        parent_of: dict[str, str] = {}
        for parent, group in raw.items():
            if not isinstance(parent, str) or not parent:
                raise _bad("keyed by non-empty string names", f"Got a {type(parent).__name__}.")
            if isinstance(group, str) or not isinstance(group, Sequence):
                raise _bad(
                    "a mapping to sequences of child names",
                    f"Node {parent!r} maps to a {type(group).__name__}.",
                )
            if len(group) == 0:
                raise _bad(
                    "a mapping whose parents have at least one child",
                    f"Node {parent!r} is listed as a parent with no children; a leaf is a node "
                    "that is never a key (use Hierarchy.single for one stream).",
                )
            for child in group:
                if not isinstance(child, str) or not child:
                    raise _bad("holding non-empty string names", f"{parent!r} has a bad child.")
                if child == parent:
                    raise _bad("acyclic", f"Node {parent!r} is its own child.")
                if child in parent_of:
                    raise _bad(
                        "a tree (each node has one parent)",
                        f"Node {child!r} has parents {parent_of[child]!r} and {parent!r}.",
                    )
                parent_of[child] = parent
            kids[parent] = tuple(group)
        names = set(kids) | set(parent_of)
        roots = sorted(n for n in names if n not in parent_of)
        if len(roots) != 1:
            hint = (
                "Every node lies on a cycle."
                if not roots
                else f"Found {len(roots)} roots: {roots[:5]}. Add a common parent."
            )
            raise _bad("a tree with exactly one root", hint)
        order = [roots[0]]
        depth = {roots[0]: 0}
        for node in order:  # breadth-first; grows while iterating
            for child in kids.get(node, ()):
                depth[child] = depth[node] + 1
                order.append(child)
        if len(order) != len(names):
            raise _bad(
                "acyclic",
                f"{len(names) - len(order)} node(s) lie on a cycle unreachable from the root.",
            )
        leaves = tuple(n for n in order if n not in kids)
        pos = {node: i for i, node in enumerate(order)}
        parent = np.array([pos[parent_of[n]] if n in parent_of else -1 for n in order])
        object.__setattr__(self, "children", MappingProxyType(kids))
        object.__setattr__(self, "nodes", tuple(order))
        object.__setattr__(self, "leaves", leaves)
        object.__setattr__(self, "depth", MappingProxyType(depth))
        _set_arrays(self, parent, pos, np.array([pos[leaf] for leaf in leaves]))

    @classmethod
    def single(cls, name: str = "stream") -> Hierarchy:
        """A hierarchy of one stream (no aggregation): plain [FV19] Alg. 4."""
        if not isinstance(name, str) or not name:
            raise ParameterError(
                f"The 'name' parameter of Hierarchy.single must be a non-empty string. "
                f"Got {name!r} instead."
            )
        obj = object.__new__(cls)
        object.__setattr__(obj, "children", MappingProxyType({}))
        object.__setattr__(obj, "nodes", (name,))
        object.__setattr__(obj, "leaves", (name,))
        object.__setattr__(obj, "depth", MappingProxyType({name: 0}))
        _set_arrays(obj, np.array([-1]), {name: 0}, np.array([0]))
        return obj

    @property
    def root(self) -> str:
        """The root node (the top aggregate)."""
        return self.nodes[0]

    @property
    def height(self) -> int:
        """Number of edges on the longest root-to-leaf path (0 for a single stream)."""
        return max(self.depth.values())

    @property
    def n_levels(self) -> int:
        """Number of levels, ``height + 1``: the ``h`` of [FV19] Theorem 13.

        [FV19] §6 calls nation -> regions a tree "of height 2" and gives each of its two levels
        ``ε/2``, i.e. Theorem 13's ``h`` counts levels (nodes on a path), not edges.
        """
        return self.height + 1

    @property
    def levels(self) -> tuple[tuple[str, ...], ...]:
        """Nodes grouped by depth, root level first."""
        return tuple(
            tuple(n for n in self.nodes if self.depth[n] == d) for d in range(self.height + 1)
        )

    @property
    def matrix(self) -> np.ndarray:
        """Aggregation matrix ``A_H`` (n_nodes x n_leaves), rows in :attr:`nodes` order.

        Dense and built on first use: O(n_nodes x n_leaves) memory, meant for small trees. The
        solvers use :attr:`sparse_matrix` (one non-zero per leaf and ancestor).
        """
        if self._matrix is None:
            matrix = self._sparse.toarray()
            matrix.setflags(write=False)
            object.__setattr__(self, "_matrix", matrix)
        return self._matrix

    @property
    def sparse_matrix(self) -> sparse.csr_matrix:
        """``A_H`` as a scipy CSR matrix (n_nodes x n_leaves; treat as read-only)."""
        return self._sparse

    @property
    def parent(self) -> np.ndarray:
        """Row of each node's parent (-1 for the root), rows in :attr:`nodes` order."""
        return self._parent

    def index(self, name: str) -> int:
        """Row of node ``name`` in every array; ParameterError if the name is unknown."""
        try:
            return self._pos[name]
        except (KeyError, TypeError):
            raise ParameterError(
                f"Unknown node {name!r}: the hierarchy has nodes {list(self.nodes)[:10]}"
                f"{' ...' if len(self.nodes) > 10 else ''}."
            ) from None


def _set_arrays(obj: Hierarchy, parent: np.ndarray, pos: dict[str, int], leaf_rows: np.ndarray):
    """Store the parent array, the name index and the sparse ``A_H`` (one entry per leaf and
    ancestor: O(n_leaves x height)); the dense ``A_H`` is built only if asked for."""
    parent = np.asarray(parent, dtype=np.int64)
    rows, cols = [leaf_rows], [np.arange(leaf_rows.size)]
    up = parent[leaf_rows]
    col = cols[0]
    while (up >= 0).any():  # walk every leaf up to the root, one level per pass
        keep = up >= 0
        up, col = up[keep], col[keep]
        rows.append(up)
        cols.append(col)
        up = parent[up]
    r, c = np.concatenate(rows), np.concatenate(cols)
    mat = sparse.csr_matrix(
        (np.ones(r.size), (r, c)), shape=(parent.size, leaf_rows.size), dtype=np.float64
    )
    parent.setflags(write=False)
    object.__setattr__(obj, "_parent", parent)
    object.__setattr__(obj, "_pos", MappingProxyType(pos))
    object.__setattr__(obj, "_sparse", mat)
    object.__setattr__(obj, "_matrix", None)
