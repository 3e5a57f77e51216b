"""Forecasting on released data (not filled yet: see issue 5).

Will hold ARMA rolling-origin evaluation with statsmodels ([FV19] §6.1.3).
"""

__all__: list[str] = []
