"""Continual counting: the binary-tree mechanism of [CSS11]/[DNPR10] (streaming and batch, online
and consistent estimates), the smooth binary mechanism with discrete Gaussian noise (ρ-zCDP),
one interface over them (``counter=``, exact variances, the best counter for a budget) and
the event-level Laplace baseline.
"""

from ._analysis import StreamAnalysis
from ._counter import BinaryTreeCounter
from ._counters import (
    COUNTERS,
    OPEN_COUNTERS,
    CounterRelease,
    best_counter,
    counter_end_variance,
    counter_release,
    counter_variance,
)
from ._kary import (
    KaryTreeCounter,
    KaryTreeRelease,
    kary_tree_release,
)
from ._laplace import (
    LaplaceRelease,
    laplace_prefix_sums,
)
from ._open_blt import (
    UnboundedBLTCounter,
    unbounded_blt_range_variance,
    unbounded_blt_release,
    unbounded_blt_variance,
)
from ._smooth import (
    SmoothBinaryCounter,
    SmoothBinaryRelease,
    smooth_binary_release,
    smooth_binary_shape,
    zcdp_rho,
    zcdp_to_epsilon,
)
from ._tree import (
    TreeRelease,
    binary_tree_final_sums,
    binary_tree_noise,
    binary_tree_prefix_sums,
    binary_tree_release,
    dyadic_cover,
    tree_range_variance,
)
from ._unbounded import (
    UnboundedKaryCounter,
    UnboundedKaryRelease,
    unbounded_kary_range_variance,
    unbounded_kary_release,
    unbounded_kary_variance,
)

__all__ = [
    "COUNTERS",
    "OPEN_COUNTERS",
    "CounterRelease",
    "KaryTreeCounter",
    "KaryTreeRelease",
    "SmoothBinaryCounter",
    "SmoothBinaryRelease",
    "best_counter",
    "counter_release",
    "counter_end_variance",
    "counter_variance",
    "kary_tree_release",
    "smooth_binary_release",
    "smooth_binary_shape",
    "zcdp_rho",
    "zcdp_to_epsilon",
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
    "UnboundedKaryCounter",
    "UnboundedKaryRelease",
    "unbounded_kary_range_variance",
    "unbounded_kary_release",
    "unbounded_kary_variance",
    "UnboundedBLTCounter",
    "unbounded_blt_range_variance",
    "unbounded_blt_release",
    "unbounded_blt_variance",
]
