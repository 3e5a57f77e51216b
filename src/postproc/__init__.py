"""Consistent post-processing of noisy releases (not filled yet: see issue 4).

Will hold OptStream's constrained least squares over hierarchical features ([FV19] Alg. 4),
with a cvxpy + OSQP path and an exact fast path.
"""

__all__: list[str] = []
