"""w-event baselines of [FV19] §6-7: Laplace per value, DFT and PeGaSus under (w,
alpha)-indistinguishability.
"""

from ._baselines import (
    WEventDFT,
    WEventLaplace,
    WEventPegasus,
    dft_coefficient_count,
)
from ._gaussian import (
    dp_to_zcdp,
    gaussian_epsilon,
    gaussian_gain,
    gaussian_rho,
    gaussian_window_noise,
    zcdp_to_dp,
)

__all__ = [
    "WEventDFT",
    "WEventLaplace",
    "WEventPegasus",
    "dft_coefficient_count",
    "dp_to_zcdp",
    "gaussian_epsilon",
    "gaussian_gain",
    "gaussian_rho",
    "gaussian_window_noise",
    "zcdp_to_dp",
]
