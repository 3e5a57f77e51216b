"""ToPS (Wang et al., CCS 2021, centralised DP): private threshold, online consistent F-ary
hierarchy, smoothers and the streaming release.
"""

from ._release import (
    tops_perturb,
    tops_release,
)
from ._smoothers import (
    SMOOTHERS,
    Smoother,
    smooth_blocks,
)
from ._stream import (
    ToPSStream,
    TopsUpdate,
)
from ._threshold import (
    THRESHOLD_METHODS,
    TopsThresholdRelease,
    tops_candidates,
    tops_kappa,
    tops_scores,
    tops_threshold,
)
from ._tree import (
    TopsRelease,
    consistent_tree,
    tops_leaf_size,
    tops_levels,
    tops_noise,
)

__all__ = [
    "SMOOTHERS",
    "Smoother",
    "THRESHOLD_METHODS",
    "ToPSStream",
    "TopsRelease",
    "TopsThresholdRelease",
    "TopsUpdate",
    "consistent_tree",
    "smooth_blocks",
    "tops_candidates",
    "tops_kappa",
    "tops_leaf_size",
    "tops_levels",
    "tops_noise",
    "tops_perturb",
    "tops_release",
    "tops_scores",
    "tops_threshold",
]
