"""Progress bars for long commands: one bar per unit the user understands, with an ETA.

A thin wrapper of tqdm (a maintained progress library; issue 17): periods for releases,
origins for forecasts, runs or releases for experiments. The bar writes to stderr and is
silent when stderr is not a terminal (pipes, CI logs, tests), so redirected output stays
clean. tqdm is imported here, inside the function, so the CLI starts fast.
"""

from __future__ import annotations

import sys
from typing import IO

__all__ = ["progress_bar"]


def progress_bar(total: int, *, unit: str, desc: str, enabled: bool = True, file: IO | None = None):
    """A tqdm bar of ``total`` ``unit``\\ s on stderr; ``bar.update(n)`` advances it.

    Disabled (draws nothing, ``update`` is a no-op) when ``enabled`` is false or the output is
    not a terminal. Use it as a context manager so the bar is closed on errors too.
    """
    from tqdm import tqdm  # the plain terminal bar (tqdm.auto would pick widgets in Jupyter)

    stream = sys.stderr if file is None else file
    interactive = bool(getattr(stream, "isatty", lambda: False)())
    return tqdm(
        total=max(int(total), 0),
        unit=f" {unit}s",  # "0/366 periods"
        desc=desc,
        file=stream,
        disable=not (enabled and interactive),
        dynamic_ncols=True,
        leave=True,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}{unit} "
        "[{elapsed} elapsed, ETA {remaining}]",
    )
