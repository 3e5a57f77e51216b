"""Tables I–II, Fig. 7 sweeps and predicted-vs-realised error (Figs. 8–11)."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms import ParameterError
from planner import (
    pak_table,
    plot_predicted_vs_realised,
    plot_sweeps,
    predicted_vs_realised,
    sweep_epsilon,
    sweep_time_lag,
)

N_TRIPS = 25_000_000
BOUND = 1440.0
COLUMNS = ["m", "IF", "r", "λ", "p", "ε₁/ε", "β_qt/β", "β_lt/β", "β_lap/β", "β_out/β", "β_rt/β"]


def test_table_has_the_columns_of_table_i(trips):
    table = pak_table(trips, [10_000, 50_000], n=N_TRIPS, bound=BOUND, counter=None)
    assert list(table.columns) == COLUMNS
    assert table["IF"].tolist()[0] == 1.0 and table["IF"].tolist()[1] > 1.0
    shares = table[[c for c in COLUMNS if c.startswith("β")]].sum(axis=1)
    assert np.allclose(shares, 1.0)


def test_table_refuses_time_lags_beyond_the_prefix(trips):
    with pytest.raises(ParameterError, match="time_lags"):
        pak_table(trips[:1_000], [2_000], n=N_TRIPS, bound=BOUND)


def test_sweeps_and_plot(trips, tmp_path):
    # Fig. 7 with the paper's protocol (tree bound)
    eps = sweep_epsilon(trips, [0.5, 2.0], time_lag=50_000, n=N_TRIPS, bound=BOUND, counter=None)
    lags = sweep_time_lag(trips, [10_000, 50_000], n=N_TRIPS, bound=BOUND, counter=None)
    assert eps["epsilon"].tolist() == [0.5, 2.0] and (eps["IF"] >= 1.0).all()
    assert lags["IF"].is_monotonic_increasing
    out = tmp_path / "fig7.png"
    plot_sweeps(eps, lags, str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_predicted_vs_realised_on_a_light_tailed_stream(tmp_path):
    # n = 400,000 exponential-tailed values: the bound of Eq. 16 must cover the realised
    # (1 − β)-quantile, and the realised outlier error stays near/below its estimate (Fig. 11).
    rng = np.random.default_rng(7)
    stream = np.minimum(rng.gamma(2.0, 15.0, size=400_000), BOUND)
    res = predicted_vs_realised(
        stream, bound=BOUND, epsilon=1.0, delta=2.0**-20, beta=0.02, time_lag=100_000,
        runs=200,
    )  # fmt: skip
    assert res.plan.use_threshold
    assert res.coverage >= 0.98 and res.realised_error_bound <= res.plan.error_bound
    assert res.realised_baseline_error_bound <= res.plan.baseline_error_bound
    assert res.realised_improvement > 1.5
    assert res.outlier_ratio.median() <= 1.0
    plot_predicted_vs_realised(res, str(tmp_path / "fig9.png"))
    assert (tmp_path / "fig9.png").stat().st_size > 0


@pytest.mark.slow
def test_predicted_vs_realised_on_the_bundled_retail_stream():
    from dpstream.datasets import RETAIL_BOUND, retail_stream

    stream = retail_stream(clip_to=RETAIL_BOUND)
    res = predicted_vs_realised(
        stream, bound=RETAIL_BOUND, epsilon=4.0, delta=2.0**-20, beta=0.02, time_lag=30_000,
        runs=200,
    )  # fmt: skip
    assert res.coverage >= 0.98
    assert res.realised_baseline_error_bound <= res.plan.baseline_error_bound


def test_predicted_vs_realised_old_alpha_names_warn():
    # issue 12: the realised bounds are `realised_error_bound` / `realised_baseline_error_bound`
    stream = np.minimum(np.random.default_rng(3).gamma(2.0, 15.0, size=20_000), BOUND)
    res = predicted_vs_realised(
        stream, bound=BOUND, epsilon=1.0, delta=2.0**-20, beta=0.02, time_lag=5_000, runs=3,
        seed=1,
    )  # fmt: skip
    with pytest.warns(DeprecationWarning, match="'realised_error_bound'"):
        assert res.realised_alpha == res.realised_error_bound
    with pytest.warns(DeprecationWarning, match="'realised_baseline_error_bound'"):
        assert res.realised_bt_alpha == res.realised_baseline_error_bound
    summary = res.summary()
    assert summary["predicted_error_bound"] == res.plan.error_bound
    assert not any("alpha" in key for key in summary)
