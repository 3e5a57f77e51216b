"""PAK (Perrier, Asghar, Kaafar, NDSS 2019): the smooth-sensitivity quantile, the private threshold
(Eqs. 6-13) and Mechanism 1.
"""

from ._mechanism1 import (
    PakParameters,
    PakRelease,
    pak_release,
)
from ._quantile import (
    EmpiricalQuantile,
    empirical_quantile,
    quantile_rank,
    smooth_sensitivity_quantile,
)
from ._threshold import (
    MIN_THRESHOLD,
    NOISE_KINDS,
    ThresholdAnalysis,
    ThresholdCalibration,
    ThresholdRelease,
    mechanism_threshold,
    noise_quantile,
    pak_kappa,
    pak_tau_max,
    pak_threshold,
    pak_threshold_calibration,
    smoothing_parameters,
)

__all__ = [
    "EmpiricalQuantile",
    "MIN_THRESHOLD",
    "NOISE_KINDS",
    "PakParameters",
    "PakRelease",
    "ThresholdAnalysis",
    "ThresholdCalibration",
    "ThresholdRelease",
    "empirical_quantile",
    "mechanism_threshold",
    "noise_quantile",
    "pak_kappa",
    "pak_release",
    "pak_tau_max",
    "pak_threshold",
    "pak_threshold_calibration",
    "quantile_rank",
    "smooth_sensitivity_quantile",
    "smoothing_parameters",
]
