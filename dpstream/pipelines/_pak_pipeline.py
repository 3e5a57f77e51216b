"""PAK's Mechanism 1 with the planner's defaults: the application's entry point for a prefix-sum
release (issue 14 item 3).

:func:`mechanisms.pak_release` keeps the paper's Table I as its keyword defaults (``mechanisms``
may not import the planner, and the paper's protocol must stay reachable). The application's
default is the best we know: r, λ, p, ε₁/ε and β_lt from :func:`planner.pak_defaults`, which
reads only public inputs (n, B, ε, δ, the time lag and the counter), and the best counter for
the unit. ``parameters="paper"`` runs Table I; any keyword given explicitly wins over both.

*Privacy*: exactly :func:`mechanisms.pak_release`'s ([PAK19] Theorem 8 with the chosen counter):
the planning reads no data, so it costs nothing.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mechanisms import BudgetLedger, ParameterError, pak_release

__all__ = ["PAK_PARAMETERS", "release_pak"]

#: Where Mechanism 1's local parameters come from.
PAK_PARAMETERS = ("planned", "paper")

_LOCAL = ("r", "lam", "p", "eps1_share", "beta_lt", "noise")


def release_pak(
    values: object,
    *,
    bound: float,
    epsilon: float,
    delta: float,
    time_lag: int,
    parameters: str = "planned",
    counter: str = "auto",
    seed: object = None,
    ledger: BudgetLedger | None = None,
    **local: object,
):
    """Release every prefix sum after the time lag by Mechanism 1 with planned parameters.

    Parameters
    ----------
    values, bound, epsilon, delta, time_lag, seed
        As for :func:`mechanisms.pak_release`.
    ledger : mechanisms.BudgetLedger, None or False, default None
        None: the data set's ledger of the named Series' stream (an array has no stream id:
        pass a ledger, or False for a throwaway experiment); as for
        :func:`dpstream._dataset.account_release`.
    parameters
        ``"planned"`` (default): r, λ, p, ε₁/ε, β_lt from :func:`planner.pak_defaults` (public
        inputs only, [PAK19] Eq. 16 on a public model prefix with the counter's exact
        variance); ``"paper"``: [PAK19] Table I (r = 1.5, λ = 0.85, ε₁/ε = 0.85).
    counter
        The suffix counter (``"auto"``: the best for the unit, sized to the stream's length;
        ``"binary_tree"``: the paper's; ``"unbounded"`` / ``"unbounded_blt"``: a counter that
        needs no n, for a stream whose length is not fixed in advance; the plan still uses n).
    **local
        Any of ``r``, ``lam``, ``p``, ``eps1_share``, ``beta_lt``, ``noise``: overrides.

    Returns
    -------
    mechanisms.PakRelease
        Its ``parameters`` and ``privacy`` record say which values were used; its ``ledger``
        which data set's ledger paid (``accounted`` False with ``ledger=False``; None for a
        seeded run).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.default_rng(0).exponential(1.0, 4096).clip(0, 36)  # synthetic input
    >>> rel = release_pak(x, bound=36.0, epsilon=1.0, delta=2**-20, time_lag=1024, seed=1)
    >>> rel.prefix_sums.shape
    (4096,)
    """
    owner = "release_pak"
    if parameters not in PAK_PARAMETERS:
        raise ParameterError(
            f"The 'parameters' parameter of {owner} must be one of {PAK_PARAMETERS}. "
            f"Got {parameters!r} instead."
        )
    unknown = sorted(set(local) - set(_LOCAL))
    if unknown:
        raise ParameterError(
            f"The keyword arguments of {owner} may override only {_LOCAL}. Got {unknown}."
        )
    chosen: dict = {"counter": counter}
    if parameters == "planned":
        from planner import pak_defaults

        n = int(np.size(np.asarray(values, dtype=object)))
        try:
            plan = pak_defaults(
                n=n,
                bound=bound,
                epsilon=epsilon,
                delta=delta,
                time_lag=time_lag,
                counter=counter,
                noise=str(local.get("noise", "laplace")),
            )
        except ParameterError as err:  # the same rule, in this function's terms
            raise ParameterError(str(err).replace("pak_defaults", owner)) from None
        chosen = plan.release_parameters()  # the plain counter where the threshold won't pay
        if set(local) - {"noise"}:  # a threshold parameter given: the planned threshold setting
            chosen = plan.threshold_parameters()
    chosen.update(local)
    from mechanisms import BudgetLedger

    from .._dataset import DeferredAccount

    if ledger is not None and ledger is not False and not isinstance(ledger, BudgetLedger):
        raise ParameterError(
            f"The 'ledger' parameter of {owner} must be a BudgetLedger, None (the data set's "
            f"ledger) or False (none). Got {type(ledger).__name__} instead."
        )
    # the data set's ledger (a named Series' stream), charged where pak_release charges
    account = DeferredAccount(ledger, values=values, seeded=seed is not None, owner=owner)
    released = pak_release(
        values,
        bound=bound,
        epsilon=epsilon,
        delta=delta,
        time_lag=time_lag,
        seed=seed,
        ledger=account,
        **chosen,
    )
    if account.entry is None:
        return released
    return dataclasses.replace(released, ledger=account.entry)  # which ledger paid
