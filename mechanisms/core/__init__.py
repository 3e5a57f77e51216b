"""The core every mechanism stands on: secure randomness, lattice noise, budgets and the ledger,
privacy units, errors and validation.
"""

from ._budget import (
    Budget,
    BudgetLedger,
    Charge,
    compose_parallel,
    compose_sequential,
    compose_w_window,
)
from ._errors import (
    BudgetExceededError,
    DomainError,
    DPStreamError,
    ParameterError,
    SolverError,
)
from ._noise import (
    GaussianNoise,
    LaplaceNoise,
    discrete_gaussian,
    discrete_laplace,
    lattice_granularity,
    snap_to_lattice,
)
from ._random import (
    BitSource,
    SecureBits,
    bit_source,
    uniform_open,
)
from ._record import (
    PrivacyRecord,
    dpstream_version,
    unit_kind,
)
from ._results import RangeSum
from ._units import (
    EventLevel,
    LocalDP,
    PrivacyGuarantee,
    PrivacyUnit,
    WAlphaIndistinguishability,
    WEvent,
)

__all__ = [
    "PrivacyRecord",
    "RangeSum",
    "dpstream_version",
    "unit_kind",
    "BitSource",
    "Budget",
    "BudgetExceededError",
    "BudgetLedger",
    "Charge",
    "DPStreamError",
    "DomainError",
    "EventLevel",
    "GaussianNoise",
    "LaplaceNoise",
    "LocalDP",
    "ParameterError",
    "PrivacyGuarantee",
    "PrivacyUnit",
    "SecureBits",
    "SolverError",
    "WAlphaIndistinguishability",
    "WEvent",
    "bit_source",
    "compose_parallel",
    "compose_sequential",
    "compose_w_window",
    "discrete_gaussian",
    "discrete_laplace",
    "lattice_granularity",
    "snap_to_lattice",
    "uniform_open",
]
