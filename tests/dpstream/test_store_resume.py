"""Kill-and-resume: a release killed at random points leaves whole periods; a rerun completes it.

A child process releases 60 days into a store (seeded, so the result is checkable) and prints a
line after each committed period; the parent SIGKILLs it at random points (after a random number
of committed periods, plus a random delay), several times, then lets a last run finish. Nothing
may be lost (every period stored), duplicated (one row and one charge per period) or altered
(the values equal an uninterrupted run with the same seed, whose periods draw from the same
per-period seeds).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dpstream import ReleaseStore

DAYS = 60
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
    if __name__ == "__main__":
        def tick(_n):
            print("committed", flush=True)
        with ReleaseStore(sys.argv[1]) as store:
            print("start", flush=True)
            store.release_optstream(
                frame, epsilon=1.0, alpha=10.0, hierarchy={{"t": ["a", "b", "c"]}}, seed=42,
                progress=tick,
            )
        print("done", flush=True)
    """
).format(days=DAYS)


def _run(script: Path, store: Path, kill_after: int | None, delay: float) -> str:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
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
            if kill_after is not None and seen >= kill_after:
                time.sleep(delay)
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.stdout.close()
        proc.wait(timeout=120)
    return "killed" if proc.returncode == -signal.SIGKILL else last


def test_killed_runs_resume_with_nothing_lost_or_duplicated(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    store = tmp_path / "ops.db"
    rng = np.random.default_rng(2026)
    outcomes, counts = [], []
    for _ in range(4):
        kill_after = int(rng.integers(0, 12))  # 0: during start-up or the first period
        outcomes.append(_run(script, store, kill_after, float(rng.uniform(0, 0.05))))
        # read-only: a read-write connection closing last would checkpoint and delete the WAL
        con = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True)
        counts.append(con.execute("SELECT COUNT(*) FROM periods").fetchone()[0])
        con.close()
    print("outcomes", outcomes, "periods stored after each killed run", counts)
    assert "killed" in outcomes
    assert counts == sorted(counts) and counts[-1] < DAYS  # progress kept, never complete yet
    assert _run(script, store, None, 0.0) == "done"

    con = sqlite3.connect(store)
    periods = [r[0] for r in con.execute("SELECT ordinal FROM periods ORDER BY ordinal")]
    charges = [r[0] for r in con.execute("SELECT period FROM charges ORDER BY period")]
    con.close()
    assert periods == list(range(DAYS))  # nothing lost
    assert charges == list(range(DAYS))  # one charge per period: nothing charged twice

    # nothing altered: the same as one uninterrupted run with the same seed
    namespace: dict = {}
    exec(compile(SCRIPT.split("if __name__")[0], "job", "exec"), namespace)
    with ReleaseStore(tmp_path / "reference.db") as ref, ReleaseStore(store) as got:
        want = ref.release_optstream(
            namespace["frame"], epsilon=1.0, alpha=10.0, hierarchy={"t": ["a", "b", "c"]}, seed=42
        )
        stored = got.read()
    want.index = want.index.as_unit("ns")
    pd.testing.assert_frame_equal(stored, want, check_freq=False)
