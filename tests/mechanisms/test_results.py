"""One shape for every release (issue 12): RangeSum, input-step indexing, to_frame, summary."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pandas as pd
import pytest

from mechanisms import (
    ParameterError,
    binary_tree_release,
    dyadic_cover,
    laplace_prefix_sums,
    pak_release,
    topl_release,
    tops_release,
)
from mechanisms.core._results import RangeSum, check_range, step_frame, summary_text
from mechanisms.counting import tree_range_variance

B = 10.0


def _stream(n=3000, seed=0):
    return np.random.default_rng(seed).exponential(1.0, n).clip(0, B)


# -- RangeSum ------------------------------------------------------------------------------------


def test_range_sum_is_a_float_with_its_standard_error():
    s = RangeSum(10.0, 2.0)
    assert s == 10.0 and s - 4.0 == 6.0 and isinstance(s, float)
    assert (s.estimate, s.std_error, s.variance) == (10.0, 2.0, 4.0)
    assert math.isnan(RangeSum(1.0).std_error)
    assert repr(s) == "RangeSum(estimate=10.0, std_error=2.0)"
    assert pickle.loads(pickle.dumps(s)).std_error == 2.0
    with pytest.raises(AttributeError):
        s.std_error = 3.0


# -- exact standard errors -----------------------------------------------------------------------


def test_tree_range_variance_counts_the_nodes_left_after_cancelling():
    # brute force: the covers of c(σ, i) and c(σ, j + 1) as sets; shared nodes cancel
    n = 70
    for i in range(n):
        for j in range(i, n):
            before = set(dyadic_cover(i, n)) if i else set()
            after = set(dyadic_cover(j + 1, n))
            assert tree_range_variance(i, j, 1.0) == len(before ^ after), (i, j)
    assert tree_range_variance(0, 6, 2.5) == 3 * 2.5  # [1..4], [5..6], [7..7]


def test_tree_std_error_matches_the_spread_over_seeds():
    x = _stream(64)
    i, j = 5, 40
    draws = np.array(
        [binary_tree_release(x, epsilon=1.0, bound=B, seed=s).range_sum(i, j) for s in range(3000)]
    )
    se = binary_tree_release(x, epsilon=1.0, bound=B, seed=0).range_sum(i, j).std_error
    assert draws.std() == pytest.approx(se, rel=0.06)
    # power: the prefix sum's error (no cancelling) would be clearly off
    wrong = math.sqrt(binary_tree_release(x, epsilon=1.0, bound=B, seed=0).variance[j])
    assert abs(draws.std() / wrong - 1.0) > 0.15


def test_std_errors_of_laplace_pak_and_topl():
    x = _stream()
    lap = laplace_prefix_sums(x, epsilon=1.0, bound=B, seed=1)
    assert lap.range_sum(3, 12).std_error == pytest.approx(math.sqrt(10 * lap.noise.variance))
    pak = pak_release(
        x, bound=B, epsilon=1.0, delta=1e-6, time_lag=1000, seed=2, counter="binary_tree"
    )
    assert pak.range_sum(1000, 1000).std_error == pytest.approx(
        math.sqrt(pak.tree.noise.variance)
    )
    topl = topl_release(x, bound=B, epsilon=1.0, time_lag=1000, seed=3)
    assert topl.range_sum(1500, 1509).std_error == pytest.approx(math.sqrt(10 * topl.variance))
    tops = tops_release(x, bound=B, epsilon_threshold=1.0, epsilon_perturb=1.0, time_lag=1000)
    assert math.isnan(tops.range_sum(1000, 1999).std_error)  # not known in closed form


# -- one indexing rule ---------------------------------------------------------------------------


def test_every_lagged_release_indexes_input_steps():
    x = _stream()
    m = 1000
    kw = {"bound": B, "time_lag": m, "seed": 4}
    releases = {
        "pak": pak_release(x, epsilon=1.0, delta=1e-6, **kw),
        "tops": tops_release(x, epsilon_threshold=1.0, epsilon_perturb=1.0, **kw),
        "topl": topl_release(x, epsilon=1.0, **kw),
    }
    for name, rel in releases.items():
        frame = rel.to_frame()
        assert len(frame) == x.size and frame.index.name == "step", name
        assert frame["value"].iloc[:m].isna().all() and frame["value"].iloc[m:].notna().all()
        # range_sum(i, j) over input steps is the sum of the frame's rows i..j
        for i, j in [(m, m), (m, 2999), (1234, 2345)]:
            assert rel.range_sum(i, j) == pytest.approx(
                frame["value"].iloc[i : j + 1].sum(), rel=1e-9, abs=1e-6
            ), name
        with pytest.raises(ParameterError, match=f"first {m} steps are withheld"):
            rel.range_sum(m - 1, m + 5)


def test_to_frame_is_time_indexed_like_the_input():
    x = _stream(500)
    stamps = pd.date_range("2024-01-01", periods=500, freq="min")
    rel = tops_release(x, bound=B, epsilon_threshold=1.0, epsilon_perturb=1.0, time_lag=100)
    frame = rel.to_frame(index=stamps)
    assert frame.index.equals(stamps) and frame["value"].iloc[100:].notna().all()
    bt = binary_tree_release(x, epsilon=1.0, bound=B, seed=1).to_frame(index=stamps)
    np.testing.assert_allclose(bt["value"].cumsum(), bt["prefix_sum"], rtol=1e-9, atol=1e-6)
    with pytest.raises(ParameterError, match="one label per input step"):
        rel.to_frame(index=stamps[:10])


def test_pak_frame_holds_the_released_prefix_sums_from_the_lag():
    x = _stream()
    rel = pak_release(x, bound=B, epsilon=1.0, delta=1e-6, time_lag=1000, seed=5)
    frame = rel.to_frame()
    np.testing.assert_array_equal(frame["prefix_sum"], rel.prefix_sums)
    assert frame["prefix_sum"].iloc[999] == rel.prefix_sums[999]  # c(σ, m) is released
    assert math.isnan(frame["value"].iloc[999])
    assert frame["std_error"].iloc[-1] == pytest.approx(math.sqrt(rel.variance[-1]))


def test_check_range_messages():
    assert check_range(3, 5, first=0, stop=10, owner="f") == (3, 5)
    with pytest.raises(ParameterError, match=r"'j' parameter of f must be an int in \[5, 9\]"):
        check_range(5, 4, first=2, stop=10, owner="f")
    with pytest.raises(ParameterError, match="must be an int. Got True"):
        check_range(True, 4, first=0, stop=10, owner="f")
    frame = step_frame({"a": np.ones(3)}, n=5, time_lag=2, index=None, owner="f")
    assert frame["a"].isna().tolist() == [True, True, False, False, False]


# -- summary -------------------------------------------------------------------------------------


class _Privacy:
    def describe(self) -> str:
        return "binary-tree: any single value is hidden; privacy loss ε = 1."


class _WithPrivacy:
    privacy = _Privacy()
    guarantee = "should not be shown when a privacy record exists"


def test_summary_text_prefers_the_privacy_record_and_marks_plans():
    text = summary_text("T", [("steps n", 1000), ("epsilon", 0.5), ("seeded", True)],
                        result=_WithPrivacy())  # fmt: skip
    assert "privacy: binary-tree" in text and "should not be shown" not in text
    assert "1,000" in text and "yes" in text
    plan = type("P", (), {"private": False, "note": "reads the prefix"})()
    assert "not a private release: reads the prefix" in summary_text("P", [], result=plan)


def test_every_release_summary_is_a_short_table_without_data_values():
    x = _stream()
    kw = {"bound": B, "time_lag": 1000, "seed": 6}
    for rel in (
        pak_release(x, epsilon=1.0, delta=1e-6, **kw),
        tops_release(x, epsilon_threshold=1.0, epsilon_perturb=1.0, **kw),
        topl_release(x, epsilon=1.0, **kw),
        binary_tree_release(x, epsilon=1.0, bound=B, seed=1),
        laplace_prefix_sums(x, epsilon=1.0, bound=B, seed=1),
    ):
        text = rel.summary()
        lines = text.splitlines()
        assert 8 <= len(lines) <= 30 and max(map(len, lines)) <= 64, type(rel).__name__
        assert "privacy:" in text
        assert f"{x.sum():.6g}" not in text  # the true total is never shown


def test_frames_carry_a_privacy_record_when_the_result_has_one():
    class _Record:
        def to_dict(self):
            return {"unit": "event", "epsilon": 1.0}

    class _Result:
        privacy = _Record()

    frame = step_frame({"a": np.ones(3)}, n=3, time_lag=0, index=None, owner="f", result=_Result())
    assert frame.attrs["privacy"] == {"unit": "event", "epsilon": 1.0}
    assert "privacy" not in step_frame({"a": np.ones(3)}, n=3, time_lag=0, index=None,
                                       owner="f").attrs  # fmt: skip
