"""FeatureSet and Hierarchy: construction, the paper's defaults, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms import ParameterError
from postproc import FeatureSet, Hierarchy

# -- FeatureSet ---------------------------------------------------------------------------


def test_default_is_the_feature_set_of_fv19_section_6():
    fs = FeatureSet.default(48)
    assert fs.sizes == (48, 4, 1)
    assert fs.partitions[1] == (
        tuple(range(0, 14)),
        tuple(range(14, 24)),
        tuple(range(24, 36)),
        tuple(range(36, 48)),
    )
    assert fs.partitions[2] == (tuple(range(48)),)
    # every part of F2 sits in the whole period, every singleton in one day part
    assert fs.parent[48:52].tolist() == [52] * 4
    assert fs.parent[13] == 48 and fs.parent[14] == 49 and fs.parent[47] == 51
    assert fs.parent[52] == -1


def test_default_for_other_periods_is_singletons_and_total():
    assert FeatureSet.default(24).sizes == (24, 1)
    assert FeatureSet.default(1).sizes == (1,)


def test_paper_weights_are_one_over_feature_size():
    # [FV19] Alg. 4 (O1): λ_i = 1/m_i, m_i the number of parts of F_i (not a part's size).
    w = FeatureSet.default(48).paper_weights()
    assert w.shape == (53,)
    np.testing.assert_allclose(w[:48], 1 / 48)
    np.testing.assert_allclose(w[48:52], 1 / 4)
    np.testing.assert_allclose(w[52], 1.0)


def test_fv19_example_3_feature_queries():
    # Example 3 of [FV19] §3.4: w = 12, F2 = {{1..4}, {5..9}, {10..12}} (1-based there).
    x = np.array([10, 15, 20, 23, 41, 72, 55, 50, 88, 72, 40, 18], dtype=float)
    fs = FeatureSet(
        w=12, partitions=[[[t] for t in range(12)], [range(0, 4), range(4, 9), [9, 10, 11]]]
    )
    q = fs.matrix @ x
    np.testing.assert_array_equal(q[:12], x)
    np.testing.assert_array_equal(q[12:], [68, 306, 130])


def test_matrix_is_read_only_and_rows_sum_parts():
    fs = FeatureSet.from_breaks(6, [(0, 2, 6), (0, 6)])
    assert fs.matrix.shape == (6 + 2 + 1, 6)
    np.testing.assert_array_equal(fs.matrix.sum(axis=1), [1] * 6 + [2, 4, 6])
    with pytest.raises(ValueError):
        fs.matrix[0, 0] = 5.0
    assert fs.part_feature.tolist() == [0] * 6 + [1, 1, 2]


@pytest.mark.parametrize(
    ("partitions", "match"),
    [
        ([[[0], [1], [2]], [[0, 1]]], "misses 1 step"),  # not covering
        ([[[0], [1], [2]], [[0, 1], [1, 2]]], "repeats 1 step"),  # overlapping
        ([[[0, 1], [2]], [[0, 1, 2]]], "start with the singletons"),
        ([[[0], [1], [2]], [[0, 1, 2]], [[0], [1, 2]]], "ordered by sub-partitioning"),
        ([[[0], [1], [2]], [[0, 1], [2]], [[0], [1, 2]]], "ordered by sub-partitioning"),
        ([[[0], [1], [3]]], r"in \[0, 3\)"),
        ([[[0], [1], [2.0]]], "integer time steps"),
        ([[[0], [1], []]], "empty part"),
        ([], "non-empty sequence"),
        ("abc", "non-empty sequence"),
    ],
)
def test_bad_partitions_raise(partitions, match):
    with pytest.raises(ParameterError, match=match):
        FeatureSet(w=3, partitions=partitions)


@pytest.mark.parametrize("breaks", [[(0, 2)], [(1, 4)], [(0, 3, 2, 4)], [(0,)]])
def test_bad_breaks_raise(breaks):
    with pytest.raises(ParameterError, match="break points"):
        FeatureSet.from_breaks(4, breaks)


@pytest.mark.parametrize("w", [0, -3, 2.5, True])
def test_bad_w_raises(w):
    with pytest.raises(ParameterError, match="'w' parameter"):
        FeatureSet(w=w, partitions=[[[0]]])


# -- Hierarchy ----------------------------------------------------------------------------


def test_hierarchy_structure_and_matrix():
    h = Hierarchy(children={"FR": ["north", "south"], "south": ["a", "b"]})
    assert h.nodes == ("FR", "north", "south", "a", "b")
    assert h.leaves == ("north", "a", "b")
    assert h.root == "FR" and h.height == 2 and h.n_levels == 3
    assert h.levels == (("FR",), ("north", "south"), ("a", "b"))
    np.testing.assert_array_equal(h.matrix, [[1, 1, 1], [1, 0, 0], [0, 1, 1], [0, 1, 0], [0, 0, 1]])
    assert h.index("south") == 2


def test_single_stream():
    h = Hierarchy.single("load")
    assert h.nodes == h.leaves == ("load",) and h.height == 0 and h.n_levels == 1
    np.testing.assert_array_equal(h.matrix, [[1.0]])


@pytest.mark.parametrize(
    ("children", "match"),
    [
        ({"a": []}, "listed as a parent with no children"),
        ({"r": ["a", "b"], "a": []}, "listed as a parent with no children"),
        ({"r": ["a"], "s": ["a"]}, "has parents"),
        ({"r": ["a"], "a": ["b"], "b": ["a"]}, "has parents"),
        ({"a": ["b"], "b": ["a"]}, "exactly one root"),
        ({"r": ["a"], "x": ["y"], "y": ["x"]}, "cycle"),
        ({"r": ["r"]}, "own child"),
        ({"r": ["a"], "s": ["b"]}, "exactly one root"),
        ({"r": "ab"}, "sequences of child names"),
        ({"r": ["a", 3]}, "non-empty string"),
        ({"": ["a"]}, "non-empty string"),
        ([("r", ["a"])], "mapping"),
    ],
)
def test_bad_hierarchies_raise(children, match):
    with pytest.raises(ParameterError, match=match):
        Hierarchy(children=children)


def test_unknown_node_name_raises():
    h = Hierarchy(children={"r": ["a", "b"]})
    with pytest.raises(ParameterError, match="Unknown node 'c'"):
        h.index("c")
    with pytest.raises(ParameterError, match="non-empty string"):
        Hierarchy.single("")
