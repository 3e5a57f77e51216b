"""End-to-end audits of PAK Mechanism 1 (``mechanisms.pak_release``, (ε, δ)-DP event-level).

Every sample is one full ``pak_release`` run. Its only deterministic expensive step, the
threshold calibration of the prefix (sorting, smooth sensitivity, scipy quantiles), is memoised
for the duration of a run of samples (``_cached_calibration``): a pure function of the prefix,
so the mechanism's behaviour is unchanged (``test_calibration_cache_is_transparent`` checks
identical outputs for equal seeds); the threshold draw, the prefix Laplace sum and the BT
still run per sample.

Set-up: PAK's regime, τ ≪ B. m = 8000 prefix values spread over [0, B/10] (x̂_λp ≈ 0.095,
SS ≈ 3e-4, so τ ≈ 0.105 and B/τ ≈ 9.5), then a suffix of 8 steps (a BT of L = 4 levels);
B = 1, ε = 1 (ε₁ = ε₂ = 0.5), δ = 1e-6, λp = 0.05, β_lt = 0.05, r = 1.

Neighbours and statistics (each neighbour changes one step of D):

* early (in the prefix), above the threshold: σ(1) from 0.05 to B. Statistic: the
  log-likelihood ratio of the released c(σ, m) given the released τ (Laplace of scale τ/ε₂
  around Σ min(σ(j), τ) on D or D'). Clipping to τ keeps the shift ≤ τ: loss ≤ ε₂.
* late (in the suffix), above the threshold: σ(i) from 0 to B for i = m + 1 and i = n. Clipped
  to τ it moves the L nodes containing i by τ each. Statistic: the LLR of those noisy BT nodes
  given τ (``rel.tree.nodes``, scale ``rel.tree.scale``). Loss ε.

Under-noised variants (monkeypatched, the rest of the mechanism unchanged):

* the prefix sum not clipped to τ (clipped to B instead): shift ≈ 0.95 against noise of scale
  τ/ε₂ ≈ 0.21, loss ≈ 4.5: FAILS;
* the suffix BT with its noise scale halved (ε × 2 passed to the BT): loss 2ε: FAILS (slow
  tier; the fast tier uses ε × 3, loss 3ε, for power at its smaller N).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from _audit import audit_samples

from mechanisms import bit_source, pak_release
from mechanisms.pak import _mechanism1 as _pak

EPSILON, DELTA, BOUND = 1.0, 1e-6, 1.0
M, SUFFIX = 8000, 8
N = M + SUFFIX
PARAMS = {
    "bound": BOUND,
    "epsilon": EPSILON,
    "delta": DELTA,
    "time_lag": M,
    "lam": 0.5,
    "p": 0.1,
    "beta_lt": 0.05,
    "r": 1.0,
    "eps1_share": 0.5,
    "counter": "binary_tree",  # the paper's protocol: the statistics read the BT's nodes
}
EPS2 = EPSILON * (1 - PARAMS["eps1_share"])
LATE = (M + 1, N)


def base_stream() -> np.ndarray:
    """D: prefix spread over [0, B/10] (σ(1) = 0.05), suffix values on a 1/64 grid, 0 at LATE."""
    rng = np.random.default_rng(2019)
    x = np.concatenate([rng.uniform(0.0, 0.1, M), rng.integers(0, 7, SUFFIX) / 64.0])
    x[0] = 0.05
    x[[i - 1 for i in LATE]] = 0.0
    return x


def neighbour(i: int) -> np.ndarray:
    """D': D with σ(i) = B (above the threshold)."""
    x = base_stream()
    x[i - 1] = BOUND
    return x


# -- running the mechanism ---------------------------------------------------------------------


@contextlib.contextmanager
def _cached_calibration():
    """Memoise ``pak_threshold_calibration`` (a pure function) inside ``_pak``."""
    original = _pak.pak_threshold_calibration
    cache: dict = {}

    def cached(prefix, **kwargs):
        key = (np.asarray(prefix, dtype=np.float64).tobytes(), tuple(sorted(kwargs.items())))
        if key not in cache:
            cache[key] = original(prefix, **kwargs)
        return cache[key]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_pak, "pak_threshold_calibration", cached)
        yield


def _unclipped_prefix_sum(values, tau, noise):
    """Variant: the prefix sum clipped to B instead of τ (noise still scaled to τ)."""
    gamma = noise.granularity
    return float(np.rint(np.asarray(values) / gamma).sum()) * gamma


def _tree_with_epsilon_factor(factor: float):
    original = _pak._tree_release

    def tree(values, *, epsilon, bound, bits, owner="binary_tree_release"):
        return original(values, epsilon=epsilon * factor, bound=bound, bits=bits, owner=owner)

    return tree


def containing_nodes(j: int, n: int) -> list[tuple[int, int]]:
    """(level, index) of the complete BT nodes that contain suffix step j (1-based)."""
    return [(h, (j - 1) >> h) for h in range(n.bit_length()) if (j - 1) >> h < n >> h]


def run_pak(values: np.ndarray, runs: int, seed: int, *, variant: str = "") -> dict:
    """``runs`` releases of ``values``: τ, c(σ, m) and the BT nodes containing LATE steps."""
    bits = bit_source(np.random.SeedSequence([seed, int(values.sum() * 64)]))
    nodes = sorted({node for i in LATE for node in containing_nodes(i - M, SUFFIX)})
    out = {"tau": np.empty(runs), "c_m": np.empty(runs), "scale": np.empty(runs)}
    out["nodes"] = np.empty((runs, len(nodes)))
    with contextlib.ExitStack() as stack:
        stack.enter_context(_cached_calibration())
        mp = stack.enter_context(pytest.MonkeyPatch.context())
        if variant == "unclipped-prefix":
            mp.setattr(_pak, "_clipped_lattice_sum", _unclipped_prefix_sum)
        elif variant.startswith("tree-eps-x"):
            mp.setattr(_pak, "_tree_release", _tree_with_epsilon_factor(float(variant[10:])))
        for r in range(runs):
            rel = pak_release(values, seed=bits, **PARAMS)
            out["tau"][r] = rel.threshold
            out["c_m"][r] = rel.prefix_sums[M - 1]
            out["scale"][r] = rel.tree.scale
            out["nodes"][r] = [rel.tree.nodes[h][k] for h, k in nodes]
    out["node_index"] = nodes
    return out


# -- statistics ------------------------------------------------------------------------------


def prefix_llr(sample: dict, d: np.ndarray, d_prime: np.ndarray) -> np.ndarray:
    """LLR of c(σ, m) given τ: Laplace(τ/ε₂) around the clipped sums of D and D'."""
    tau = sample["tau"][:, None]
    a = np.minimum(d[:M], tau).sum(axis=1)
    a_prime = np.minimum(d_prime[:M], tau).sum(axis=1)
    c = sample["c_m"]
    return (np.abs(c - a_prime) - np.abs(c - a)) / (sample["tau"] / EPS2)


def suffix_llr(sample: dict, i: int, d: np.ndarray) -> np.ndarray:
    """LLR of the noisy BT nodes containing step i given τ (D: σ(i) = 0, D': σ(i) = B)."""
    j = i - M
    tau = sample["tau"]
    clipped = np.minimum(d[M:][None, :], tau[:, None])
    total = np.zeros(tau.size)
    for h, k in containing_nodes(j, SUFFIX):
        a = clipped[:, k << h : (k + 1) << h].sum(axis=1)
        y = sample["nodes"][:, sample["node_index"].index((h, k))]
        total += np.abs(y - (a + tau)) - np.abs(y - a)
    return total / sample["scale"]


# -- exact checks ----------------------------------------------------------------------------


def test_calibration_cache_is_transparent():
    x = base_stream()
    plain = [pak_release(x, seed=9, **PARAMS) for _ in range(2)]
    with _cached_calibration():
        cached = [pak_release(x, seed=9, **PARAMS) for _ in range(2)]
    for a, b in zip(plain, cached, strict=True):
        assert a.threshold == b.threshold
        np.testing.assert_array_equal(a.prefix_sums, b.prefix_sums)


def test_setup_is_in_the_thresholded_regime():
    rel = pak_release(base_stream(), seed=1, **PARAMS)
    assert 0.09 < rel.threshold < 0.2  # τ ≪ B: clipping matters
    assert rel.tree.levels == 4
    assert containing_nodes(1, 8) == [(0, 0), (1, 0), (2, 0), (3, 0)]


def test_llr_statistics_separate_the_neighbours_without_noise():
    d = base_stream()
    tau = 0.1
    for i in LATE:
        exact = {"tau": np.array([tau, tau]), "scale": np.array([1.0, 1.0])}
        nodes = sorted({node for k in LATE for node in containing_nodes(k - M, SUFFIX)})
        rows = []
        for s in (d, neighbour(i)):
            c = np.minimum(s[M:], tau)
            rows.append([c[k << h : (k + 1) << h].sum() for h, k in nodes])
        exact["nodes"], exact["node_index"] = np.array(rows), nodes
        assert suffix_llr(exact, i, d) == pytest.approx([4 * tau, -4 * tau])
    d1 = neighbour(1)
    exact = {"tau": np.array([tau, tau])}
    exact["c_m"] = np.array([np.minimum(s[:M], tau).sum() for s in (d, d1)])
    assert prefix_llr(exact, d, d1) == pytest.approx([0.05 * EPS2 / tau, -0.05 * EPS2 / tau])


# -- fast tier --------------------------------------------------------------------------------

N_FAST = 4000
N_SLOW = 40_000


@pytest.fixture(scope="module")
def real_draws() -> dict:
    """Real mechanism on D and on the three neighbours (D shared by the audits)."""
    return {key: run_pak(data, N_FAST, seed=1) for key, data in _datasets().items()}


def _datasets() -> dict:
    return {"D": base_stream(), 1: neighbour(1), **{i: neighbour(i) for i in LATE}}


@pytest.mark.statistical
def test_pak_audit_early_above_threshold_passes(real_draws):
    d, d1 = base_stream(), neighbour(1)
    result = audit_samples(
        prefix_llr(real_draws["D"], d, d1), prefix_llr(real_draws[1], d, d1), delta=DELTA
    )
    assert result.passes(EPSILON), result


@pytest.mark.statistical
@pytest.mark.parametrize("i", LATE, ids=["suffix-first", "suffix-last"])
def test_pak_audit_late_above_threshold_passes(real_draws, i):
    d = base_stream()
    result = audit_samples(
        suffix_llr(real_draws["D"], i, d), suffix_llr(real_draws[i], i, d), delta=DELTA
    )
    assert result.passes(EPSILON), result
    assert result.epsilon_lb > 0.2, result  # the BT part spends its ε: the audit sees it


@pytest.mark.statistical
def test_pak_audit_fails_without_clipping_the_prefix():
    d, d1 = base_stream(), neighbour(1)
    runs = N_FAST // 2
    out_d = run_pak(d, runs, seed=2, variant="unclipped-prefix")
    out_d1 = run_pak(d1, runs, seed=2, variant="unclipped-prefix")
    result = audit_samples(prefix_llr(out_d, d, d1), prefix_llr(out_d1, d, d1), delta=DELTA)
    assert not result.passes(EPSILON), result


@pytest.mark.statistical
def test_pak_audit_fails_with_an_under_noised_suffix_tree():
    d, i = base_stream(), N
    out_d = run_pak(d, N_FAST, seed=3, variant="tree-eps-x3")
    out_dp = run_pak(neighbour(i), N_FAST, seed=3, variant="tree-eps-x3")
    result = audit_samples(suffix_llr(out_d, i, d), suffix_llr(out_dp, i, d), delta=DELTA)
    assert not result.passes(EPSILON), result


# -- slow tier --------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.statistical
def test_pak_audit_slow_suffix_scale_halved():
    d, i = base_stream(), M + 1
    real = audit_samples(
        suffix_llr(run_pak(d, N_SLOW, seed=4), i, d),
        suffix_llr(run_pak(neighbour(i), N_SLOW, seed=4), i, d),
        delta=DELTA,
    )
    assert real.passes(EPSILON), real
    out_d = run_pak(d, N_SLOW, seed=4, variant="tree-eps-x2")
    out_dp = run_pak(neighbour(i), N_SLOW, seed=4, variant="tree-eps-x2")
    weak = audit_samples(suffix_llr(out_d, i, d), suffix_llr(out_dp, i, d), delta=DELTA)
    assert not weak.passes(EPSILON), weak


# -- the default counter (issue 14): the suffix through the best counter ----------------------

DEFAULT = {k: v for k, v in PARAMS.items() if k != "counter"}  # counter="auto"


def _first_suffix_step(values: np.ndarray, runs: int, seed: int, factor: float = 1.0):
    """Released σ̂(m + 1)/τ of ``runs`` default-counter releases (ε × ``factor`` on the
    suffix counter: ``factor`` > 1 is the under-noised twin)."""
    from mechanisms.counting import _kary

    bits = bit_source(np.random.SeedSequence([seed, int(values.sum() * 64)]))
    out = np.empty(runs)
    real = _kary.kary_noise
    with contextlib.ExitStack() as stack:
        stack.enter_context(_cached_calibration())
        mp = stack.enter_context(pytest.MonkeyPatch.context())
        mp.setattr(
            _kary, "kary_noise",
            lambda n, *, epsilon, bound, fanout: real(
                n, epsilon=epsilon * factor, bound=bound, fanout=fanout
            ),
        )  # fmt: skip
        for r in range(runs):
            rel = pak_release(values, seed=bits, **DEFAULT)
            out[r] = (rel.prefix_sums[M] - rel.prefix_sums[M - 1]) / rel.threshold
    assert rel.counter.counter.startswith("kary_tree")
    return out


@pytest.mark.statistical
def test_pak_audit_default_counter_late_step_passes_and_an_under_noised_twin_fails():
    # D: σ(m + 1) = 0; D': σ(m + 1) = B, clipped to τ: the released first suffix step moves by
    # τ through the default (k-ary) counter, loss ≤ ε. With the counter's ε × 4 it must fail.
    d, d_prime = base_stream(), neighbour(M + 1)
    runs = 6000
    x = _first_suffix_step(d, runs, 21)
    y = _first_suffix_step(d_prime, runs, 22)
    assert audit_samples(x, y, delta=DELTA).passes(EPSILON)
    x = _first_suffix_step(d, runs, 23, factor=4.0)
    y = _first_suffix_step(d_prime, runs, 24, factor=4.0)
    assert not audit_samples(x, y, delta=DELTA).passes(EPSILON)
