"""Kill and race runs on stores and ledgers (issue 31 "Must show"): prints the counts.

* ``--kills N``: N SIGKILLs of a store release (unseeded: the data set's ledger is charged) at
  random points, each followed by a resume of the same store; at the end every period is stored
  once and charged once in the store and in the data set's ledger.
* ``--races R``: R repetitions of 4 processes releasing the same days into one new store at
  once (each waits for the store's lock), and of 4 processes charging 0.3 each to one ledger
  of total 1: no period stored or charged twice, never more than the total spent.

    python scripts/store_kill_race.py --kills 60 --races 20
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

DAYS = 20
JOB = textwrap.dedent(
    """
    import sys
    import numpy as np, pandas as pd
    from dpstream import ReleaseStore
    idx = pd.date_range("2016-01-01", periods=48 * {days}, freq="30min")
    t = np.arange(idx.size)
    frame = pd.DataFrame({{"a": 300 + 80 * np.sin(2 * np.pi * t / 48), "b": 200 + 0 * t}}, idx)
    with ReleaseStore(sys.argv[1]) as store:
        print("start", flush=True)
        store.release_optstream(
            frame, epsilon=1.0, alpha=10.0, k=10, hierarchy={{"t": ["a", "b"]}},
            lock_timeout=float(sys.argv[2]), progress=lambda _n: print("committed", flush=True),
        )
    print("done", flush=True)
    """
).format(days=DAYS)
CHARGE = textwrap.dedent(
    """
    import sys
    from dpstream._ledger import SQLiteLedger
    from mechanisms import Budget, BudgetExceededError
    with SQLiteLedger(sys.argv[1]) as ledger:
        try:
            ledger.charge(Budget(0.3), "race")
            print("charged")
        except BudgetExceededError:
            print("refused")
    """
)


def _env(home: Path) -> dict:
    root = str(Path(__file__).resolve().parents[1])
    return {**os.environ, "OPENBLAS_NUM_THREADS": "1", "DPSTREAM_HOME": str(home),
            "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}  # fmt: skip


def _counts(store: Path, home: Path) -> tuple[list[int], list[int], list[int]]:
    con = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    periods = [r[0] for r in con.execute("SELECT ordinal FROM periods")] if tables else []
    charges = [r[0] for r in con.execute("SELECT period FROM charges")] if tables else []
    con.close()
    ds = []
    for book in (home / "ledgers").glob("*.db"):  # none yet if killed before its creation
        con = sqlite3.connect(book)  # read-write: rolls back a killed writer's hot journal
        ds += [r[0] for r in con.execute("SELECT period FROM charges")]
        con.close()
    return periods, charges, ds


def kills(n: int, root: Path, rng) -> None:
    home, store = root / "kill_home", root / "kill.db"
    job = root / "job.py"
    job.write_text(JOB)
    killed = 0
    while killed < n:
        proc = subprocess.Popen(
            [sys.executable, str(job), str(store), "0"], stdout=subprocess.PIPE, text=True,
            env=_env(home),
        )  # fmt: skip
        after, seen, done = int(rng.integers(0, 3)), 0, False
        for line in proc.stdout:
            seen += line.strip() == "committed"
            done = line.strip() == "done"
            if seen >= after:
                time.sleep(float(rng.uniform(0, 0.05)))
                proc.send_signal(signal.SIGKILL)
                break
        proc.stdout.close()
        proc.wait()
        if proc.returncode == -signal.SIGKILL:
            killed += 1
        if done or (store.exists() and len(_counts(store, home)[0]) == DAYS):
            store_files = [p for p in root.iterdir() if p.name.startswith("kill.db")]
            for p in store_files:  # a new data set and store: keep killing
                p.unlink()
            home = root / f"kill_home{killed}"
    print(f"kills: {killed} SIGKILLs")
    subprocess.run([sys.executable, str(job), str(store), "0"], env=_env(home), check=True,
                   capture_output=True)  # fmt: skip
    periods, charges, ds = _counts(store, home)
    dup = (len(periods) - len(set(periods))) + (len(charges) - len(set(charges)))
    dup += len(ds) - len(set(ds))
    print(f"  final store: {len(set(periods))} of {DAYS} periods, duplicates {dup}")


def races(reps: int, root: Path) -> None:
    job = root / "job.py"
    job.write_text(JOB)
    charge = root / "charge.py"
    charge.write_text(CHARGE)
    dup = over = 0
    for r in range(reps):
        home, store = root / f"race_home{r}", root / f"race{r}.db"
        procs = [
            subprocess.Popen([sys.executable, str(job), str(store), "600"], env=_env(home),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for _ in range(4)
        ]  # fmt: skip
        for p in procs:
            p.wait()
        failed = [p.stderr.read() for p in procs if p.returncode != 0]
        assert not failed, failed  # every job waited for the lock and succeeded
        periods, charges, ds = _counts(store, home)
        dup += (len(periods) - len(set(periods))) + (len(charges) - len(set(charges)))
        dup += len(ds) - len(set(ds))
        assert len(set(periods)) == DAYS
        from dpstream._ledger import SQLiteLedger
        from mechanisms import Budget

        book = root / f"ledger{r}.db"
        SQLiteLedger(book, total=Budget(1.0)).close()
        procs = [
            subprocess.Popen([sys.executable, str(charge), str(book)], env=_env(home),
                             stdout=subprocess.PIPE, text=True)
            for _ in range(4)
        ]  # fmt: skip
        out = [p.communicate()[0].strip() for p in procs]
        with SQLiteLedger(book) as ledger:
            spent = 1.0 - ledger.remaining_epsilon
        over += spent > 1.0 or out.count("charged") != 3
    print(f"races: {reps} x (4 jobs into one store, 4 charges into one ledger): "
          f"duplicates {dup}, overspends or wrong counts {over}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=60)
    parser.add_argument("--races", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(2031)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.kills:
            kills(args.kills, root, rng)
        if args.races:
            races(args.races, root)


if __name__ == "__main__":
    main()
