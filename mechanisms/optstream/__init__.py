"""OptStream (Fioretto & Van Hentenryck, JAIR 2019): sampling (Alg. 3), perturbation and feature
queries (Alg. 2) for (w, alpha)-indistinguishability.
"""

from ._estimates import (
    OPTSTREAM_SAMPLINGS,
    OptStreamEstimates,
    OptStreamSplit,
    feature_answers,
    feature_noise,
    optstream_estimates,
    optstream_split,
    perturb_noise,
)

__all__ = [
    "OPTSTREAM_SAMPLINGS",
    "OptStreamEstimates",
    "OptStreamSplit",
    "feature_answers",
    "feature_noise",
    "optstream_estimates",
    "optstream_split",
    "perturb_noise",
]
