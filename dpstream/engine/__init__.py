"""Where periods run: in this process (``"local"``) or on a Dask cluster (``"dask"``).

Periods are independent once planned, so a release maps one pure function
(:func:`run_period`, which calls :func:`dpstream.pipelines._period.release_period`, the function
``release_optstream`` runs) over period tasks and hands back each result as it completes, so the
caller commits period by period and never holds every period at once.
"""

from ._run import ENGINES, PeriodTask, map_periods, run_period

__all__ = ["ENGINES", "PeriodTask", "map_periods", "run_period"]
