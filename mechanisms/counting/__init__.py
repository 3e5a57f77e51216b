"""Continual counting: the binary-tree mechanism of [CSS11]/[DNPR10] (streaming and batch, online
and consistent estimates) and the event-level Laplace baseline.
"""

from ._analysis import StreamAnalysis
from ._laplace import (
    LaplaceRelease,
    laplace_prefix_sums,
)
from ._tree import (
    BinaryTreeCounter,
    TreeRelease,
    binary_tree_final_sums,
    binary_tree_noise,
    binary_tree_prefix_sums,
    binary_tree_release,
    dyadic_cover,
    tree_range_variance,
)

__all__ = [
    "BinaryTreeCounter",
    "LaplaceRelease",
    "StreamAnalysis",
    "TreeRelease",
    "binary_tree_final_sums",
    "binary_tree_noise",
    "binary_tree_prefix_sums",
    "binary_tree_release",
    "dyadic_cover",
    "laplace_prefix_sums",
    "tree_range_variance",
]
