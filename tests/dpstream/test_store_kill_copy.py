"""SIGKILL at random points, then ``cp`` of the store's main file alone, then the same release
into the copy (issue 31, "Must show"): every day the copy holds is returned exactly as stored,
never drawn or charged again, and the days it lacks are released once.

Each trial is a fresh data set (its own ``$DPSTREAM_HOME``) and store: a child process releases
DAYS unseeded days (so the data set's ledger is charged) and prints a line per committed period;
the parent kills it after a random number of periods plus a random delay, copies ``ops.db``
alone (no ``-wal``, ``-shm``), and releases the same frame into the copy. A copy taken inside a
period's commit window carries the pending-commit mark and is refused (counted, never re-drawn).
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstream.store import ReleaseStore
from mechanisms import ParameterError

DAYS = 12
TRIALS = 22
SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np, pandas as pd
    from dpstream import ReleaseStore

    idx = pd.date_range("2016-01-01", periods=48 * {days}, freq="30min")
    t = np.arange(idx.size)
    frame = pd.DataFrame(
        {{"a": 300 + 80 * np.sin(2 * np.pi * t / 48), "b": 200 + 0 * t, "c": 50 + t % 7}},
        index=idx,
    )
    KW = dict(epsilon=1.0, alpha=10.0, k=10, hierarchy={{"t": ["a", "b", "c"]}})
    if __name__ == "__main__":
        def tick(_n):
            print("committed", flush=True)
        with ReleaseStore(sys.argv[1]) as store:
            print("start", flush=True)
            store.release_optstream(frame, progress=tick, **KW)
        print("done", flush=True)
    """
).format(days=DAYS)


def _kill_run(script: Path, store: Path, home: Path, kill_after: int, delay: float) -> str:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "DPSTREAM_HOME": str(home)}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, str(script), str(store)], stdout=subprocess.PIPE, text=True, env=env
    )
    seen, last = 0, ""
    try:
        for line in proc.stdout:
            last = line.strip()
            seen += last == "committed"
            if seen >= kill_after:
                time.sleep(delay)
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.stdout.close()
        proc.wait(timeout=300)
    return "killed" if proc.returncode == -signal.SIGKILL else last


def _stored(path: Path) -> tuple[dict[int, bytes], list[int]]:
    con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
        if "periods" not in tables:
            return {}, []
        data = dict(con.execute("SELECT ordinal, data FROM periods"))
        charges = [r[0] for r in con.execute("SELECT period FROM charges ORDER BY id")]
        return data, charges
    finally:
        con.close()


@pytest.mark.slow
def test_killed_then_copied_stores_return_their_days_never_redrawn(tmp_path, monkeypatch):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    namespace: dict = {}
    exec(compile(SCRIPT.split("if __name__")[0], "job", "exec"), namespace)
    frame, kw = namespace["frame"], namespace["KW"]
    rng = np.random.default_rng(31)
    refused, kept_days, outcomes = 0, [], []
    for trial in range(TRIALS):
        home = tmp_path / f"home{trial}"
        monkeypatch.setenv("DPSTREAM_HOME", str(home))
        src, copy = tmp_path / f"ops{trial}.db", tmp_path / f"copy{trial}.db"
        kill_after = int(rng.integers(0, DAYS - 2))
        outcomes.append(_kill_run(script, src, home, kill_after, float(rng.uniform(0, 0.05))))
        if not src.exists():
            kept_days.append(0)
            continue
        shutil.copy(src, copy)  # the main file alone
        before, charges_before = _stored(copy)
        kept_days.append(len(before))
        try:
            with ReleaseStore(copy) as store:
                out = store.release_optstream(frame, **kw)
        except ParameterError as exc:  # the pending-commit mark: refused, nothing drawn
            assert "copied" in str(exc)
            refused += 1
            assert _stored(copy) == (before, charges_before)
            continue
        after, charges_after = _stored(copy)
        assert set(after) == set(range(DAYS))
        for ordinal, blob in before.items():  # returned exactly as stored, never re-drawn
            assert after[ordinal] == blob
            values = np.frombuffer(blob, dtype="<f8").reshape(4, 48).T
            day = out.iloc[ordinal * 48 : (ordinal + 1) * 48].to_numpy()
            np.testing.assert_array_equal(day, values)
        assert charges_after[: len(charges_before)] == charges_before
        assert sorted(charges_after) == list(range(DAYS))  # one charge per day
        assert isinstance(out, pd.DataFrame)
        (book,) = (home / "ledgers").glob("*.db")  # the data set's ledger: once per day
        con = sqlite3.connect(f"{book.resolve().as_uri()}?mode=ro", uri=True)
        periods = [r[0] for r in con.execute("SELECT period FROM charges")]
        con.close()
        assert len(periods) == len(set(periods)) == DAYS
    print(
        f"trials {TRIALS}, killed {outcomes.count('killed')}, copies refused (commit window) "
        f"{refused}, days kept per copy {kept_days}"
    )
    assert outcomes.count("killed") >= 20
    assert refused <= TRIALS // 2
