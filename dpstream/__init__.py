"""dpstream: the application layer (pipelines, bundled datasets, the ``dpstream`` command)."""

# w-event baselines of [FV19] §6-7 (issue 4).
# Bundled real datasets (dpstream/data, see its README.md for sources and licences).
from .datasets import (
    HOUSEHOLD_MINUTES_BOUND,
    HOUSEHOLD_YEARS,
    RETAIL_BOUND,
    LightTailCheck,
    household_hierarchy,
    household_minutes,
    household_minutes_stream,
    light_tail_check,
    load_household,
    load_regional,
    load_retail_invoices,
    load_simbench,
    regional_hierarchy,
    retail_stream,
    simbench_hierarchy,
)

# OptStream pipeline ([FV19] Alg. 2 + 4, issue 4).
from .pipelines._optstream_pipeline import release_optstream
from .pipelines._wevent_pipeline import release_dft, release_laplace, release_pegasus

# The operator's daily job: a release store (issue 15).
from .store import ReleaseStore

__version__ = "0.1.0"

__all__ = [
    "HOUSEHOLD_MINUTES_BOUND",
    "HOUSEHOLD_YEARS",
    "RETAIL_BOUND",
    "ReleaseStore",
    "LightTailCheck",
    "household_hierarchy",
    "household_minutes",
    "household_minutes_stream",
    "light_tail_check",
    "load_household",
    "load_regional",
    "load_retail_invoices",
    "load_simbench",
    "regional_hierarchy",
    "release_dft",
    "release_laplace",
    "release_optstream",
    "release_pegasus",
    "retail_stream",
    "simbench_hierarchy",
]
