"""The store's time grid: periods of w regular steps, numbered from the store's origin."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mechanisms import DomainError

__all__ = ["Grid"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Grid:
    """Time stamps as integers (ns for datetimes): period ``o`` starts at origin + o·w·step."""

    kind: str
    """``"datetime"`` or ``"int"``."""
    origin: int
    """First stamp of the store's first released period."""
    step: int
    """Spacing of two consecutive stamps (> 0)."""
    w: int
    """Steps per period."""

    @staticmethod
    def stamps(index: pd.Index) -> tuple[str, np.ndarray]:
        if isinstance(index, pd.DatetimeIndex):
            if index.tz is not None:
                index = index.tz_convert("UTC").tz_localize(None)
            return "datetime", index.as_unit("ns").asi8
        return "int", np.asarray(index, dtype=np.int64)

    @classmethod
    def from_index(cls, index: pd.Index, w: int, owner: str) -> Grid:
        """The grid of a validated, increasing index whose length is a multiple of w."""
        kind, t = cls.stamps(index)
        if t.size == 0:
            raise DomainError(
                f"The 'frame' argument of {owner} must have at least one whole period of "
                f"w = {w} steps to be released into a store; it has no rows."
            )
        if t.size % w:
            raise DomainError(
                f"The 'frame' argument of {owner} must cover whole periods of w = {w} steps when "
                f"released into a store; its last period has {t.size % w} step(s). Release the "
                "partial period once it is complete."
            )
        steps = np.diff(t)
        if steps.size and (steps != steps[0]).any():
            raise DomainError(
                f"The 'frame' argument of {owner} must have regularly spaced time stamps to be "
                f"released into a store; {int((steps != steps[0]).sum())} gap(s) differ from "
                "the first step. Fill the missing stamps."
            )
        step = int(steps[0]) if steps.size else 1
        return cls(kind=kind, origin=int(t[0]), step=step, w=w)

    @classmethod
    def from_config(cls, cfg: dict) -> Grid:
        g = cfg["grid"]
        return cls(kind=g["kind"], origin=int(g["origin"]), step=int(g["step"]), w=int(cfg["w"]))

    def to_config(self) -> dict:
        return {"kind": self.kind, "origin": self.origin, "step": self.step}

    def same_spacing(self, other: Grid) -> bool:
        return self.kind == other.kind and self.step == other.step and self.w == other.w

    def ordinal(self, first: int, owner: str) -> int:
        """Ordinal of the period starting at stamp ``first`` (must lie on the grid)."""
        span = self.w * self.step
        off = first - self.origin
        if off % span:
            raise DomainError(
                f"The 'frame' argument of {owner} does not start on a period boundary of the "
                f"store (periods of {self.w} steps from the store's first period). Start the "
                "input at the first step of a period."
            )
        return off // span

    def start(self, ordinal: int) -> int:
        return self.origin + ordinal * self.w * self.step

    def label(self, ordinal: int) -> str:
        t = self.start(ordinal)
        return str(pd.Timestamp(t)) if self.kind == "datetime" else str(t)

    def index_of(self, ordinals, lengths) -> pd.Index:
        t = (
            np.concatenate(
                [
                    self.start(o) + self.step * np.arange(n, dtype=np.int64)
                    for o, n in zip(ordinals, lengths, strict=True)
                ]
            )
            if len(ordinals)
            else np.empty(0, dtype=np.int64)
        )
        if self.kind == "datetime":
            return pd.DatetimeIndex(t.astype("datetime64[ns]"))
        return pd.Index(t, dtype=np.int64)
