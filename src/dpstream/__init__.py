"""dpstream: the application layer (pipelines, bundled datasets, the ``dpstream`` command)."""

__all__: list[str] = []
__version__ = "0.1.0"

# Bundled real datasets (dpstream/data, see its README.md for sources and licences).
from .datasets import (  # noqa: E402
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

__all__ += [
    "HOUSEHOLD_YEARS",
    "RETAIL_BOUND",
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
    "retail_stream",
    "simbench_hierarchy",
]
