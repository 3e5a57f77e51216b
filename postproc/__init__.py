"""Consistent post-processing of noisy releases: OptStream's Algorithm 4 over hierarchies.

One weighted least-squares problem per w-period over every node of a hierarchy of streams and
every part of a chain of features ([FV19] Alg. 4, §3.4, extended to hierarchies as in §5.2),
with consistency (parts sum their sub-parts, parents their children) and non-negativity. Three
solvers return the same unique optimum: the exact fast path, linear in the number of nodes for
any weights (two-pass tree BLUE of [HRMS10] over the hierarchy with a w-vector per node, plus an
active set for the bounds; ``_tree``, ``_nonneg``), the previous dense path (Kronecker factors
and block principal pivoting, ``method="dense"``) and a general cvxpy + OSQP path.

References
----------
[FV19]   Fioretto, Van Hentenryck. OptStream: Releasing Time Series Privately. JAIR 2019.
[HRMS10] Hay, Rastogi, Miklau, Suciu. Boosting the Accuracy of DP Histograms Through
         Consistency. VLDB 2010.
"""

from ._cvx import OSQP_SETTINGS
from ._fast import MAX_DENSE_SIZE
from ._features import FeatureSet
from ._hierarchy import Hierarchy
from ._prior import ProfilePrior, merge_prior, profile_prior
from ._project import ConsistentRelease, project_consistent
from ._weights import bias_aware_variances, interpolation_bias_variance

__all__ = [
    "MAX_DENSE_SIZE",
    "OSQP_SETTINGS",
    "ConsistentRelease",
    "FeatureSet",
    "Hierarchy",
    "ProfilePrior",
    "bias_aware_variances",
    "interpolation_bias_variance",
    "merge_prior",
    "profile_prior",
    "project_consistent",
]
