"""Where periods run: in this process (``"local"``) or on a Dask cluster (``"dask"``).

Two ways to spread a release:

* *across periods* (backfills): periods are independent once planned, so a release maps one
  pure function (:func:`run_period`, which calls
  :func:`dpstream.pipelines._period.release_period`, the function ``release_optstream`` runs)
  over period tasks and hands back each result as it completes, so the caller commits period
  by period and never holds every period at once;
* *inside a period* (the daily job): :func:`release_split` cuts the hierarchy into subtrees
  (:func:`choose_cut`), one object per subtree reads its leaves from the source, measures
  them and takes part in the distributed elimination of Algorithm 4
  (:mod:`dpstream.engine._subtree`, :mod:`postproc._split`), here or as Dask actors; the
  default ``k="auto"`` the same way with one in-stream planner per subtree kept across
  periods (:class:`~dpstream.engine._auto_split.AutoSplit`).
"""

from ._auto_split import AutoSplit
from ._run import ENGINES, PeriodTask, map_periods, run_period
from ._subtree import SplitSpec, choose_cut, release_split

__all__ = [
    "ENGINES",
    "AutoSplit",
    "PeriodTask",
    "SplitSpec",
    "choose_cut",
    "map_periods",
    "release_split",
    "run_period",
]
