"""Choosing privacy parameters and predicting the error they give (issue 3).

PAK ([PAK19] §V–VI): the error bound of Eq. 16 minimised with scipy's TNC over Mechanism 1's
local parameters (:func:`plan_pak`, an analysis tool: it reads the data), and the private
choice of the time lag from public inputs only (:func:`time_lag_heuristic`, §VI-B) and of
the local parameters r, λ, p, ε₁/ε from public inputs only (:func:`pak_defaults`, Eq. 16 on a
public model prefix).

OptStream ([FV19] §4, §6): the number of samples k predicted from history
(:func:`plan_optstream`). ToPS ([ToPS21]): the predicted range-query error of a threshold and
the leaf size (:func:`tops_range_error`, :func:`plan_tops`).

Inverse planning (issue 23): the ε that meets an error target, per level, from each planner's
forward prediction (:func:`plan_epsilon` over :func:`optstream_forward`, :func:`pak_forward`,
:func:`tops_forward`); PAK by predicted mean square error under every counter
(:func:`plan_pak_mse`).

References: see :mod:`mechanisms` ([PAK19], [NRS07], [CSS11]).
"""

from ._inverse import (
    EpsilonPlan,
    epsilon_curve,
    level_names,
    optstream_forward,
    pak_forward,
    plan_epsilon,
    solve_epsilon,
    tops_forward,
)
from ._objective import BETA_KEYS, ErrorTerms, PakObjective, bt_error
from ._optstream_plan import OptStreamPlan, plan_optstream
from ._pak_defaults import (
    OBJECTIVES,
    PAPER_DEFAULTS,
    R_GRID,
    SHARE_GRID,
    PakDefaults,
    model_prefix,
    pak_defaults,
    pak_mean_square_error,
)
from ._pak_mse import PakMsePlan, empirical_loss, pak_rmse_quantile, plan_pak_mse
from ._pak_plan import METHODS, PakPlan, plan_pak, solve_pak
from ._roughness import RoughnessStats, kriging_bias, period_roughness, variogram
from ._stream_plan import PeriodPlan, plan_period, rule_k, share_grid, window_budget
from ._sweeps import (
    PredictedVsRealised,
    pak_table,
    plot_predicted_vs_realised,
    plot_sweeps,
    predicted_vs_realised,
    sweep_epsilon,
    sweep_time_lag,
)
from ._time_lag import (
    TimeLag,
    max_quantile_count,
    quantile_failure_probability,
    time_lag_heuristic,
)
from ._tops_plan import (
    TopsError,
    TopsPlan,
    TopsRuleDraws,
    TopsShapePlan,
    plan_tops,
    plan_tops_shape,
    tops_range_error,
)

__all__ = [
    # _stream_plan, _roughness (in-stream planning from released periods, issue 13)
    "PeriodPlan",
    "RoughnessStats",
    "kriging_bias",
    "period_roughness",
    "plan_period",
    "rule_k",
    "share_grid",
    "variogram",
    "window_budget",
    # _optstream_plan (OptStream k from history)
    "OptStreamPlan",
    "plan_optstream",
    # _tops_plan (ToPS, issue 6)
    "TopsError",
    "TopsShapePlan",
    "TopsPlan",
    "TopsRuleDraws",
    "plan_tops",
    "plan_tops_shape",
    "tops_range_error",
    # _pak_defaults (Mechanism 1's local parameters from public inputs, issue 14)
    "OBJECTIVES",
    "R_GRID",
    "SHARE_GRID",
    "PAPER_DEFAULTS",
    "PakDefaults",
    "model_prefix",
    "pak_defaults",
    "pak_mean_square_error",
    "BETA_KEYS",
    "METHODS",
    "ErrorTerms",
    "PakObjective",
    "PakPlan",
    "PredictedVsRealised",
    "TimeLag",
    "bt_error",
    "max_quantile_count",
    "pak_table",
    "plan_pak",
    "plot_predicted_vs_realised",
    "plot_sweeps",
    "predicted_vs_realised",
    "quantile_failure_probability",
    "solve_pak",
    "sweep_epsilon",
    "sweep_time_lag",
    "time_lag_heuristic",
    # _pak_mse, _inverse (issue 23: mean-square PAK plan, inverse planning)
    "EpsilonPlan",
    "PakMsePlan",
    "empirical_loss",
    "epsilon_curve",
    "level_names",
    "optstream_forward",
    "pak_forward",
    "plan_epsilon",
    "pak_rmse_quantile",
    "plan_pak_mse",
    "solve_epsilon",
    "tops_forward",
]
