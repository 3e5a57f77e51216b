"""Settings and progress display of ``dpstream demo`` (the whole job on bundled data)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

__all__ = ["DemoConfig", "Progress"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoConfig:
    """What the demo runs and how big; every stage reads it, none changes it."""

    out: Path
    """Report folder."""
    quick: bool = False
    """Small sizes: well under a minute."""
    seed: int | None = None
    """Seed of the experiment; None draws one from the OS. A demo compares releases with the
    truth, so it is an experiment, never a private release, either way."""
    epsilon: float = 1.0
    """ε of the PAK and ToPS releases (their planners' sweeps cover other values)."""
    pak_runs: int = 1000
    """Repetitions of Mechanism 1 and BT."""
    optstream_epsilons: tuple[float, ...] = (1.0, 0.1)
    """ε of the hierarchy releases (w-event, w = 48)."""
    alpha: float = 50.0
    """α of the hierarchy releases in kW: a change of any load by up to α within a day is
    hidden (the paper's α = 10–100 MW on regional loads of a few GW, scaled to SimBench's kW)."""
    optstream_trials: int = 10
    """Trials per method and ε for the hierarchy."""
    month: str = "2016-02"
    """Month of the regional data released (February, as in [FV19] Fig. 2)."""
    days: int | None = None
    """Days of the month released (None: all)."""
    tops_runs: int = 20
    """Runs of ToPS and PAK for range queries."""
    forecast_days: int = 14
    """Forecast origins (days) per method."""
    _base_seed: int = field(default=0, repr=False)

    @classmethod
    def create(cls, *, out: Path, quick: bool, seed: int | None, **sizes: object) -> DemoConfig:
        """Build a config: the quick or default sizes, overridden by ``sizes``."""
        base = seed if seed is not None else int.from_bytes(os.urandom(4), "little")
        defaults: dict[str, object] = (
            {"pak_runs": 30, "optstream_trials": 1, "days": 7, "tops_runs": 1, "forecast_days": 1}
            if quick
            else {}
        )
        defaults.update({k: v for k, v in sizes.items() if v is not None})
        return cls(out=Path(out), quick=quick, seed=seed, _base_seed=base, **defaults)

    def experiment_seed(self, stage: int) -> int:
        """A distinct integer seed per stage, reproducible when ``seed`` was given."""
        return (self._base_seed * 1009 + stage * 7919) % (2**31 - 1)


class Progress:
    """Numbered step lines on stderr with the time each step took, and a bar per step.

    :meth:`bar` gives a tqdm bar in the step's own unit (releases, runs, forecast origins)
    with an ETA; like the step lines it is silent when disabled, and the bar also when stderr
    is not a terminal.
    """

    def __init__(self, total: int, *, enabled: bool = True) -> None:
        self.total = total
        self.enabled = enabled
        self.done = 0
        self._started: float | None = None

    def step(self, label: str) -> None:
        """Announce the next step (and close the previous one)."""
        self._close()
        self.done += 1
        self._started = time.perf_counter()
        if self.enabled:
            click.echo(f"[{self.done}/{self.total}] {label} …", err=True)

    def bar(self, total: int, *, unit: str, desc: str):
        """A progress bar of ``total`` ``unit``\\ s for the current step (a context manager)."""
        from dpstream.commands._progress import progress_bar

        return progress_bar(total, unit=unit, desc=desc, enabled=self.enabled)

    def _close(self) -> None:
        if self._started is not None and self.enabled:
            click.echo(f"      done in {time.perf_counter() - self._started:.1f} s", err=True)
        self._started = None

    def finish(self) -> None:
        """Close the last step."""
        self._close()
