"""dpstream: the application layer (pipelines, bundled datasets, the ``dpstream`` command)."""

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

__version__ = "0.1.0"

__all__ = [
    "HOUSEHOLD_MINUTES_BOUND",
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
