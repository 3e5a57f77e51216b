"""The period engine: the same per-period function in this process and on Dask."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpstream import ReleaseStore
from dpstream.engine import PeriodTask, map_periods, run_period
from dpstream.pipelines._period import PeriodSpec, period_bits, release_period
from mechanisms import ParameterError
from postproc import FeatureSet

H = {"total": ["a", "b"]}


@pytest.fixture(scope="module")
def scheduler():
    """A running two-worker cluster, reached by address (the --scheduler path)."""
    from distributed import LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    yield cluster.scheduler_address
    cluster.close()


def _frame(days: int) -> pd.DataFrame:
    idx = pd.date_range("2016-05-01", periods=48 * days, freq="30min")
    t = np.arange(idx.size)
    return pd.DataFrame({"a": 100 + 30 * np.sin(t / 7.0), "b": 60 + t % 5}, index=idx)


def test_period_bits_are_keyed_by_period_not_by_order():
    a = period_bits(7, 3).random_raw(4)
    b = period_bits(7, 3).random_raw(4)
    c = period_bits(7, 4).random_raw(4)
    assert (a == b).all() and not (a == c).all()
    with pytest.raises(ParameterError, match="'seed'"):
        period_bits("7", 1)


def test_map_periods_local_is_lazy_and_checks_the_engine():
    calls = []
    it = map_periods(lambda x: calls.append(x) or x, [1, 2, 3])
    assert next(it) == 1 and calls == [1]  # the caller commits before the next period runs
    with pytest.raises(ParameterError, match="'engine'"):
        list(map_periods(abs, [1], engine="spark"))


def test_run_period_reads_lazily_and_matches_release_period():
    spec = PeriodSpec(
        epsilon=1.0,
        w=8,
        k=3,
        alpha=1.0,
        sampling="equal",
        theta=None,
        hierarchy=None,
        nodes=("x",),
        features=FeatureSet.default(8),
    )
    values = np.arange(8.0)[None] + 10
    ordinal, out = run_period(PeriodTask(spec=spec, ordinal=5, values=lambda: values, seed=1))
    assert ordinal == 5
    np.testing.assert_array_equal(out, release_period(spec, values, period_bits(1, 5)))
    with pytest.raises(ParameterError, match="shape"):
        release_period(spec, np.ones((2, 8)), period_bits(1, 5))


@pytest.mark.parametrize("workers", [1, 2])
def test_dask_matches_local_for_any_number_of_workers(tmp_path, workers):
    frame = _frame(6)
    with ReleaseStore(tmp_path / "local.db") as local:
        want = local.release_optstream(frame, epsilon=1.0, alpha=5.0, hierarchy=H, seed=9)
    with ReleaseStore(tmp_path / f"dask{workers}.db") as store:
        got = store.release_optstream(
            frame, epsilon=1.0, alpha=5.0, hierarchy=H, seed=9, engine="dask", n_workers=workers
        )
        assert len(store.ledger.charges) == 6 and len(store.periods()) == 6
    pd.testing.assert_frame_equal(got, want)


def test_dask_seed_must_be_an_int(tmp_path):
    with ReleaseStore(tmp_path / "s.db") as store, pytest.raises(ParameterError, match="'seed'"):
        store.release_optstream(
            _frame(1), alpha=1.0, epsilon=1.0, hierarchy=H, seed=np.random.PCG64(1), engine="dask"
        )


@pytest.mark.parametrize("k", [10, None])  # None: both defaults (k="auto", issue 22)
@pytest.mark.parametrize("fmt", ["wide", "long"])
@pytest.mark.parametrize("engine", ["local", "dask"])
def test_parquet_input_read_lazily_equals_the_in_memory_release(
    tmp_path, fmt, engine, scheduler, k
):
    from dpstream.io import wide_to_long
    from dpstream.store import release_parquet_to_store

    frame = _frame(4)
    frame.index.name = "time"
    path = tmp_path / f"{fmt}.parquet"
    if fmt == "wide":
        frame.to_parquet(path)
    else:
        wide_to_long(frame).to_parquet(path, index=False)
    with ReleaseStore(tmp_path / "ref.db") as ref:
        kw = {} if k is None else {"k": k}
        want = ref.release_optstream(frame, alpha=1.0, epsilon=1.0, hierarchy=H, seed=5, **kw)
    with ReleaseStore(tmp_path / "lazy.db") as store:
        ordinals = release_parquet_to_store(
            store,
            path,
            epsilon=1.0,
            alpha=1.0,
            hierarchy=H,
            seed=5,
            engine=engine,
            scheduler=scheduler if engine == "dask" else None,
            **kw,
        )
        got = store.read(ordinals)
        assert store.config["k"] == ("auto" if k is None else k)
    assert ordinals == [0, 1, 2, 3]
    np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())


@pytest.mark.parametrize("engine", ["local", "dask"])
def test_bad_values_in_a_lazily_read_period_stop_everything_before_a_charge(
    tmp_path, engine, scheduler
):
    from dpstream.store import release_parquet_to_store
    from mechanisms import DomainError

    frame = _frame(3)
    frame.index.name = "time"
    frame.iloc[48 * 2 + 5, 1] = -1.0  # a negative load in the last period
    path = tmp_path / "bad.parquet"
    frame.to_parquet(path)
    with ReleaseStore(tmp_path / "s.db") as store:
        with pytest.raises(DomainError, match="non-negative"):
            release_parquet_to_store(
                store,
                path,
                epsilon=1.0,
                alpha=1.0,
                hierarchy=H,
                engine=engine,
                scheduler=scheduler if engine == "dask" else None,
            )
        assert store.config is None and store.periods().empty
