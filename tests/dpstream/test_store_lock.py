"""Two jobs on one store: the second fails fast with StoreBusyError, or waits for the first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from dpstream.store import ReleaseStore, StoreBusyError
from mechanisms import DPStreamError, ParameterError

H = {"total": ["a", "b"]}

HOLDER = textwrap.dedent(
    """
    import sys, time
    from dpstream.store import ReleaseStore
    with ReleaseStore(sys.argv[1]) as store, store.job_lock():
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
    """
)


def frame(days: int = 2) -> pd.DataFrame:
    idx = pd.date_range("2016-05-01", periods=48 * days, freq="30min")
    t = np.arange(idx.size)
    return pd.DataFrame({"a": 100 + 30 * np.sin(t / 7.0), "b": 60 + t % 5}, index=idx)


def hold(path, seconds: float) -> subprocess.Popen:
    """Another process holding the store's job lock (as a running release does)."""
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_second_job_fails_fast_and_touches_nothing(tmp_path):
    path = tmp_path / "ops.db"
    other = hold(path, 60)
    try:
        with ReleaseStore(path) as store:
            with pytest.raises(StoreBusyError, match="busy: another job") as err:
                store.release_optstream(frame(), alpha=1.0, epsilon=1.0, hierarchy=H, seed=1)
            assert isinstance(err.value, DPStreamError)
            assert store.config is None and store.ordinals() == set()
            assert len(store.periods()) == 0  # reading is never locked
    finally:
        other.send_signal(signal.SIGKILL)  # a job killed mid-way ...
        other.wait()
        other.stdout.close()
    with ReleaseStore(path) as store:  # ... leaves no stale lock behind
        out = store.release_optstream(frame(), alpha=1.0, epsilon=1.0, hierarchy=H, seed=1)
        assert len(out) == 96 and len(store.ledger.charges) == 2


def test_a_second_job_can_wait_for_the_first(tmp_path):
    path = tmp_path / "ops.db"
    other = hold(path, 1.0)  # releases the lock when it ends
    try:
        with ReleaseStore(path) as store:
            out = store.release_optstream(
                frame(), alpha=1.0, epsilon=1.0, hierarchy=H, seed=1, lock_timeout=120
            )
            assert len(out) == 96
    finally:
        other.wait()
        other.stdout.close()
    assert other.returncode == 0


def test_the_lock_timeout_is_validated_before_anything(tmp_path):
    with ReleaseStore(tmp_path / "ops.db") as store:
        for bad in (-1, float("inf"), "5", True):
            with pytest.raises(ParameterError, match="'lock_timeout'"):
                store.release_optstream(
                    frame(), alpha=1.0, epsilon=1.0, hierarchy=H, lock_timeout=bad
                )
        assert store.config is None


def test_the_cli_waits_for_another_job_with_lock_timeout(tmp_path, capsys):
    from dpstream.cli import main

    data = tmp_path / "today.csv"
    frame().rename_axis("time").to_csv(data)
    hier = tmp_path / "h.json"
    hier.write_text('{"total": ["a", "b"]}')
    path = tmp_path / "ops.db"
    args = ["release", "optstream", str(data), "--epsilon", "1", "--alpha", "5",
            "--hierarchy", str(hier), "--seed", "1"]  # fmt: skip
    store = ["--store", str(path)]
    other = hold(path, 60)
    try:  # fails at once, naming the store
        assert main([*args, *store, "--out", str(tmp_path / "a.csv")]) == 2
        assert "busy" in capsys.readouterr().err
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait()
        other.stdout.close()
    other = hold(path, 1.0)  # ends by itself: a job that waits gets the store
    try:
        out = tmp_path / "b.csv"
        assert main([*args, *store, "--lock-timeout", "120", "--out", str(out)]) == 0
        assert out.exists()
    finally:
        other.wait()
        other.stdout.close()
    capsys.readouterr()
    assert main([*args, *store, "--lock-timeout", "-1", "--out", str(tmp_path / "c.csv")]) == 2
    assert "--lock-timeout" in capsys.readouterr().err
    assert main([*args, "--lock-timeout", "5", "--out", str(tmp_path / "c.csv")]) == 2
    err = capsys.readouterr().err  # without --store
    assert "--lock-timeout" in err and "--store" in err
