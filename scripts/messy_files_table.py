"""The table of issue 25: each defect of a real meter file, the command, the message, the exit
status, what was written and what was charged.

Builds the messy files of ``tests/dpstream/test_messy_files.py`` (from the bundled regional data)
in a temporary folder, runs ``dpstream release optstream`` on each (with a ``--ledger`` file), and
writes ``docs/results/messy_files.md``. Usage: ``python scripts/messy_files_table.py``.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "dpstream"))

import test_messy_files as messy  # noqa: E402

from dpstream.cli import main  # noqa: E402


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _fresh_home() -> None:
    """Each scenario in its own $DPSTREAM_HOME (data sets' ledgers): never the user's."""
    import os

    os.environ["DPSTREAM_HOME"] = tempfile.mkdtemp(prefix="dpstream_home_")


def _run(folder: Path, path: str, *extra: str) -> tuple[int, str, str, str]:
    _fresh_home()
    before = _files(folder)
    args = messy._release(folder, path, *extra)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(args)
    written = sorted(_files(folder) - before)
    ledger = folder / "budget.db"
    charged = "nothing (no ledger file)" if not ledger.exists() else "see ledger"
    if ledger.exists():
        from dpstream._ledger import SQLiteLedger

        with SQLiteLedger(ledger) as book:
            charged = f"ε = {book.spent():g}"
    for name in written:
        (folder / name).unlink()
    line = err.getvalue().strip().splitlines()
    return code, (line[-1] if line else ""), ", ".join(written) or "nothing", charged


def _late_row(folder: Path, base) -> tuple:
    """The store released the first day without a reading; the next file holds it."""
    import sqlite3

    _fresh_home()
    messy._gap(base).to_csv(folder / "gap.csv", index=False)
    base.to_csv(folder / "late.csv", index=False)
    quiet = io.StringIO()
    with contextlib.redirect_stderr(quiet), contextlib.redirect_stdout(quiet):
        assert (
            main(messy._release(folder, str(folder / "gap.csv"), "--missing", "zero", store=True))
            == 0
        )

    def charges() -> int:
        with sqlite3.connect(folder / "ops.db") as con:
            return con.execute("SELECT COUNT(*) FROM charges").fetchone()[0]

    before, files = charges(), {p: p.stat().st_mtime_ns for p in folder.glob("out*")}
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(messy._release(folder, str(folder / "late.csv"), store=True))
    same = files == {p: p.stat().st_mtime_ns for p in folder.glob("out*")}
    message = err.getvalue().strip().splitlines()[-1].replace("|", "\\|")
    return (
        "late reading (--store released 2016-10-29 without it, --missing zero)",
        "--store ops.db",
        message,
        code,
        "nothing (out.csv unchanged)" if same else "OUT changed",
        "nothing (store charges unchanged)" if charges() == before else "charged",
    )


def main_table() -> str:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base = messy.clean()
        base.to_csv(folder / "clean.csv", index=False)
        (folder / "reg.json").write_text(__import__("json").dumps(messy.regional_hierarchy()))
        cases = [(name, build(base), ()) for name, build, _, _ in messy.DEFECTS]
        cases += [("every defect at once", messy._everything(base), ())]
        cases += [
            ("missing pair, --missing zero", messy._gap(base), ("--missing", "zero")),
            ("missing pair, --missing unmeasured", messy._gap(base), ("--missing", "unmeasured")),
            ("local times, --timezone Europe/Paris", messy._local(base), ("--timezone",
                                                                          "Europe/Paris")),
            ("clean twin", base, ()),
        ]  # fmt: skip
        for name, frame, extra in cases:
            file = folder / f"{name.split(',')[0].replace(' ', '_')}.csv"
            frame.to_csv(file, index=False)
            code, message, written, charged = _run(folder, str(file), *extra)
            file.unlink()
            message = message.replace(str(folder) + "/", "").replace("|", "\\|")
            if code == 0:
                message = "(released)"
            rows.append((name, " ".join(extra), message, code, written, charged))
        rows.append(_late_row(folder, base))
    lines = [
        "# Messy meter files: each defect, its message, and nothing done (issue 25)",
        "",
        "Built from the bundled regional data (4 regions, 2016-10-29 to 2016-10-31 in long "
        "format, the autumn DST day in the middle) by `tests/dpstream/test_messy_files.py`; "
        "each row runs `dpstream release optstream FILE --epsilon 1 --alpha 50 --k 10 "
        "--hierarchy reg.json --out out.csv --ledger budget.db --budget-epsilon 10 [extra]` "
        "(the late-reading row: `--store ops.db` instead of the ledger, after a first release "
        "of the file with the gap and `--missing zero`). "
        "`python scripts/messy_files_table.py` reproduces it.",
        "",
        "| defect | extra options | message (stderr) | exit | written | charged |",
        "|---|---|---|---:|---|---|",
    ]
    for name, extra, message, code, written, charged in rows:
        lines.append(f"| {name} | {extra} | {message} | {code} | {written} | {charged} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    text = main_table()
    (ROOT / "docs" / "results" / "messy_files.md").write_text(text, encoding="utf-8")
    print(text)
