"""The exception hierarchy shared by every dpstream package.

One root, :class:`DPStreamError`; below it one class per kind of failure. Messages name the
argument, the rule it broke and what was given, and never contain private data values or
random draws (an error that depends on private values leaks them; see OpenDP's b-ary tree).
"""

from __future__ import annotations

__all__ = [
    "BudgetExceededError",
    "DPStreamError",
    "DomainError",
    "ParameterError",
    "SolverError",
]


class DPStreamError(Exception):
    """Root of every error raised by dpstream."""


class ParameterError(DPStreamError, ValueError):
    """A public, data-independent parameter breaks its rule (e.g. ``epsilon <= 0``)."""


class DomainError(DPStreamError, ValueError):
    """Input data lie outside the domain a mechanism is defined on (NaN, outside [0, B], ...).

    Raised before any noise is drawn or any budget charged. The message says which rule was
    broken and where (argument, count of offending entries), never the offending values.
    """


class BudgetExceededError(DPStreamError):
    """A charge would overspend a :class:`~mechanisms.BudgetLedger`.

    Parameters
    ----------
    requested, remaining
        The budgets involved, kept as attributes for programmatic handling.
    """

    def __init__(self, requested: object, remaining: object, label: str = "") -> None:
        self.requested = requested
        self.remaining = remaining
        self.label = label
        what = f" for {label!r}" if label else ""
        super().__init__(
            f"Charging {requested}{what} would overspend the ledger: only {remaining} remains. "
            "Lower the request (releases of the same data compose: a new ledger would not "
            "make the budget larger)."
        )


class SolverError(DPStreamError, RuntimeError):
    """A numerical solver did not reach an optimal solution.

    Parameters
    ----------
    status
        The solver's own status string (e.g. OSQP's ``"maximum iterations reached"``).
    """

    def __init__(self, message: str, status: str = "") -> None:
        self.status = status
        super().__init__(message + (f" (solver status: {status})" if status else ""))
