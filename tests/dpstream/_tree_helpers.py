"""A synthetic feeder hierarchy shared by the engine and split-store tests."""

from __future__ import annotations


def feeder_tree(regions: int = 2, subs: int = 3, feeders: int = 12) -> dict:
    """``{parent: [children]}``: N -> regions r* -> substations r*s* -> feeders r*s*f*."""
    ch = {"N": [f"r{i}" for i in range(regions)]}
    for r in ch["N"]:
        ch[r] = [f"{r}s{i}" for i in range(subs)]
        for s in ch[r]:
            ch[s] = [f"{s}f{j}" for j in range(feeders)]
    return ch
