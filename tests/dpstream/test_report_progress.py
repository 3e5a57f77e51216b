"""Progress displays (issue 17): one bar per unit with an ETA, silent off a terminal."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from click.testing import CliRunner

import dpstream
from dpstream.cli import cli
from dpstream.commands._progress import progress_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _frame(days: float) -> pd.DataFrame:
    steps = int(48 * days)
    idx = pd.date_range("2016-01-01", periods=steps, freq="30min")
    rng = np.random.default_rng(0)  # synthetic loads for a test, nothing is released
    return pd.DataFrame(rng.uniform(100, 200, size=(steps, 2)), index=idx, columns=["a", "b"])


def test_bar_shows_units_and_eta_on_a_terminal_and_nothing_elsewhere_for_a_short_job():
    term, pipe = _Terminal(), io.StringIO()
    for stream in (term, pipe):
        frozen = lambda: 0.0  # noqa: E731 - a job shorter than the interval, at any speed
        with progress_bar(20, unit="period", desc="Releasing", file=stream, clock=frozen) as bar:
            bar.update(5)
            bar.update(15)
    shown = term.getvalue()
    assert "Releasing" in shown and "20/20 periods" in shown and "ETA" in shown
    assert pipe.getvalue() == ""  # not a terminal, shorter than 10 s: silent
    quiet = _Terminal()
    with progress_bar(3, unit="run", desc="x", file=quiet, enabled=False) as bar:
        bar.update(3)
    assert quiet.getvalue() == ""


def test_optstream_reports_every_period_and_the_result_is_unchanged_in_kind():
    frame = _frame(20.5)  # 20 full periods and a partial one
    seen: list[int] = []
    out = dpstream.release_optstream(
        frame, alpha=1.0, epsilon=1.0, hierarchy={"total": ["a", "b"]}, seed=4, progress=seen.append
    )
    assert sum(seen) == 21 and len(seen) > 2  # batches of periods, then the tail
    assert np.allclose(out["total"], out["a"] + out["b"])
    assert (out.to_numpy() >= 0).all() and out.attrs["privacy"]["mechanism"] == "optstream"


def test_cli_release_is_silent_when_stderr_is_not_a_terminal(tmp_path):
    path = tmp_path / "in.csv"
    _frame(3).to_csv(path, index_label="time")
    result = CliRunner().invoke(
        cli,
        ["release", "optstream", str(path), "--epsilon", "1", "--alpha", "5", "--seed", "1",
         "--out", str(tmp_path / "out.csv")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "periods" not in result.output and "ETA" not in result.output


class _Clock:
    """A clock the test moves by hand: no dependence on the machine's speed."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_off_a_terminal_a_long_job_writes_a_line_every_ten_seconds():
    pipe, clock = io.StringIO(), _Clock()
    with progress_bar(366, unit="period", desc="Releasing", file=pipe, clock=clock) as bar:
        for _ in range(366):
            clock.now += 0.4  # 146 s in all, as the year's release of issue 30
            bar.update(1)
    lines = pipe.getvalue().splitlines()
    assert 13 <= len(lines) <= 16  # one per ~10 s, and a last one
    assert lines[0].startswith("Releasing: 25/366 periods, 10 s elapsed, ETA")
    assert lines[-1] == "Releasing: 366/366 periods, 146 s elapsed"


def test_off_a_terminal_an_error_adds_no_line_and_disabled_writes_nothing():
    pipe, clock = io.StringIO(), _Clock()
    try:
        with progress_bar(10, unit="run", desc="x", file=pipe, clock=clock) as bar:
            clock.now = 11.0
            bar.update(1)  # one line: the job is alive
            raise RuntimeError("stop")
    except RuntimeError:
        pass
    assert len(pipe.getvalue().splitlines()) == 1
    quiet, clock = io.StringIO(), _Clock()
    with progress_bar(10, unit="run", desc="x", file=quiet, enabled=False, clock=clock) as bar:
        clock.now = 100.0
        bar.update(10)
    assert quiet.getvalue() == ""
