"""Choosing privacy parameters before touching data (not filled yet: see issue 3).

Will hold PAK's Eq. 16 objective minimised with scipy's TNC, the private time-lag heuristics of
[PAK19] §VI-B, and OptStream / ToPS settings, each with the error it predicts.
"""

__all__: list[str] = []
