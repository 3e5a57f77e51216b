"""Progress for long commands: one bar per unit the user understands, with an ETA.

A thin wrapper of tqdm (a maintained progress library; issue 17): periods for releases,
origins for forecasts, runs or releases for experiments. On a terminal it draws a bar on
stderr. On anything else (a cron log, a pipe) it writes a plain line every ``interval``
seconds (10 by default) once the job has run that long, so a log shows the job is alive
(issue 30: a year's release ran 146 s with nothing printed); a job shorter than the interval
prints nothing, so redirected output of short runs and one-line errors stay clean. tqdm is
imported here, inside the function, so the CLI starts fast.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO

__all__ = ["LogLines", "progress_bar"]

#: Seconds between two progress lines off a terminal.
LOG_INTERVAL = 10.0


class LogLines:
    """Progress as plain lines for a non-terminal: ``update(n)`` writes a line when at least
    ``interval`` seconds passed since the start or the last line; a last line on a normal
    close if any line was written (never on an error)."""

    def __init__(
        self,
        total: int,
        *,
        unit: str,
        desc: str,
        file: IO,
        interval: float = LOG_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.unit, self.desc, self.file = max(int(total), 0), unit, desc, file
        self.interval, self.clock = float(interval), clock
        self.n = 0
        self.start = self.last = clock()
        self.lines = 0

    def _line(self, now: float) -> None:
        elapsed = now - self.start
        text = f"{self.desc}: {self.n}/{self.total} {self.unit}s, {elapsed:.0f} s elapsed"
        if 0 < self.n < self.total:
            text += f", ETA {elapsed / self.n * (self.total - self.n):.0f} s"
        print(text, file=self.file, flush=True)
        self.last = now
        self.lines += 1

    def update(self, n: int = 1) -> None:
        self.n += int(n)
        now = self.clock()
        if now - self.last >= self.interval:
            self._line(now)

    def close(self, ok: bool = True) -> None:
        if ok and self.lines:
            self._line(self.clock())

    def __enter__(self) -> LogLines:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(ok=exc_type is None)


def progress_bar(
    total: int,
    *,
    unit: str,
    desc: str,
    enabled: bool = True,
    file: IO | None = None,
    interval: float | None = None,
    clock: Callable[[], float] = time.monotonic,
):
    """A progress display of ``total`` ``unit``\\ s on stderr; ``bar.update(n)`` advances it.

    A tqdm bar on a terminal; elsewhere :class:`LogLines` (a line every ``interval`` seconds,
    default :data:`LOG_INTERVAL`; ``clock`` for tests). Draws nothing when ``enabled`` is
    false. Use it as a context manager so it is closed on errors too.
    """
    from tqdm import tqdm  # the plain terminal bar (tqdm.auto would pick widgets in Jupyter)

    stream = sys.stderr if file is None else file
    interactive = bool(getattr(stream, "isatty", lambda: False)())
    if enabled and not interactive:
        every = LOG_INTERVAL if interval is None else interval
        return LogLines(total, unit=unit, desc=desc, file=stream, interval=every, clock=clock)
    return tqdm(
        total=max(int(total), 0),
        unit=f" {unit}s",  # "0/366 periods"
        desc=desc,
        file=stream,
        disable=not enabled,
        dynamic_ncols=True,
        leave=True,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}{unit} "
        "[{elapsed} elapsed, ETA {remaining}]",
    )
