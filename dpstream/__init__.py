"""dpstream: the application layer (pipelines, bundled datasets, the ``dpstream`` command)."""

import importlib
from typing import TYPE_CHECKING

# Public names, imported on first use (PEP 562): ``import dpstream`` (and so the ``dpstream``
# command's start-up) does not pay for pandas, the solvers and the bundled data until a name
# that needs them is used.
_LAZY = {
    # the operator's daily job: a release store (issue 15)
    "ReleaseStore": "dpstream.store",
    # the persisted accountant (issue 11 §4)
    "SQLiteLedger": "dpstream._ledger",
    # w-event baselines of [FV19] §6-7 and the OptStream pipeline ([FV19] Alg. 2 + 4)
    "release_dft": "dpstream.pipelines",
    "release_laplace": "dpstream.pipelines",
    "release_pegasus": "dpstream.pipelines",
    "release_optstream": "dpstream.pipelines",
    "release_pak": "dpstream.pipelines",
    # the standard error of every released value (issue 30)
    "std_errors": "dpstream._std_errors",
    # bundled real datasets (dpstream/data, see its README.md for sources and licences)
    **{
        name: "dpstream.datasets"
        for name in (
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
        )
    },
}


def __getattr__(name: str) -> object:
    if name == "datasets":
        return importlib.import_module("dpstream.datasets")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dpstream' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, eagerly
    from ._ledger import SQLiteLedger  # noqa: F401
    from ._std_errors import std_errors  # noqa: F401
    from .datasets import (  # noqa: F401
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
    from .pipelines import (  # noqa: F401
        release_dft,
        release_laplace,
        release_optstream,
        release_pak,
        release_pegasus,
    )
    from .store import ReleaseStore  # noqa: F401

__version__ = "0.1.0"

__all__ = [
    "SQLiteLedger",
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
    "std_errors",
]
