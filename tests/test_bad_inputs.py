"""Issue 11 §5: a table of bad inputs for every public entry point of ``mechanisms`` and
``planner``, generated systematically (each argument × the bad values of its kind).

Each case must raise a typed :class:`~mechanisms.DPStreamError` (never a raw ValueError,
TypeError, OverflowError or numpy warning), draw no bits (the bit source refuses any draw and any
spawn) and charge nothing to the ledger. ``python -m pytest tests/test_bad_inputs.py -q -s -k
count`` prints the number of cases per entry point.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "mechanisms"))
from _recording_bits import RecordingBits  # noqa: E402

import mechanisms as M  # noqa: E402
import planner as P  # noqa: E402
from mechanisms import Budget, BudgetLedger, DPStreamError  # noqa: E402

B = 10.0
nan, inf = math.nan, math.inf
_STREAM = [1.0, 2.0, 3.0, 4.0] * 250  # 1000 values in [0, B]


def _stream_bad(bound: float = B) -> list[tuple[str, object]]:
    ok = list(_STREAM)
    return [
        ("str", "1,2,3"),
        ("bytes", b"123"),
        ("dict", {"a": 1.0, "b": 2.0}),
        ("set", {1.0, 2.0}),
        ("None", None),
        ("scalar", 5.0),
        ("complex-list", [1j, 2.0 + 0j] * 500),
        ("complex-array", np.full(1000, 1.0 + 1.0j)),
        ("2-D", np.ones((500, 2))),
        ("empty", []),
        ("NaN", [*ok[:-1], nan]),
        ("inf", [*ok[:-1], inf]),
        ("-inf", [-inf, *ok[1:]]),
        ("negative", [-1.0, *ok[1:]]),
        ("above-bound", [*ok[:-1], bound * 2]),
        ("strings", ["1.0"] * 1000),
        ("mixed", [*ok[:-1], "a"]),
        ("ragged", [[1.0], [2.0, 3.0]]),
        ("Nones", [None] * 1000),
    ]


POS = [
    ("str", "1"),
    ("dict", {}),
    ("complex", 1j),
    ("NaN", nan),
    ("inf", inf),
    ("-inf", -inf),
    ("negative", -1.0),
    ("zero", 0.0),
    ("None", None),
    ("list", [1.0]),
    ("bool", True),
    ("array", np.array([1.0])),
    ("huge", 1e300),
    ("tiny", 1e-300),
]
PROB = [
    ("str", "0.1"),
    ("dict", {}),
    ("complex", 0.1j),
    ("NaN", nan),
    ("inf", inf),
    ("negative", -0.1),
    ("one", 1.0),
    ("above-one", 1.5),
    ("None", None),
    ("list", [0.1]),
    ("bool", True),
    ("array", np.array([0.1])),
]
FRAC = [*PROB, ("zero", 0.0)]  # open interval (0, 1)
INT = [
    ("str", "3"),
    ("float", 2.5),
    ("NaN", nan),
    ("complex", 3j),
    ("bool", True),
    ("None", None),
    ("negative", -1),
    ("zero", 0),
    ("huge", 10**30),
    ("list", [3]),
    ("dict", {}),
    ("np.float64", np.float64(3.0)),
]
CHOICE = [
    ("unknown", "cauchy"),
    ("empty", ""),
    ("int", 1),
    ("None", None),
    ("list", ["laplace"]),
    ("dict", {}),
    ("array", np.array(["laplace"])),
]
BOOL = [("int", 1), ("zero", 0), ("str", "yes"), ("None", None), ("float", 1.0), ("list", [True])]
SEED = [
    ("str", "x"),
    ("negative", -1),
    ("float", 1.5),
    ("list", [1, 2]),
    ("dict", {}),
    ("complex", 1j),
    ("bool", True),
    ("NaN", nan),
]
LEDGER = [
    ("dict", {"epsilon": 1.0}),
    ("float", 1.0),
    ("str", "budget.db"),
    ("Budget", Budget(1.0)),
    ("list", []),
]


def _only(values, *labels):
    return [v for v in values if v[0] in labels]


def _but(values, *labels):
    return [v for v in values if v[0] not in labels]


# entry point -> (function, valid keyword arguments, {argument: bad values}, draws noise)
def _counter(**kw):
    return M.BinaryTreeCounter(kw.pop("n"), **kw)


def _push(**kw):
    counter = M.BinaryTreeCounter(8, epsilon=1.0, bound=B, seed=kw["seed"])  # charged elsewhere
    counter.push(kw["x"])
    assert kw.get("ledger") is None or kw["ledger"].charges == ()


def _extend(**kw):  # noqa: ARG001 - the ledger is unused: the stream was charged when built
    s = M.ToPSStream(
        bound=B, epsilon_threshold=1.0, epsilon_perturb=1.0, time_lag=4, horizon=16, seed=7
    )
    s.extend([1.0] * 3)  # not yet at the threshold: nothing drawn
    s._bits = kw["seed"]  # any draw from here on is caught
    s.extend(kw["values"])


_BT = {"epsilon": 1.0, "bound": B}
_PAK = {"bound": B, "epsilon": 1.0, "delta": 1e-6, "time_lag": 500}
_TH = {"bound": B, "epsilon": 1.0, "delta": 1e-6, "lam": 0.9, "p": 0.05, "beta_lt": 0.01}
_TOPS = {"bound": B, "epsilon_threshold": 1.0, "epsilon_perturb": 1.0, "time_lag": 500}
_TTH = {"bound": B, "epsilon": 1.0, "horizon": 500, "epsilon_perturb": 1.0}
_STREAM_ARGS = {"values": _stream_bad(), "seed": SEED, "ledger": LEDGER}
_POS_BT = {"epsilon": POS, "bound": POS}

MECHANISMS = {
    "binary_tree_release": (
        M.binary_tree_release,
        {"values": _STREAM, **_BT},
        {**_STREAM_ARGS, **_POS_BT},
    ),
    "binary_tree_prefix_sums": (
        M.binary_tree_prefix_sums,
        {"values": _STREAM, **_BT},
        {**_STREAM_ARGS, **_POS_BT},
    ),
    "binary_tree_final_sums": (
        M.binary_tree_final_sums,
        {"values": _STREAM, **_BT, "repetitions": 3},
        {**_STREAM_ARGS, **_POS_BT, "repetitions": INT},
    ),
    "laplace_prefix_sums": (
        M.laplace_prefix_sums,
        {"values": _STREAM, **_BT},
        {**_STREAM_ARGS, **_POS_BT},
    ),
    "BinaryTreeCounter": (
        _counter,
        {"n": 16, **_BT},
        {"n": INT, **_POS_BT, "seed": SEED, "ledger": LEDGER},
    ),
    "BinaryTreeCounter.push": (
        _push,
        {"x": 1.0},
        {"x": _only(POS, "str", "dict", "complex", "NaN", "None", "list", "bool", "array")},
    ),
    "pak_release": (
        M.pak_release,
        {"values": _STREAM, **_PAK},
        {
            **_STREAM_ARGS,
            "bound": POS,
            "epsilon": POS,
            "delta": [*PROB, ("zero", 0.0)],
            "time_lag": [*INT, ("n", 1000)],
            "eps1_share": FRAC,
            "lam": _but(FRAC, "one"),
            "p": FRAC,
            "beta_lt": [*FRAC, ("above-half", 0.7)],
            "r": [*_but(POS, "huge"), ("below-one", 0.5)],
            "noise": CHOICE,
            "threshold": BOOL,
            "analysis": BOOL,
        },
    ),
    "pak_threshold": (
        M.pak_threshold,
        {"prefix": _STREAM, **_TH},
        {
            "prefix": _stream_bad(),
            "seed": SEED,
            "ledger": LEDGER,
            "bound": POS,
            "epsilon": POS,
            "delta": FRAC,
            "lam": _but(FRAC, "one"),
            "p": FRAC,
            "beta_lt": [*FRAC, ("above-half", 0.7)],
            "r": [*_but(POS, "huge"), ("below-one", 0.5)],
            "noise": CHOICE,
            "clip": BOOL,
            "analysis": BOOL,
            "beta_rt": [*_but(FRAC, "None"), ("without-analysis", 0.05)],
        },
    ),
    "tops_release": (
        M.tops_release,
        {"values": _STREAM, **_TOPS},
        {
            **_STREAM_ARGS,
            "bound": POS,
            "epsilon_threshold": POS,
            "epsilon_perturb": POS,
            "time_lag": [*INT, ("n", 1000)],
            "fanout": [*INT, ("one", 1)],
            "smoother": CHOICE,
            "leaf_size": _but(INT, "None"),
            "levels": _but(INT, "None"),
            "candidates": [
                ("zero", 0),
                ("negative", -3),
                ("str", "64"),
                ("dict", {}),
                ("unsorted", [5.0, 1.0]),
                ("above-bound", [1.0, 2 * B]),
                ("NaN", [1.0, nan]),
                ("empty", []),
                ("huge", 1 << 40),
            ],
            "c": _but(POS, "huge", "tiny"),
            "threshold_method": CHOICE,
            "smoothing": [*_but(FRAC, "one")],
        },
    ),
    "tops_threshold": (
        M.tops_threshold,
        {"prefix": _STREAM[:500], **_TTH},
        {
            "prefix": _stream_bad(),
            "seed": SEED,
            "ledger": LEDGER,
            "bound": POS,
            "epsilon": POS,
            "horizon": INT,
            "epsilon_perturb": _but(POS, "huge", "tiny"),
            "fanout": [*INT, ("one", 1)],
            "c": _but(POS, "huge", "tiny"),
            "candidates": [("zero", 0), ("str", "64"), ("unsorted", [5.0, 1.0]), ("NaN", [nan])],
            "method": CHOICE,
        },
    ),
    "tops_perturb": (
        M.tops_perturb,
        {"values": _STREAM, "threshold": 5.0, "bound": B, "epsilon": 1.0},
        {
            **_STREAM_ARGS,
            "threshold": [*_but(POS, "tiny"), ("above-bound", 2 * B)],
            "bound": POS,
            "epsilon": POS,
            "fanout": [*INT, ("one", 1)],
            "smoother": CHOICE,
        },
    ),
    "ToPSStream": (
        M.ToPSStream,
        {**_TOPS, "horizon": 500},
        {
            "seed": SEED,
            "ledger": LEDGER,
            "bound": POS,
            "epsilon_threshold": POS,
            "epsilon_perturb": POS,
            "time_lag": INT,
            "horizon": INT,
            "fanout": [*INT, ("one", 1)],
            "smoother": CHOICE,
            "threshold_method": CHOICE,
        },
    ),
    "ToPSStream.extend": (
        _extend,
        {"values": [1.0]},
        {"values": _but(_stream_bad(), "empty", "negative", "above-bound", "inf", "-inf")},
    ),
    "topl_release": (
        M.topl_release,
        {"values": _STREAM, "bound": B, "epsilon": 1.0, "time_lag": 500},
        {
            **_STREAM_ARGS,
            "bound": POS,
            "epsilon": [*POS, ("above-50", 51.0)],
            "time_lag": [*INT, ("n", 1000)],
            "bins": [*INT, ("one", 1), ("above-4096", 5000)],
            "smoothing": BOOL,
            "bias_weight": _but(POS, "huge", "tiny"),
        },
    ),
}

_PLAN_PAK = {
    "prefix": _STREAM[:500],
    "n": 5000,
    "bound": B,
    "epsilon": 1.0,
    "delta": 1e-6,
    "beta": 0.02,
}
_HISTORY = np.tile(np.linspace(1.0, 5.0, 48), 10)
PLANNER = {
    "plan_pak": (
        P.plan_pak,
        _PLAN_PAK,
        {
            "prefix": _stream_bad(),
            "n": [*INT, ("not-above-m", 500)],
            "bound": _but(POS, "huge", "tiny"),
            "epsilon": _but(POS, "huge", "tiny"),
            "delta": FRAC,
            "beta": [*FRAC, ("above-half", 0.7)],
            "p_max": FRAC,
            "noise": CHOICE,
            "method": CHOICE,
        },
    ),
    "time_lag_heuristic": (
        P.time_lag_heuristic,
        {"epsilon": 1.0, "delta": 1e-6, "beta": 0.02, "p_max": 0.005},
        {
            "epsilon": _but(POS, "huge", "tiny"),
            "delta": FRAC,
            "beta": FRAC,
            "p_max": FRAC,
            "noise": CHOICE,
        },
    ),
    "plan_tops": (
        P.plan_tops,
        {"prefix": _STREAM[:500], "bound": B, "horizon": 4096, "epsilon_perturb": 1.0},
        {
            "prefix": _stream_bad(),
            "bound": _but(POS, "huge", "tiny"),
            "horizon": INT,
            "epsilon_perturb": _but(POS, "huge", "tiny"),
            "fanout": [*INT, ("one", 1)],
            "leaf_size": _but(INT, "None"),
            "queries": INT,
        },
    ),
    "tops_range_error": (
        P.tops_range_error,
        {"threshold": 5.0, "prefix": _STREAM[:500], "horizon": 4096, "epsilon_perturb": 1.0},
        {
            "threshold": _but(POS, "huge", "tiny"),
            "prefix": _but(_stream_bad(), "above-bound", "negative"),
            "horizon": INT,
            "epsilon_perturb": _but(POS, "huge", "tiny"),
            "fanout": [*INT, ("one", 1)],
            "queries": INT,
        },
    ),
    "plan_optstream": (
        P.plan_optstream,
        {"history": _HISTORY, "epsilon": 1.0, "alpha": 1.0, "w": 48},
        {
            "history": [
                *_but(_stream_bad(), "above-bound", "negative", "2-D"),
                ("too-short", [1.0] * 10),
            ],
            "epsilon": _but(POS, "huge", "tiny"),
            "alpha": _but(POS, "huge", "tiny"),
            "w": [*INT, ("one", 1)],
            "n_levels": INT,
            "candidates": [
                ("zero", [0]),
                ("above-w", [49]),
                ("str", "k"),
                ("empty", []),
                ("float", [2.5]),
            ],
        },
    ),
    "bt_error": (
        P.bt_error,
        {"n": 1000, "bound": B, "epsilon": 1.0, "beta": 0.02},
        {
            "n": INT,
            "bound": _but(POS, "huge", "tiny"),
            "epsilon": _but(POS, "huge", "tiny"),
            "beta": FRAC,
        },
    ),
}


def _cases(table, draws):
    for entry, (_fn, _valid, bad) in table.items():
        for arg, values in bad.items():
            for label, value in values:
                yield pytest.param(table, entry, arg, value, draws, id=f"{entry}-{arg}-{label}")


def _table_counts() -> Counter:
    counts: Counter = Counter()
    for table in (MECHANISMS, PLANNER):
        for entry, (_fn, _valid, bad) in table.items():
            counts[entry] += sum(len(v) for v in bad.values())
    return counts


@pytest.mark.parametrize(
    ("table", "entry", "arg", "value", "draws"),
    [*_cases(MECHANISMS, True), *_cases(PLANNER, False)],
)
def test_bad_input_is_a_typed_error_with_no_draw_and_no_charge(table, entry, arg, value, draws):
    fn, valid, _bad = table[entry]
    kwargs = dict(valid)
    ledger = BudgetLedger(Budget(100.0, 0.5))
    if draws:
        kwargs["seed"] = RecordingBits(refuse=True, spawn=False)
        kwargs["ledger"] = ledger
    kwargs[arg] = value
    with pytest.raises(DPStreamError):
        fn(**kwargs)
    assert ledger.charges == ()


@pytest.mark.parametrize("entry", sorted(MECHANISMS))
def test_the_valid_base_call_of_each_mechanism_runs(entry):
    """Guard for the table: each case differs from a call that works in one argument only."""
    fn, valid, _bad = MECHANISMS[entry]
    fn(**dict(valid, seed=RecordingBits(1)) if "seed" not in valid else valid)


@pytest.mark.parametrize("entry", sorted(PLANNER))
def test_the_valid_base_call_of_each_planner_entry_runs(entry):
    fn, valid, _bad = PLANNER[entry]
    fn(**valid)


def test_count_of_bad_inputs_per_entry_point():
    counts = _table_counts()
    for entry, count in sorted(counts.items()):
        print(f"{entry:28s} {count:4d}")
    print(f"{'total':28s} {sum(counts.values()):4d}")
    small = {"BinaryTreeCounter.push", "ToPSStream.extend"}  # one argument each
    assert all(c >= 30 for e, c in counts.items() if e not in small), counts
