"""w-event baselines of [FV19] §6-7: Laplace per value, DFT and PeGaSus under (w,
alpha)-indistinguishability.
"""

from ._baselines import (
    WEventDFT,
    WEventLaplace,
    WEventPegasus,
    dft_coefficient_count,
)

__all__ = [
    "WEventDFT",
    "WEventLaplace",
    "WEventPegasus",
    "dft_coefficient_count",
]
