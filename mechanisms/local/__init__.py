"""Local DP (ToPL of Wang et al., CCS 2021): Square Wave with EMS, the Piecewise/Duchi/Hybrid
mechanisms and the ToPL release.
"""

from ._hybrid import (
    HYBRID_SWITCH_EPSILON,
    DuchiMechanism,
    HybridMechanism,
    PiecewiseMechanism,
)
from ._square_wave import (
    DistributionFit,
    SquareWave,
    square_wave_b,
    square_wave_distribution,
)
from ._topl import (
    ToplRelease,
    ToplThresholdPlan,
    plan_topl_threshold,
    range_length_moments,
    topl_release,
)

__all__ = [
    "DistributionFit",
    "DuchiMechanism",
    "HYBRID_SWITCH_EPSILON",
    "HybridMechanism",
    "PiecewiseMechanism",
    "SquareWave",
    "ToplRelease",
    "ToplThresholdPlan",
    "plan_topl_threshold",
    "range_length_moments",
    "square_wave_b",
    "square_wave_distribution",
    "topl_release",
]
