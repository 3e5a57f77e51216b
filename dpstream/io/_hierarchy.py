"""The hierarchy as data: a (child, parent) table, a JSON mapping, or Nixtla's ``S_df``.

Every form is turned into edges and validated as data before any release: a node with two
parents, a cycle (self-loops included), several roots (an orphan subtree that does not reach the
root), and ids that do not match the data's series (a leaf without a series, a series that is
no node) are each a :class:`~mechanisms.ParameterError` naming the offending ids (public names,
not values). The result is the ``{parent: [children]}`` mapping the pipelines take
(:func:`dpstream.pipelines._frames.resolve_hierarchy`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from mechanisms import ParameterError

from ._long import ID, read_table

__all__ = ["hierarchy_from_edges", "hierarchy_from_s_df", "read_hierarchy"]

_CHILD, _PARENT = "child", "parent"


def _names(items: Iterable[str], limit: int = 5) -> str:
    items = list(items)
    return f"{items[:limit]}{' ...' if len(items) > limit else ''}"


def hierarchy_from_edges(
    edges: object, *, ids: Iterable[str] | None = None, owner: str = "hierarchy_from_edges"
) -> dict[str, list[str]]:
    """Validate (child, parent) edges and return ``{parent: [children]}`` (first-seen order).

    Parameters
    ----------
    edges : DataFrame with columns ``child`` and ``parent``, or an iterable of pairs
        One row per edge; repeated identical rows are allowed.
    ids : iterable of str, optional
        The data's series ids (wide columns or long ``unique_id``). When given, every leaf must
        be a series and every series a node (a parent's series is checked against its leaves
        later, by the pipeline).

    Raises
    ------
    ParameterError
        Missing columns, a node with two parents, a cycle, several roots (orphan subtrees), a
        leaf that is not a series, a series that is not a node, or no edge at all.
    """
    if isinstance(edges, pd.DataFrame):
        missing = [c for c in (_CHILD, _PARENT) if c not in edges.columns]
        if missing:
            raise ParameterError(
                f"The hierarchy table of {owner} must have columns 'child' and 'parent' (one row "
                f"per edge); {missing} missing. Columns: {[str(c) for c in edges.columns][:10]}."
            )
        pairs = list(zip(edges[_CHILD].astype(str), edges[_PARENT].astype(str), strict=True))
    else:
        pairs = [(str(c), str(p)) for c, p in edges]
    if not pairs:
        raise ParameterError(f"The hierarchy of {owner} has no edge (child, parent).")
    parent_of: dict[str, str] = {}
    two = []
    for child, parent in pairs:
        if parent_of.setdefault(child, parent) != parent:
            two.append(child)
    if two:
        raise ParameterError(
            f"The hierarchy of {owner} gives node(s) {_names(dict.fromkeys(two))} two parents; "
            "a hierarchy is a tree: each node has one parent. Remove the extra edges."
        )
    # Cycles: a node whose chain of parents comes back to a node already on the chain.
    cyclic = []
    state: dict[str, int] = {}  # 1 on the current chain, 2 done
    for start in parent_of:
        chain, node = [], start
        while node in parent_of and state.get(node) is None:
            state[node] = 1
            chain.append(node)
            node = parent_of[node]
        if state.get(node) == 1:
            cyclic.append(node)
        for n in chain:
            state[n] = 2
    if cyclic:
        raise ParameterError(
            f"The hierarchy of {owner} has a cycle through node(s) {_names(cyclic)} (a node is "
            "its own ancestor). A hierarchy is a tree; fix the (child, parent) edges."
        )
    roots = list(dict.fromkeys(p for _, p in pairs if p not in parent_of))
    if len(roots) > 1:
        raise ParameterError(
            f"The hierarchy of {owner} has {len(roots)} roots {_names(roots)}: every subtree but "
            "one is an orphan, not connected to the root. Give each a parent (one root)."
        )
    children: dict[str, list[str]] = {}
    for child, parent in dict.fromkeys(pairs):  # dedupe, keep order
        children.setdefault(parent, []).append(child)
    if ids is not None:
        ids = [str(i) for i in ids]
        known = set(ids)
        leaves = [c for c in parent_of if c not in children]
        unknown = [leaf for leaf in leaves if leaf not in known]
        if unknown:
            raise ParameterError(
                f"The hierarchy of {owner} has leaves that are not series of the data (unknown "
                f"ids): {_names(unknown)}. Leaves must be the data's unique_id values."
            )
        nodes = set(parent_of) | set(children)
        orphans = [i for i in ids if i not in nodes]
        if orphans:
            raise ParameterError(
                f"The hierarchy of {owner} does not place the series {_names(orphans)} (orphans: "
                "no parent in the hierarchy). Add a (child, parent) row for each."
            )
    return children


def hierarchy_from_s_df(
    s_df: pd.DataFrame, *, ids: Iterable[str] | None = None, owner: str = "hierarchy_from_s_df"
) -> dict[str, list[str]]:
    """Nixtla's summing matrix ``S_df`` (one row per node, one 0/1 column per bottom series)
    to ``{parent: [children]}``: a node's parent is the smallest node whose leaf set strictly
    contains its own. ``unique_id`` is a column or the index. Validated as
    :func:`hierarchy_from_edges` (two parents, cycles, orphans, unknown ids)."""
    frame = s_df.reset_index() if ID not in s_df.columns else s_df
    if ID not in frame.columns:
        raise ParameterError(f"The S_df of {owner} must have a 'unique_id' column or index.")
    node_ids = frame[ID].astype(str).tolist()
    if len(set(node_ids)) != len(node_ids):
        raise ParameterError(f"The S_df of {owner} has duplicated unique_id rows.")
    bottom = [str(c) for c in frame.columns if c != ID and c != "index"]
    mat = frame[[c for c in frame.columns if str(c) in bottom]].to_numpy()
    if mat.size == 0 or not np.isin(mat, (0, 1)).all():
        raise ParameterError(
            f"The S_df of {owner} must hold 0/1 entries, one column per bottom series."
        )
    sets = [frozenset(np.flatnonzero(row)) for row in mat.astype(bool)]
    edges = []
    for i, node in enumerate(node_ids):
        # Parents contain the node's leaves; a node with the same leaf set (an aggregate of
        # one child, or a bottom series under it) is a parent only if listed before it
        # (Nixtla's S_df lists the levels top-down, the bottom series last).
        over = [j for j in range(len(sets)) if sets[i] < sets[j] or (sets[i] == sets[j] and j < i)]
        if not over:
            continue  # the root
        size = min(len(sets[j]) for j in over)
        cands = [j for j in over if len(sets[j]) == size]
        if len(sets[cands[0]]) == len(sets[i]):
            cands = [max(cands)]  # a chain of single-child nodes: the nearest one above
        edges.extend((node, node_ids[j]) for j in cands)  # two candidates: two parents
    return hierarchy_from_edges(edges, ids=ids, owner=owner)


def _from_mapping(raw: object, ids, owner: str) -> dict[str, list[str]]:
    if not isinstance(raw, Mapping) or not all(isinstance(v, list) for v in raw.values()):
        raise ParameterError(
            f"The hierarchy of {owner} must map each parent to a list of children, e.g. "
            '{"national": ["north", "south"]}.'
        )
    from postproc import Hierarchy  # one rule with plain mode (issue 31 §6): a leaf listed
    # twice, a parent without children are refused, never merged or dropped

    try:
        Hierarchy(children={str(p): [str(c) for c in kids] for p, kids in raw.items()})
    except ParameterError as exc:
        raise ParameterError(f"The hierarchy of {owner} is not a tree: {exc}") from None
    edges = [(str(c), str(p)) for p, kids in raw.items() for c in kids]
    return hierarchy_from_edges(edges, ids=ids, owner=owner)


def read_hierarchy(
    path: str | Path, *, ids: Iterable[str] | None = None, owner: str = "read_hierarchy"
) -> dict[str, list[str]]:
    """Read a hierarchy file: JSON ``{parent: [children]}`` (``dpstream data export``), or a
    CSV/Parquet table of (``child``, ``parent``) edges, or Nixtla's ``S_df`` (``unique_id`` and
    one 0/1 column per bottom series). Validated against ``ids`` (the data's series)."""
    file = Path(path)
    if not file.is_file():
        raise ParameterError(f"The hierarchy of {owner}: no readable file {str(file)!r}.")
    if file.suffix.lower() == ".json":
        try:
            raw = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            raise ParameterError(
                f"The hierarchy file {file.name!r} of {owner} is not valid JSON. Expected "
                '{"parent": ["child", ...], ...}.'
            ) from None
        return _from_mapping(raw, ids, owner)
    table = read_table(file, owner=owner)
    if _CHILD in table.columns and _PARENT in table.columns:
        return hierarchy_from_edges(table, ids=ids, owner=owner)
    if ID in table.columns:
        return hierarchy_from_s_df(table, ids=ids, owner=owner)
    raise ParameterError(
        f"The hierarchy file {file.name!r} of {owner} must be JSON, a (child, parent) table or "
        f"an S_df (unique_id + one 0/1 column per bottom series). Columns: "
        f"{[str(c) for c in table.columns][:10]}."
    )
