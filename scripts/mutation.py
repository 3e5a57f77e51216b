"""Mutation testing of the privacy core: does the test suite notice when the code is wrong?

Usage (from the repository root; on demand, never in CI)::

    python scripts/mutation.py noise ledger --sample 40 --seed 29 --json out.json
    python scripts/mutation.py all --sample 40 --seed 29 --rev e6d6b85   # the tree at a commit

For each TARGET (a source file, optionally restricted to some functions, with a fast test
selection) the script lists every mutant its operators can make, draws ``--sample`` of them
with ``random.Random(--seed)``, and runs the target's tests once per mutant in a temporary COPY
of the tree (the real files are never edited; ``--rev`` copies a commit instead of the working
tree). A mutant is *killed* when the selection fails (a failing test, or an import error),
*survived* when it passes, *timed out* when it runs past the limit (3x the clean run + 15 s).
Mutants declared in ``scripts/mutation_equivalents.txt`` (one line each: target, mutant id,
reason) are *equivalent* when they survive; a declared equivalent that is killed is reported
(the declaration is wrong). ``kill_rate`` = (killed + timed out) / (tried - equivalent).

Why a hand-written mutator: mutmut 3 rewrites a whole project into a ``mutants/`` folder with
its own trampolines and runs one project-wide test command (no per-target test selection, no
seeded sample), and cosmic-ray needs a session database and a configuration file per target.
What we need is small: a few AST operators, a seeded sample, a per-target selection, and a
copy of the tree; about 300 lines of standard library.

Operators (on the AST, the module is re-emitted with :func:`ast.unparse`): arithmetic and
bitwise operators swapped (+/-, * and /, ** to *, // to /, << and >>, & and |), augmented
assignments likewise, comparisons moved across their boundary (< and <=, > and >=, == and !=,
is / is not, in / not in), ``and``/``or`` swapped, ``not`` and unary minus removed, numbers
changed (n to n + 1, x to 2x, 0 to 1), booleans flipped, ``if`` conditions negated, max/min and
floor/ceil swapped, call statements, ``raise`` statements, augmented assignments and
re-assignments deleted, ``BEGIN IMMEDIATE`` made ``BEGIN``. Docstrings, annotations, ``__all__``
decorators (``@dataclass(frozen=True)``: declarations) and everything inside a ``raise`` or an
f-string (messages) are left alone.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENTS = ROOT / "scripts" / "mutation_equivalents.txt"


@dataclass(frozen=True)
class Target:
    """A file to mutate, the functions to mutate in it (all if empty), and its tests."""

    path: str
    tests: tuple[str, ...]
    scope: tuple[str, ...] = ()
    keyword: str = ""  # a pytest -k expression narrowing the selection, if any


TARGETS: dict[str, Target] = {
    "noise": Target(
        "mechanisms/core/_noise.py",
        (
            "tests/mechanisms/test_noise.py",
            "tests/mechanisms/test_lattice_rule.py",
            "tests/mechanisms/test_calibration_range.py",
            "tests/mechanisms/test_samplers_golden.py",
            "tests/privacy/test_noise_audit.py",
        ),
    ),
    "samplers": Target(
        "mechanisms/core/_samplers.py",
        (
            "tests/mechanisms/test_noise.py",
            "tests/mechanisms/test_samplers_golden.py",
            "tests/privacy/test_noise_audit.py",
            "tests/privacy/test_sampler_gap.py",
            "tests/privacy/test_gaussian_sampler_gap.py",
        ),
    ),
    "budget": Target(
        "mechanisms/core/_budget.py",
        (
            "tests/mechanisms/test_budget.py",
            "tests/mechanisms/test_wevent_ledger.py",
        ),
    ),
    "ledger": Target(
        "dpstream/_ledger.py",
        (
            "tests/dpstream/test_ledger.py",
            "tests/dpstream/test_ledger_forced_race.py",
            "tests/dpstream/test_ledger_rules.py",
            "tests/dpstream/test_store_faults.py",
            "tests/dpstream/test_cli_ledger.py",
        ),
    ),
    "dataset_default": Target(
        "dpstream/_dataset.py",
        ("tests/dpstream/test_dataset_default.py", "tests/dpstream/test_report_ledger.py"),
        scope=(
            "covering_total",
            "stream_ids",
            "account_release",
            "_bind",
            "_entry",
            "ledger_summary",
            "DeferredAccount.charge",
        ),
    ),
    "store_config": Target(
        "dpstream/store/_store.py",
        (
            "tests/dpstream/test_dataset_default.py",
            "tests/dpstream/test_store.py",
            "tests/dpstream/test_store_order.py",
        ),
        scope=(
            "ReleaseStore.config",
            "ReleaseStore._write_pending",
            "ReleaseStore._drop_pending",
            "ReleaseStore._check_config",
            "ReleaseStore._fix_config",
        ),
    ),
    "store_table": Target(
        "dpstream/store/_store.py",
        (
            "tests/dpstream/test_store.py",
            "tests/dpstream/test_store_resume.py",
            "tests/dpstream/test_store_lock.py",
            "tests/dpstream/test_store_faults.py",
            "tests/dpstream/test_store_order.py",
        ),
        scope=(
            "ReleaseStore.periods",
            "ReleaseStore.ordinals",
            "ReleaseStore._get",
            "ReleaseStore._put",
            "ReleaseStore._measured",
        ),
    ),
    "store_periods": Target(
        "dpstream/store/_ledger.py",
        (
            "tests/dpstream/test_store.py",
            "tests/dpstream/test_store_faults.py",
            "tests/dpstream/test_store_periods.py",
            "tests/dpstream/test_store_order.py",
        ),
    ),
    "window_rule": Target(
        "planner/_plan_choices.py",
        ("tests/planner/test_stream_plan.py", "tests/planner/test_window_rule.py"),
        scope=("window_budget",),
    ),
    "optstream_sampler": Target(
        "mechanisms/optstream/_sampling.py",
        (
            "tests/mechanisms/test_optstream.py",
            "tests/mechanisms/test_optstream_sampler.py",
            "tests/privacy/test_optstream_audit.py",
        ),
    ),
}

_BINOP_SWAP = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Pow: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
}
_CMP_SWAP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_NAME_SWAP = {"max": "min", "min": "max", "floor": "ceil", "ceil": "floor"}


@dataclass
class Mutant:
    """One mutation: the n-th node of ``ast.walk`` order, what to do to it, and its id."""

    index: int
    op: str
    ident: str = ""
    line: int = 0
    before: str = ""
    after: str = ""
    status: str = ""
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _qualname(node: ast.AST, parents: dict) -> str:
    names = []
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
    return ".".join(reversed(names))


def _excluded(node: ast.AST, parents: dict) -> bool:
    """Docstrings, annotations, __all__, messages (raise arguments, f-strings), imports."""
    child = node
    while child in parents:
        parent = parents[child]
        if isinstance(parent, ast.Raise) and child is not parent:
            return True
        if isinstance(parent, ast.JoinedStr | ast.Import | ast.ImportFrom):
            return True
        if isinstance(parent, ast.FunctionDef | ast.ClassDef) and child in parent.decorator_list:
            return True  # declarations (@dataclass(frozen=True, ...)), not logic
        if isinstance(parent, ast.arg) and child is parent.annotation:
            return True
        if isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef) and child is parent.returns:
            return True
        if isinstance(parent, ast.AnnAssign) and child is parent.annotation:
            return True
        if isinstance(parent, ast.If) and "TYPE_CHECKING" in ast.unparse(parent.test):
            return True
        if isinstance(parent, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in parent.targets
        ):
            return True
        child = parent
    return False


def _in_scope(node: ast.AST, parents: dict, scope: tuple[str, ...]) -> bool:
    if not scope:
        return True
    q = _qualname(node, parents)
    return any(q == s or q.startswith(s + ".") for s in scope)


def _is_docstring(node: ast.AST, parents: dict) -> bool:
    parent = parents.get(node)
    if not isinstance(node, ast.Expr) or not isinstance(node.value, ast.Constant):
        return False
    return isinstance(node.value.value, str) and isinstance(
        parent, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    )


def _reassigned(node: ast.Assign, parents: dict) -> bool:
    """``x = ...`` where x was bound earlier in the same function (deleting it keeps x)."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
        return False
    name, func = node.targets[0].id, parents.get(node)
    while func is not None and not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
        func = parents.get(func)
    if func is None:
        return False
    bound = {a.arg for a in func.args.args + func.args.kwonlyargs + func.args.posonlyargs}
    for other in ast.walk(func):
        if isinstance(other, ast.Name) and isinstance(other.ctx, ast.Store):
            if other.id == name and (other.lineno, other.col_offset) < (
                node.lineno,
                node.col_offset,
            ):
                return True
    return name in bound


def _ops_for(node: ast.AST, parents: dict) -> list[str]:
    ops = []
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAP:
        ops.append("binop")
    elif isinstance(node, ast.AugAssign):
        if type(node.op) in _BINOP_SWAP:
            ops.append("augop")
        ops.append("delete")
    elif isinstance(node, ast.Compare):
        ops += [f"cmp{i}" for i, op in enumerate(node.ops) if type(op) in _CMP_SWAP]
    elif isinstance(node, ast.BoolOp):
        ops.append("boolop")
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
        ops.append("unary")
    elif isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or isinstance(node.value, int | float):
            ops.append("number")
        elif node.value == "BEGIN IMMEDIATE":
            ops.append("deferred")
    elif isinstance(node, ast.If):
        ops.append("negate")
    elif isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if isinstance(node.func, ast.Attribute):
            name = node.func.attr
        if name in _NAME_SWAP:
            ops.append("callswap")
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        ops.append("delete")
    elif isinstance(node, ast.Raise):
        ops.append("delete")
    elif isinstance(node, ast.Assign) and _reassigned(node, parents):
        ops.append("delete")
    return ops


def _apply(node: ast.AST, op: str) -> ast.AST:
    """The mutated replacement of ``node`` (a copy)."""
    new = copy.deepcopy(node)
    if op in ("binop", "augop"):
        new.op = _BINOP_SWAP[type(node.op)]()
    elif op.startswith("cmp"):
        i = int(op[3:])
        new.ops[i] = _CMP_SWAP[type(node.ops[i])]()
    elif op == "boolop":
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif op == "unary":
        return copy.deepcopy(node.operand)
    elif op == "number":
        v = node.value
        if isinstance(v, bool):
            new.value = not v
        elif v == 0:
            new.value = type(v)(1)
        elif isinstance(v, int):
            new.value = v + 1
        else:
            new.value = v * 2.0
    elif op == "deferred":
        new.value = "BEGIN"
    elif op == "negate":
        new.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    elif op == "callswap":
        if isinstance(new.func, ast.Name):
            new.func.id = _NAME_SWAP[new.func.id]
        else:
            new.func.attr = _NAME_SWAP[new.func.attr]
    elif op == "delete":
        return ast.Pass()
    return new


def _summary(node: ast.AST) -> str:
    if isinstance(node, ast.If):
        return f"if {ast.unparse(node.test)}:"
    text = ast.unparse(node).splitlines()[0]
    return text if len(text) <= 100 else text[:97] + "..."


def enumerate_mutants(source: str, scope: tuple[str, ...]) -> list[Mutant]:
    tree = ast.parse(source)
    parents = _parents(tree)
    mutants, seen = [], {}
    for index, node in enumerate(ast.walk(tree)):
        if not hasattr(node, "lineno") or _is_docstring(node, parents):
            continue
        if _excluded(node, parents) or not _in_scope(node, parents, scope):
            continue
        if isinstance(node, ast.Constant) and _is_docstring(parents.get(node), parents):
            continue
        for op in _ops_for(node, parents):
            m = Mutant(index, op, line=node.lineno)
            m.before = _summary(node)
            m.after = _summary(_apply(node, op)) if op != "delete" else "pass"
            key = f"{_qualname(node, parents) or '<module>'}:{op}:{m.before} -> {m.after}"
            n = seen.get(key, 0)
            seen[key] = n + 1
            m.ident = f"{key} #{n}"
            mutants.append(m)
    return mutants


def mutate(source: str, mutant: Mutant) -> str:
    tree = ast.parse(source)
    parents = _parents(tree)
    for index, node in enumerate(ast.walk(tree)):
        if index == mutant.index:
            replacement = _apply(node, mutant.op)
            parent = parents[node]
            for name, value in ast.iter_fields(parent):
                if value is node:
                    setattr(parent, name, replacement)
                elif isinstance(value, list):
                    for i, item in enumerate(value):
                        if item is node:
                            value[i] = replacement
            return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    raise LookupError(mutant.ident)


def read_equivalents(path: Path = EQUIVALENTS) -> dict[str, dict[str, str]]:
    """``target | mutant id | reason`` per line; ``#`` starts a comment line."""
    out: dict[str, dict[str, str]] = {}
    if not path.is_file():
        return out
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        target, ident, reason = (part.strip() for part in raw.split(" | ", 2))
        if not reason:
            raise SystemExit(f"{path}: every equivalent needs a reason: {raw!r}")
        out.setdefault(target, {})[ident] = reason
    return out


def make_copy(rev: str | None) -> Path:
    """A temporary copy of the tracked (and untracked, not ignored) files, or of a commit."""
    dest = Path(tempfile.mkdtemp(prefix="dpstream-mutation-"))
    if rev:
        archive = subprocess.run(
            ["git", "archive", rev], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        return dest
    files = subprocess.run(
        ["git", "ls-files", "-z", "-c", "-o", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def run_tests(tree: Path, target: Target, timeout: float) -> tuple[str, float]:
    tests = [t for t in target.tests if (tree / t).is_file()]
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    cmd += ["-m", "not slow", "--no-header", *tests]
    if target.keyword:
        cmd += ["-k", target.keyword]
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "PYTHONDONTWRITEBYTECODE": "1",  # a mutant never runs a stale .pyc of another
        "OPENBLAS_NUM_THREADS": "1",
    }
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timed_out", time.monotonic() - start
    seconds = time.monotonic() - start
    if proc.returncode == 0:
        return "survived", seconds
    if proc.returncode == 5:
        return "errors", seconds  # no tests collected: a broken selection, not a kill
    return "killed", seconds


def run_target(name: str, target: Target, args, equivalents: dict[str, str]) -> dict:
    tree = make_copy(args.rev)
    try:
        check = subprocess.run(
            [sys.executable, "-c", "import mechanisms, sys; print(mechanisms.__file__)"],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": str(tree)},
            capture_output=True,
            text=True,
        ).stdout
        if not check.startswith(str(tree)):
            raise SystemExit(f"the copy does not import its own packages: {check!r}")
        file = tree / target.path
        original = file.read_text(encoding="utf-8")
        clean = ast.unparse(ast.parse(original)) + "\n"  # the baseline is re-emitted too
        file.write_text(clean, encoding="utf-8")
        status, base = run_tests(tree, target, timeout=600)
        if status != "survived":
            return {"target": name, "error": f"the clean run did not pass ({status})"}
        limit = 3 * base + 15
        every = enumerate_mutants(original, target.scope)
        if not every:  # a scope naming functions the file no longer holds (a module split)
            return {"target": name, "error": f"no mutants in {target.path} for {target.scope}"}
        rng = random.Random(args.seed)
        sample = sorted(rng.sample(every, min(args.sample, len(every))), key=lambda m: m.index)
        for i, mutant in enumerate(sample, 1):
            file.write_text(mutate(original, mutant), encoding="utf-8")
            mutant.status, mutant.seconds = run_tests(tree, target, limit)
            if mutant.ident in equivalents:
                if mutant.status == "survived":
                    mutant.status = "equivalent"
                else:
                    mutant.extra["declared_equivalent_but"] = mutant.status
            if args.verbose:
                print(f"  [{name} {i}/{len(sample)}] {mutant.status:9s} {mutant.ident}", flush=True)
        file.write_text(original, encoding="utf-8")
    finally:
        shutil.rmtree(tree, ignore_errors=True)
    counts = {
        s: sum(m.status == s for m in sample)
        for s in ("killed", "survived", "timed_out", "equivalent", "errors")
    }
    live = len(sample) - counts["equivalent"] - counts["errors"]
    return {
        "target": name,
        "path": target.path,
        "scope": list(target.scope),
        "tests": list(target.tests),
        "mutants_possible": len(every),
        "tried": len(sample),
        **counts,
        "kill_rate": (counts["killed"] + counts["timed_out"]) / live if live else None,
        "clean_seconds": round(base, 2),
        "seed": args.seed,
        "rev": args.rev or "working tree",
        "survivors": [
            {"id": m.ident, "line": m.line, "before": m.before, "after": m.after}
            for m in sample
            if m.status == "survived"
        ],
        "wrongly_declared_equivalent": [m.ident for m in sample if m.extra],
        "equivalents": [
            {"id": m.ident, "reason": equivalents[m.ident]}
            for m in sample
            if m.status == "equivalent"
        ],
    }


def rescore(path: Path, names: list[str], out: str | None, markdown: bool = False) -> int:
    """Survivors of a saved run that are now declared equivalent become ``equivalent``."""
    declared = read_equivalents()
    results = json.loads(path.read_text(encoding="utf-8"))
    for r in results:
        if isinstance(r.get("error"), int):  # files written before the key was renamed
            r["errors"] = r.pop("error")
        if "error" in r or ("all" not in names and r["target"] not in names):
            continue
        eq = declared.get(r["target"], {})
        now = [s for s in r["survivors"] if s["id"] in eq]
        r["survivors"] = [s for s in r["survivors"] if s["id"] not in eq]
        r["survived"] -= len(now)
        r["equivalent"] += len(now)
        r["equivalents"] += [{"id": s["id"], "reason": eq[s["id"]]} for s in now]
        live = r["tried"] - r["equivalent"] - r["errors"]
        r["kill_rate"] = (r["killed"] + r["timed_out"]) / live if live else None
        if markdown:
            rate = "n/a" if r["kill_rate"] is None else f"{r['kill_rate']:.0%}"
            print(
                f"| {r['target']} | `{r['path']}` | {r['tried']} | {r['killed']} | "
                f"{r['survived']} | {r['timed_out']} | {r['equivalent']} | {r['errors']} | "
                f"{rate} | {r['seed']} |"
            )
        else:
            _print(r)
    if out:
        Path(out).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


def _print(result: dict) -> None:
    if "error" in result:
        print(f"{result['target']}: {result['error']}", flush=True)
        return
    rate = "n/a" if result["kill_rate"] is None else f"{result['kill_rate']:.0%}"
    print(
        f"{result['target']:18s} tried {result['tried']:3d}  killed {result['killed']:3d}  "
        f"survived {result['survived']:3d}  timed out {result['timed_out']:2d}  equivalent "
        f"{result['equivalent']:2d}  errors {result['errors']:2d}  kill_rate {rate}",
        flush=True,
    )
    for s in result["survivors"]:
        print(f"    survived: line {s['line']}: {s['id']}", flush=True)


def main(argv: list[str] | None = None) -> int:
    import signal

    # a killed run (SIGTERM) still removes its copy of the tree (the finally blocks run)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="+", help=f"{', '.join(TARGETS)}, or all")
    parser.add_argument("--sample", type=int, default=40, help="mutants per target (default 40)")
    parser.add_argument("--seed", type=int, default=29, help="seed of the sample (default 29)")
    parser.add_argument("--rev", help="mutate a copy of this commit instead of the working tree")
    parser.add_argument("--json", help="write the results to this JSON file")
    parser.add_argument("--list", action="store_true", help="list every mutant id and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per mutant")
    parser.add_argument(
        "--rescore",
        metavar="JSON",
        help="re-read a results file with the current equivalents file (no run) and print it",
    )
    parser.add_argument("--markdown", action="store_true", help="with --rescore: a table")
    args = parser.parse_args(argv)
    if args.rescore:
        return rescore(Path(args.rescore), args.targets, args.json, args.markdown)
    names = list(TARGETS) if "all" in args.targets else args.targets
    unknown = [n for n in names if n not in TARGETS]
    if unknown or args.sample < 1:
        parser.error(
            f"unknown targets {unknown} (choose from {list(TARGETS)})"
            if unknown
            else "--sample must be a positive integer"
        )
    if args.list:
        for n in names:
            source = (ROOT / TARGETS[n].path).read_text(encoding="utf-8")
            for m in enumerate_mutants(source, TARGETS[n].scope):
                print(f"{n} | {m.ident}")
        return 0
    declared = read_equivalents()
    results = []
    for n in names:
        result = run_target(n, TARGETS[n], args, declared.get(n, {}))
        results.append(result)
        _print(result)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
