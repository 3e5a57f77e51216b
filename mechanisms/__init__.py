"""The thin mechanism core of dpstream: noise, privacy units and budgets, and the mechanisms.

Imports numpy and scipy only; never a solver, never pandas-heavy logic (see DESIGN.md).

Indexing (one rule, ``docs/indexing.md``): a step index counts *input* steps from 0.
``range_sum(i, j)`` sums input steps i..j and ``to_frame()`` has one row per input step; the
first ``time_lag`` steps of PAK, ToPS and ToPL are withheld (NaN rows; a range starting there
is an error). ``range_sum`` returns a :class:`~mechanisms.core._results.RangeSum`: a float
with its noise ``std_error`` where it is known. Every release also has ``summary()``.

References used across the docstrings
-------------------------------------
[PAK19]  Perrier, Asghar, Kaafar. Private Continual Release of Real-Valued Data Streams.
         NDSS 2019.
[FV19]   Fioretto, Van Hentenryck. OptStream: Releasing Time Series Privately. JAIR 2019.
[ToPS21] Wang et al. Continuous Release of Data Streams under both Centralized and Local
         Differential Privacy. CCS 2021.
[NRS07]  Nissim, Raskhodnikova, Smith. Smooth Sensitivity and Sampling in Private Data
         Analysis. STOC 2007.
[CSS11]  Chan, Shi, Song. Private and Continual Release of Statistics. ACM TISSEC 2011.
[DNPR10] Dwork, Naor, Pitassi, Rothblum. Differential Privacy under Continual Observation.
         STOC 2010.
[HRMS10] Hay, Rastogi, Miklau, Suciu. Boosting the Accuracy of Differentially Private
         Histograms Through Consistency. VLDB 2010.
[CKS20]  Canonne, Kamath, Steinke. The Discrete Gaussian for Differential Privacy. NeurIPS 2020.
[SW20]   Li, Wang, Lopuhaä-Zwakenberg, Li, Škorić. Estimating Numerical Distributions under
         Local Differential Privacy. SIGMOD 2020 (Square Wave, EMS).
[HM19]   Wang, Xiao, Yang, Zhao, Hui, Shin, Shin, Yu. Collecting and Analyzing
         Multidimensional Data with Local Differential Privacy. ICDE 2019 (PM, HM).
"""

from .core import (
    BitSource,
    Budget,
    BudgetExceededError,
    BudgetLedger,
    Charge,
    DomainError,
    DPStreamError,
    EventLevel,
    GaussianNoise,
    LaplaceNoise,
    LocalDP,
    ParameterError,
    PrivacyGuarantee,
    PrivacyRecord,
    PrivacyUnit,
    RangeSum,
    SecureBits,
    SolverError,
    WAlphaIndistinguishability,
    WEvent,
    bit_source,
    compose_parallel,
    compose_sequential,
    compose_w_window,
    discrete_gaussian,
    discrete_laplace,
    lattice_granularity,
    snap_to_lattice,
    uniform_open,
)
from .counting import (
    COUNTERS,
    BinaryTreeCounter,
    CounterRelease,
    KaryTreeCounter,
    LaplaceRelease,
    SmoothBinaryCounter,
    StreamAnalysis,
    TreeRelease,
    best_counter,
    binary_tree_final_sums,
    binary_tree_noise,
    binary_tree_prefix_sums,
    binary_tree_release,
    counter_end_variance,
    counter_variance,
    dyadic_cover,
    kary_tree_release,
    laplace_prefix_sums,
    smooth_binary_release,
)
from .local import (
    HYBRID_SWITCH_EPSILON,
    DistributionFit,
    DuchiMechanism,
    HybridMechanism,
    PiecewiseMechanism,
    SquareWave,
    ToplRelease,
    ToplThresholdPlan,
    plan_topl_threshold,
    range_length_moments,
    square_wave_b,
    square_wave_distribution,
    topl_release,
)
from .optstream import (
    OPTSTREAM_SAMPLINGS,
    OptStreamEstimates,
    OptStreamSplit,
    feature_answers,
    feature_noise,
    optstream_estimates,
    optstream_split,
    perturb_noise,
)
from .pak import (
    NOISE_KINDS,
    EmpiricalQuantile,
    PakParameters,
    PakRelease,
    ThresholdAnalysis,
    ThresholdCalibration,
    ThresholdRelease,
    empirical_quantile,
    noise_quantile,
    pak_kappa,
    pak_release,
    pak_tau_max,
    pak_threshold,
    pak_threshold_calibration,
    quantile_rank,
    smooth_sensitivity_quantile,
    smoothing_parameters,
)
from .tops import (
    SMOOTHERS,
    THRESHOLD_METHODS,
    Smoother,
    TopsRelease,
    ToPSStream,
    TopsThresholdRelease,
    TopsUpdate,
    consistent_tree,
    smooth_blocks,
    tops_candidates,
    tops_kappa,
    tops_leaf_size,
    tops_levels,
    tops_noise,
    tops_perturb,
    tops_release,
    tops_scores,
    tops_threshold,
)
from .wevent import (
    WEventDFT,
    WEventLaplace,
    WEventPegasus,
    dft_coefficient_count,
)

# -- exports of the mechanism modules (one block per module, keep alphabetical) --

__all__ = [
    # _square_wave, _hybrid, _topl (ToPL, issue 6)
    "HYBRID_SWITCH_EPSILON",
    "DistributionFit",
    "DuchiMechanism",
    "HybridMechanism",
    "PiecewiseMechanism",
    "SquareWave",
    "ToplRelease",
    "ToplThresholdPlan",
    "plan_topl_threshold",
    "range_length_moments",
    "square_wave_b",
    "square_wave_distribution",
    "topl_release",
    # _tops, _tops_threshold, _tops_tree, _smoothers (ToPS, issue 6)
    "SMOOTHERS",
    "THRESHOLD_METHODS",
    "Smoother",
    "ToPSStream",
    "TopsRelease",
    "TopsThresholdRelease",
    "TopsUpdate",
    "consistent_tree",
    "smooth_blocks",
    "tops_candidates",
    "tops_kappa",
    "tops_leaf_size",
    "tops_levels",
    "tops_noise",
    "tops_perturb",
    "tops_release",
    "tops_scores",
    "tops_threshold",
    # _wevent_baselines
    "WEventDFT",
    "WEventLaplace",
    "WEventPegasus",
    "dft_coefficient_count",
    # _optstream, _sampling
    "OPTSTREAM_SAMPLINGS",
    "OptStreamEstimates",
    "OptStreamSplit",
    "feature_answers",
    "feature_noise",
    "optstream_estimates",
    "optstream_split",
    "perturb_noise",
    # _quantile, _threshold, _pak
    "NOISE_KINDS",
    "EmpiricalQuantile",
    "PakParameters",
    "PakRelease",
    "ThresholdAnalysis",
    "ThresholdCalibration",
    "ThresholdRelease",
    "empirical_quantile",
    "noise_quantile",
    "pak_kappa",
    "pak_release",
    "pak_tau_max",
    "pak_threshold",
    "pak_threshold_calibration",
    "quantile_rank",
    "smooth_sensitivity_quantile",
    "smoothing_parameters",
    # _tree, _baselines
    "BinaryTreeCounter",
    "SmoothBinaryCounter",
    "KaryTreeCounter",
    "kary_tree_release",
    "COUNTERS",
    "CounterRelease",
    "best_counter",
    "smooth_binary_release",
    "counter_end_variance",
    "counter_variance",
    "LaplaceRelease",
    "StreamAnalysis",
    "TreeRelease",
    "binary_tree_final_sums",
    "binary_tree_noise",
    "binary_tree_prefix_sums",
    "binary_tree_release",
    "dyadic_cover",
    "laplace_prefix_sums",
    "BitSource",
    "Budget",
    "BudgetExceededError",
    "BudgetLedger",
    "Charge",
    "DPStreamError",
    "DomainError",
    "EventLevel",
    "GaussianNoise",
    "LaplaceNoise",
    "LocalDP",
    "ParameterError",
    "PrivacyGuarantee",
    "PrivacyRecord",
    "PrivacyUnit",
    "RangeSum",
    "SecureBits",
    "SolverError",
    "WAlphaIndistinguishability",
    "WEvent",
    "bit_source",
    "compose_parallel",
    "compose_sequential",
    "compose_w_window",
    "discrete_gaussian",
    "discrete_laplace",
    "lattice_granularity",
    "snap_to_lattice",
    "uniform_open",
]
