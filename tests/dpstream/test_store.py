"""ReleaseStore: a period is released once, with its charge, and returned as stored after."""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd
import pytest

from dpstream import ReleaseStore, release_optstream
from mechanisms import Budget, BudgetExceededError, DomainError, ParameterError

H = {"total": ["a", "b", "c"]}


class CountingBits:
    """A seeded bit source that counts the draws made from it."""

    def __init__(self, seed: int) -> None:
        self._gen = np.random.PCG64(seed)
        self.draws = 0

    def random_raw(self, size: int) -> np.ndarray:
        self.draws += int(size)
        return self._gen.random_raw(size)

    def spawn(self, n_children: int):
        return self._gen.spawn(n_children)


def loads(days: int, start: str = "2016-03-01") -> pd.DataFrame:
    idx = pd.date_range(start, periods=48 * days, freq="30min")
    t = np.arange(idx.size)
    rng = np.random.default_rng(5)
    return pd.DataFrame(
        {
            "a": 300 + 80 * np.sin(2 * np.pi * t / 48) + rng.uniform(0, 20, t.size),
            "b": 200 + 40 * np.cos(2 * np.pi * t / 48) + rng.uniform(0, 20, t.size),
            "c": 100 + rng.uniform(0, 20, t.size),
        },
        index=idx,
    )


def n_charges(path) -> int:
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT COUNT(*) FROM charges").fetchone()[0]
    finally:
        con.close()


def test_release_twice_draws_nothing_and_charges_nothing(tmp_path):
    frame = loads(3)
    with ReleaseStore(tmp_path / "s.db") as store:
        bits = CountingBits(1)
        first = store.release_optstream(frame, epsilon=1.0, alpha=20.0, hierarchy=H, seed=bits)
        assert bits.draws > 0
        again_bits = CountingBits(2)
        again = store.release_optstream(
            frame, epsilon=1.0, alpha=20.0, hierarchy=H, seed=again_bits
        )
        assert again_bits.draws == 0  # nothing drawn
        pd.testing.assert_frame_equal(first, again)
        assert len(store.ledger.charges) == 3  # one charge per period, none for the repeat
        assert again.attrs["privacy"]["seeded"] and again.attrs["privacy"]["epsilon"] == 1.0
    # and after reopening the file
    with ReleaseStore(tmp_path / "s.db") as store:
        bits = CountingBits(3)
        got = store.release_optstream(frame, epsilon=1.0, alpha=20.0, hierarchy=H, seed=bits)
        assert bits.draws == 0
        pd.testing.assert_frame_equal(first, got)
        assert [store.ledger.spent(o) for o in range(3)] == [1.0, 1.0, 1.0]


def test_overlapping_input_releases_only_the_new_periods(tmp_path):
    frame = loads(4)
    with ReleaseStore(tmp_path / "s.db") as store:
        head = store.release_optstream(
            frame.iloc[: 48 * 2], alpha=1.0, epsilon=1.0, hierarchy=H, seed=4
        )
        bits = CountingBits(9)
        full = store.release_optstream(frame, alpha=1.0, epsilon=1.0, hierarchy=H, seed=bits)
        pd.testing.assert_frame_equal(full.iloc[: 48 * 2], head)  # exactly as stored
        assert bits.draws > 0
        assert store.periods()["ordinal"].tolist() == [0, 1, 2, 3]
        assert n_charges(store.path) == 4
        # released values are consistent and non-negative, as release_optstream's
        assert (full.to_numpy() >= 0).all()
        np.testing.assert_allclose(full["total"], full[["a", "b", "c"]].sum(axis=1), atol=1e-6)
        assert list(full.columns) == ["total", "a", "b", "c"]


def test_day_by_day_equals_one_run_with_a_seed(tmp_path):
    frame = loads(3)
    with ReleaseStore(tmp_path / "one.db") as one, ReleaseStore(tmp_path / "daily.db") as daily:
        whole = one.release_optstream(frame, alpha=1.0, epsilon=1.0, hierarchy=H, seed=11)
        parts = [
            daily.release_optstream(
                frame.iloc[48 * d : 48 * (d + 1)], alpha=1.0, epsilon=1.0, hierarchy=H, seed=11
            )
            for d in range(3)
        ]
    pd.testing.assert_frame_equal(pd.concat(parts), whole)


def test_a_store_period_is_release_period_of_its_values(tmp_path):
    """One implementation: the store's period is the pipeline's per-period function."""
    from dpstream.pipelines._period import period_bits

    frame = loads(1)
    with ReleaseStore(tmp_path / "s.db") as store:
        got = store.release_optstream(frame, alpha=1.0, epsilon=1.0, hierarchy=H, k=10, seed=3)
    ref = release_optstream(
        frame, alpha=1.0, epsilon=1.0, hierarchy=H, k=10, seed=period_bits(3, 0)
    )
    pd.testing.assert_frame_equal(got, ref)


@pytest.mark.parametrize(
    "change",
    [
        {"epsilon": 2.0},
        {"alpha": 5.0},
        {"k": 12},
        {"weights": "paper"},
        {"hierarchy": {"total": ["a", "b"], "c2": ["c"], "top": ["total", "c2"]}},
    ],
)
def test_a_changed_configuration_is_refused(tmp_path, change):
    frame = loads(2)
    base = {"epsilon": 1.0, "alpha": 1.0, "hierarchy": H, "k": 10, "weights": "variance"}
    with ReleaseStore(tmp_path / "s.db") as store:
        store.release_optstream(frame.iloc[:48], seed=1, **base)
        with pytest.raises(ParameterError, match="store.s settings"):
            store.release_optstream(frame, seed=1, **{**base, **change})
        assert len(store.periods()) == 1 and n_charges(store.path) == 1
    with ReleaseStore(tmp_path / "new.db") as fresh:  # a new store takes the new configuration
        fresh.release_optstream(frame, seed=1, **{**base, **change})


def test_bad_input_touches_nothing(tmp_path):
    frame = loads(2)
    bad = frame.copy()
    bad.iloc[5, 0] = np.nan
    with ReleaseStore(tmp_path / "s.db") as store:
        with pytest.raises(DomainError, match="finite"):
            store.release_optstream(bad, alpha=1.0, epsilon=1.0, hierarchy=H)
        with pytest.raises(DomainError, match="whole periods"):
            store.release_optstream(frame.iloc[:60], alpha=1.0, epsilon=1.0, hierarchy=H)
        with pytest.raises(ParameterError, match="'epsilon'"):
            store.release_optstream(frame, alpha=1.0, epsilon=-1.0, hierarchy=H)
        assert store.config is None and n_charges(store.path) == 0
        store.release_optstream(frame.iloc[:48], alpha=1.0, epsilon=1.0, hierarchy=H)
        with pytest.raises(DomainError, match="period boundary"):
            store.release_optstream(frame.iloc[10:58], alpha=1.0, epsilon=1.0, hierarchy=H)
        gap = frame.drop(frame.index[50])
        with pytest.raises(DomainError, match="regularly spaced|whole periods"):
            store.release_optstream(gap.iloc[:96], alpha=1.0, epsilon=1.0, hierarchy=H)
        assert len(store.periods()) == 1 and n_charges(store.path) == 1


def test_the_ledger_refuses_a_second_charge_of_a_period(tmp_path):
    with ReleaseStore(tmp_path / "s.db") as store:
        store.release_optstream(loads(1), alpha=1.0, epsilon=1.0, hierarchy=H, seed=1)
        ledger = store.ledger
        with pytest.raises(BudgetExceededError):
            ledger.charge(Budget(0.5), "again", period=0)
        ledger.charge(Budget(0.5), "tomorrow", period=1)  # another period has its own window
        assert ledger.spent(1) == 0.5 and ledger.spent(0) == 1.0
    with ReleaseStore(tmp_path / "s.db") as store:  # persisted, restored on open
        assert store.ledger.spent(1) == 0.5 and len(store.ledger.charges) == 2


def test_a_charged_period_without_values_is_released_under_its_charge(tmp_path):
    """What a run killed between the charge and the commit leaves: resumed, not charged twice."""
    frame = loads(2)
    with ReleaseStore(tmp_path / "s.db") as store:
        store.release_optstream(frame.iloc[:48], alpha=1.0, epsilon=1.0, hierarchy=H, seed=1)
        store.ledger.charge(Budget(1.0), "release_optstream (killed run)", period=1)
        store.release_optstream(frame, alpha=1.0, epsilon=1.0, hierarchy=H, seed=1)
        assert len(store.periods()) == 2 and n_charges(store.path) == 2
        assert store.ledger.spent(1) == 1.0


def test_a_file_that_is_not_a_store_is_refused(tmp_path):
    other = tmp_path / "notes.db"
    other.write_text("not a database, just text " * 100)
    with pytest.raises(ParameterError, match="not a dpstream store"):
        ReleaseStore(other)
    with pytest.raises(ParameterError, match="existing directory"):
        ReleaseStore(tmp_path / "missing" / "s.db")


def test_a_store_of_an_older_schema_is_refused_untouched(tmp_path):
    path = tmp_path / "v1.db"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '1');
        CREATE TABLE periods (ordinal INTEGER PRIMARY KEY, start TEXT NOT NULL,
            n_steps INTEGER NOT NULL, plan TEXT NOT NULL, seeded INTEGER NOT NULL,
            released_at TEXT NOT NULL, data BLOB NOT NULL);
        """
    )
    con.commit()
    con.close()
    with pytest.raises(ParameterError, match="schema version 1.*matching dpstream"):
        ReleaseStore(path)
    con = sqlite3.connect(path)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    con.close()
    assert "charges" not in tables  # nothing created in the old store
