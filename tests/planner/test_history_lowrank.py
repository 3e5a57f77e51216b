"""The history block's fade from rank-r factors (``HISTORY_FADE = "lowrank"``, issue 22.1): each
node's shares of its roughness over the L history periods, (L, N), kept as (L, r) period
profiles and (r, N) node weights once the block is read, against the ``"periods"`` shares."""

from __future__ import annotations

import numpy as np
import pytest

import planner._stream_planner as sp
from dpstream.pipelines import _autoplan as ap
from mechanisms.optstream._sampling import sample_equal
from planner._roughness import RoughnessStats, period_roughness
from planner._stream_planner import LOOKBACK, Measurement, StreamPlanner
from postproc import Hierarchy
from postproc._prior import PriorState

W = 48
LEAVES = 12
N = LEAVES + 1  # the leaves and their total


@pytest.fixture(autouse=True)
def blocks(monkeypatch):
    monkeypatch.setattr(sp, "VARIOGRAM_WINDOW", "blocks")


def _cfg():
    h = Hierarchy(children={"T": [f"x{i}" for i in range(LEAVES)]})
    return ap._config(
        hierarchy=h, nodes=list(h.nodes), epsilon=1.0, alpha=5.0, w=W, delta=None,
        noise="laplace", target="all", level_shares=None, prior=False,
    )  # fmt: skip


def _history(rng, levels: np.ndarray) -> list[Measurement]:
    """Public history: one random walk per node, period q's scaled by sqrt(levels[q]) (N,):
    the variogram sums of node j in period q are levels[q, j] times its walk's, so each node's
    shares over the periods are its column of ``levels`` normalised."""
    walk = np.cumsum(rng.normal(0, 2.0, (N, W)), axis=1)
    return [
        Measurement(
            values=50 + np.sqrt(levels[q]).reshape(-1, 1) * walk,
            noise=np.zeros((N, W)),
            sampled=np.ones((N, W), bool),
        )
        for q in range(levels.shape[0])
    ]


def _released(rng, scale: float) -> Measurement:
    values = 50 + np.cumsum(rng.normal(0, scale, (N, W)), axis=1)
    sampled = np.zeros((N, W), dtype=bool)
    sampled[:, sample_equal(W, 6)] = True
    return Measurement(values=values, noise=np.full((N, W), 2.0), sampled=sampled)


def _levels(rng, rank: int) -> np.ndarray:
    """(L, N) positive levels of rank ``rank`` (a weekly pattern and random profiles, mixed
    per node)."""
    base = [np.where(np.arange(LOOKBACK) % 7 >= 5, 0.3, 1.0)]
    base += [rng.uniform(0.2, 1.0, LOOKBACK) for _ in range(rank - 1)]
    profiles = np.stack(base, axis=1)
    return profiles @ rng.uniform(0.5, 2.0, (rank, N))


def _close(a: RoughnessStats, b: RoughnessStats, rtol: float) -> bool:
    return all(
        np.allclose(x, y, rtol=rtol, atol=0)
        for x, y in ((a.squares, b.squares), (a.noise, b.noise), (a.counts, b.counts))
    )


def _planners(levels, fades, monkeypatch, rng, periods: int):
    """One streaming planner per (fade, rank) in ``fades`` after the same history, updated with
    the same released periods; yields (n, planners) after each (n = 0: the history only)."""
    history = _history(rng, levels)
    out = []
    for fade, rank in fades:
        monkeypatch.setattr(sp, "HISTORY_FADE", fade)
        monkeypatch.setattr(sp, "HISTORY_RANK", rank)
        p = StreamPlanner(_cfg(), prior_state=PriorState)
        p.add_history(history)
        out.append(p)
    yield 0, out
    for n in range(1, periods + 1):
        m = _released(rng, 0.5 + 0.1 * n)
        for p in out:
            p.update(m)
        yield n, out


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_lowrank_is_the_periods_fade_when_the_shares_have_rank_r(rank, monkeypatch):
    # each node's shares over the history periods mix `rank` profiles: the rank-r factors hold
    # them exactly, one rank less does not (the test can fail; but after whole weeks the
    # weekly profile's fade is the mean rate)
    rng = np.random.default_rng(20 + rank)
    fades = [("periods", 0), ("lowrank", rank), ("lowrank", rank - 1)]
    for n, (periods, lowrank, fewer) in _planners(
        _levels(rng, rank), fades, monkeypatch, rng, LOOKBACK
    ):
        assert _close(lowrank.roughness(), periods.roughness(), rtol=1e-12), n
        if 1 <= n < LOOKBACK and (n % 7 or rank > 1):
            assert not _close(fewer.roughness(), periods.roughness(), rtol=1e-4), n
    assert lowrank._moment_prev is None  # the block left the look-back: nothing kept


def test_weekends_and_holidays_common_to_the_nodes_need_few_ranks(monkeypatch):
    # the history month as the regional one: each node's days at its own level, weekends and
    # two holidays smoother for all, and ±3 % per node and day: rank 2 is within 0.5 % of
    # "periods" over ten released periods, the mean rate (rank 0) is off by 3.7 %
    rng = np.random.default_rng(31)
    day = np.where(np.arange(LOOKBACK) % 7 >= 5, 0.4, 1.0)
    day[[3, 17]] = 0.3
    levels = day[:, None] * rng.uniform(0.5, 2.0, N) * rng.uniform(0.97, 1.03, (LOOKBACK, N))
    fades = [("periods", 0), ("lowrank", 2), ("lowrank", 0)]
    worst = np.zeros(2)
    for _, (periods, lowrank, mean) in _planners(levels, fades, monkeypatch, rng, 10):
        want = periods.roughness().squares[:, 1:]  # (lag 0: none)
        for i, p in enumerate((lowrank, mean)):
            worst[i] = max(worst[i], np.abs(p.roughness().squares[:, 1:] / want - 1).max())
    assert worst[0] < 5e-3 and worst[1] > 3e-2, worst


def _moments(levels: np.ndarray, rank: int) -> sp._HistoryMoments:
    mo = sp._HistoryMoments.empty("lowrank", levels.shape[1], W)
    for i, row in enumerate(levels):
        r = RoughnessStats(
            squares=np.repeat(row[:, None], W, axis=1) / W,
            noise=np.zeros((levels.shape[1], W)),
            counts=np.ones(W),
        )
        mo = mo.add(r, i)
    return mo.complete(rank)


def _block(levels: np.ndarray) -> RoughnessStats:
    n = levels.shape[1]
    return RoughnessStats(
        squares=np.repeat(levels.sum(axis=0)[:, None], W, axis=1) / W,
        noise=np.zeros((n, W)),
        counts=np.full(W, float(LOOKBACK)),
    )


def test_the_fade_edge_cases():
    rng = np.random.default_rng(40)
    levels = rng.uniform(0.1, 3.0, (LOOKBACK, 6))  # rank 6: the factors at rank 2 approximate
    levels[:, 2] = 0.0  # a node without roughness in the history
    levels[:5, 4] = 50.0  # one whose roughness is all in its oldest periods (clipped)
    s0 = _block(levels)
    mo = _moments(levels, 2)
    assert mo.squares.shape == (2, 6) and mo.profiles.shape == (LOOKBACK, 2)
    # n = 0: the whole block; n = L: none of it
    np.testing.assert_allclose(mo.part(s0, 0).squares, s0.squares, rtol=1e-13, atol=0)
    assert np.array_equal(mo.part(s0, LOOKBACK).squares, np.zeros_like(s0.squares))
    for n in range(LOOKBACK + 1):
        part = mo.part(s0, n)
        assert np.isfinite(part.squares).all()
        assert (part.squares >= 0).all() and (part.squares <= s0.squares * (1 + 1e-13)).all()
        assert np.array_equal(part.squares[2], np.zeros(W))  # no roughness: none to fade
        np.testing.assert_allclose(part.counts, LOOKBACK - n, rtol=1e-14)  # counts: mean rate
    # the node whose roughness sat in its oldest periods leaves the window early
    assert mo.part(s0, 6).squares[4, 0] < 0.2 * s0.squares[4, 0]


def test_rank_zero_is_the_mean_rate():
    levels = np.random.default_rng(41).uniform(0.1, 3.0, (LOOKBACK, 5))
    s0, mo = _block(levels), _moments(levels, 0)
    for n in range(LOOKBACK + 1):
        want = s0.scaled((LOOKBACK - n) / LOOKBACK)
        assert np.array_equal(mo.part(s0, n).squares, want.squares)


@pytest.mark.parametrize("released", [0, 1, 5, LOOKBACK - 1, LOOKBACK])
def test_no_array_of_periods_by_nodes_at_rest(released, monkeypatch):
    # after add_history the planner holds (L, r) profiles and (r, N) weights, not the (L, N)
    # shares it read: its exported arrays, and the bytes, say so
    def planner(fade: str) -> StreamPlanner:
        monkeypatch.setattr(sp, "HISTORY_FADE", fade)
        rng = np.random.default_rng(42)
        p = StreamPlanner(_cfg(), prior_state=PriorState)
        p.add_history(_history(rng, rng.uniform(0.2, 3.0, (LOOKBACK + 2, N))))
        for _ in range(released):
            p.update(_released(rng, 1.0))
        return p

    monkeypatch.setattr(sp, "HISTORY_RANK", 3)
    p, q = planner("lowrank"), planner("mean")
    arrays, _ = p.export()
    assert all(a.shape[:2] != (LOOKBACK, N) for a in arrays.values())
    held = {k: a.shape for k, a in arrays.items() if k.startswith("moment")}
    key = "moment" if released == 0 else "moment_prev"
    want = {} if released == LOOKBACK else {
        f"{key}_squares": (3, N), f"{key}_profiles": (LOOKBACK, 3), f"{key}_counts": (0, W)
    }  # fmt: skip
    assert held == want
    extra = 0 if released == LOOKBACK else 3 * (N + LOOKBACK) * 8  # r (N + L) numbers
    assert p.nbytes - q.nbytes == extra


@pytest.mark.parametrize("released", [0, 1, 5, LOOKBACK - 1, LOOKBACK])
def test_export_and_restore_keep_the_factors(released, monkeypatch):
    monkeypatch.setattr(sp, "HISTORY_FADE", "lowrank")
    monkeypatch.setattr(sp, "HISTORY_RANK", 2)
    rng = np.random.default_rng(43)
    a = StreamPlanner(_cfg(), prior_state=PriorState)
    a.add_history(_history(rng, rng.uniform(0.2, 3.0, (LOOKBACK, N))))
    for _ in range(released):
        a.update(_released(rng, 1.0))
    b = StreamPlanner(_cfg(), prior_state=PriorState)
    b.restore(*a.export(), [])
    for _ in range(3):
        assert _close(b.roughness(), a.roughness(), rtol=0)
        m = _released(rng, 2.0)
        a.update(m)
        b.update(m)
    assert _close(b.roughness(), a.roughness(), rtol=0)


def test_a_periods_state_loads_and_fades_as_before_under_lowrank(monkeypatch):
    # a state saved with the (L, N) shares (session 12's default) keeps fading by them when
    # the code's fade is "lowrank": its saved basis decides
    monkeypatch.setattr(sp, "HISTORY_FADE", "periods")
    rng = np.random.default_rng(44)
    a = StreamPlanner(_cfg(), prior_state=PriorState)
    a.add_history(_history(rng, rng.uniform(0.2, 3.0, (LOOKBACK, N))))
    a.update(_released(rng, 1.0))
    arrays, scalars = a.export()
    assert arrays["moment_prev_squares"].shape == (LOOKBACK, N)
    monkeypatch.setattr(sp, "HISTORY_FADE", "lowrank")
    b = StreamPlanner(_cfg(), prior_state=PriorState)
    b.restore(arrays, scalars, [])
    for _ in range(4):
        m = _released(rng, 2.0)
        a.update(m)
        b.update(m)
        assert _close(b.roughness(), a.roughness(), rtol=0)


def test_the_factors_come_from_the_history_block_alone(monkeypatch):
    # the (L, N) shares exist only while add_history reads the block: a history of more than
    # L periods keeps its last L, factored; the released periods are not in them
    monkeypatch.setattr(sp, "HISTORY_FADE", "lowrank")
    monkeypatch.setattr(sp, "HISTORY_RANK", LOOKBACK)  # full rank: the periods' fade
    rng = np.random.default_rng(45)
    levels = rng.uniform(0.2, 3.0, (LOOKBACK + 3, N))
    history = _history(rng, levels)
    p = StreamPlanner(_cfg(), prior_state=PriorState)
    p.add_history(history)
    exact = StreamPlanner(_cfg())
    exact.add_history(history)
    for n in range(1, 6):
        m = _released(rng, 1.0)
        p.update(m)
        exact.update(m)
        assert _close(p.roughness(), exact.roughness(), rtol=1e-9), n
    # (the exact window's sums of the last L periods, the released ones included)
    want = sum(
        (period_roughness(x.values, x.noise, x.sampled).squares for x in exact.measurements[-5:]),
        start=np.zeros((N, W)),
    )
    assert np.all(p.roughness().squares >= want * (1 - 1e-12))
