"""Map the per-period function over tasks, in this process or on Dask (``distributed``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from mechanisms import ParameterError
from mechanisms.core._validation import check_integer

from ..pipelines._period import PeriodSpec, period_bits, release_period

__all__ = ["ENGINES", "PeriodTask", "map_periods", "period_runner", "run_period"]

#: Engines of :func:`map_periods`.
ENGINES = ("local", "dask")


@dataclass(frozen=True, slots=True, kw_only=True)
class PeriodTask:
    """One period to release: what the worker needs, nothing else."""

    spec: PeriodSpec
    """The planned parameters of the period."""
    ordinal: int
    """The period's number in the store's grid (keys its seed)."""
    values: object
    """The period's values (N, r), or a callable returning them (read lazily in the worker)."""
    seed: object = None
    """None: the secure source in the worker; an int: child seed keyed by ``ordinal``."""


def run_period(task: PeriodTask) -> tuple[int, np.ndarray]:
    """The pure per-period function: ``(ordinal, released (N, r))``.

    Draws the period's bits where it runs (:func:`~dpstream.pipelines._period.period_bits`)
    and releases it with :func:`~dpstream.pipelines._period.release_period`.
    """
    values = task.values() if callable(task.values) else task.values
    bits = period_bits(task.seed, task.ordinal)
    return task.ordinal, release_period(task.spec, values, bits)


def map_periods(
    func: Callable,
    tasks: Iterable,
    *,
    engine: str = "local",
    scheduler: str | None = None,
    n_workers: int = 2,
    owner: str = "map_periods",
) -> Iterator:
    """Yield ``func(task)`` for every task, as results complete (order not guaranteed on Dask).

    ``engine="dask"``: on the cluster at ``scheduler`` (an address such as
    ``tcp://10.0.0.5:8786``), or on a ``distributed.LocalCluster`` of ``n_workers`` single-
    threaded worker processes made and closed here. Nothing global is left behind.
    """
    if engine not in ENGINES:
        raise ParameterError(
            f"The 'engine' parameter of {owner} must be one of {ENGINES}. Got {engine!r} instead."
        )
    n_workers = check_integer(n_workers, "n_workers", owner)
    if engine == "local":  # lazily: the caller may do work between two tasks
        for task in tasks:
            yield func(task)
        return
    if scheduler is not None and not isinstance(scheduler, str):
        raise ParameterError(
            f"The 'scheduler' parameter of {owner} must be an address string. Got "
            f"{type(scheduler).__name__} instead."
        )
    yield from _dask_map(func, list(tasks), scheduler, n_workers)


@contextmanager
def period_runner(
    *, engine: str = "local", scheduler: str | None = None, n_workers: int = 2
) -> Iterator[Callable]:
    """A ``run(func, task)`` for periods that must run one after the other (k="auto": each
    plan reads the previous period's measurement): here, or on one Dask cluster (the
    ``scheduler``'s, or a ``LocalCluster`` made and closed here) kept for the whole call, so
    that each period's values are read and its noise drawn in a worker."""
    if engine == "local":
        yield lambda func, task: func(task)
        return
    with _client(scheduler, n_workers) as client:
        yield lambda func, task: client.submit(func, task, pure=False).result()


def worker_environ() -> dict:
    """The environment Dask's nanny gives a worker, without ``MALLOC_TRIM_THRESHOLD_``.

    ``distributed`` sets ``MALLOC_TRIM_THRESHOLD_=65536`` in every worker so that freed memory
    goes back to the OS. Setting it at all switches off glibc's dynamic mmap threshold: every
    large temporary array of a period (tens of MB at 10,000 feeders) is then mmap'ed, page-
    faulted and unmapped afresh, and the same period took 2x the CPU time in a worker as in
    this process (``bench/bench_store.py``; measured 2.0 vs 1.1 s per 10,000-feeder day). The
    other variables (one BLAS/OpenMP thread per worker) are kept.
    """
    import dask

    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    return env


@contextmanager
def _client(scheduler, n_workers, processes: bool = True):
    """A client of ``scheduler``, or of a ``LocalCluster`` of ``n_workers`` single-threaded
    workers (processes, or threads) made and closed here."""
    import dask
    from distributed import Client, LocalCluster  # heavy: import on use

    cluster = None
    if scheduler is None:
        with dask.config.set({"distributed.nanny.pre-spawn-environ": worker_environ()}):
            cluster = LocalCluster(
                n_workers=n_workers,
                threads_per_worker=1,
                processes=processes,
                dashboard_address=":0",  # a free port: never "8787 in use" (shared machines)
                silence_logs=logging.ERROR,
            )
        client = Client(cluster)
    else:
        client = Client(scheduler)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _dask_map(func, tasks, scheduler, n_workers) -> Iterator:
    from distributed import as_completed  # heavy: import on use

    if not tasks:
        return
    with _client(scheduler, n_workers) as client:
        futures = client.map(func, tasks, pure=False)
        for future in as_completed(futures):
            yield future.result()
            future.release()
