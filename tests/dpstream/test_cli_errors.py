"""Every CLI failure is one line on stderr with a non-zero status; --debug shows tracebacks."""

from __future__ import annotations

import pytest

import dpstream.commands.data as data_command
from dpstream.cli import main


def _one_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "status", "expected"),
    [
        (["demo", "--epsilon", "-1"], 2, "See 'dpstream demo --help'"),
        (["frobnicate"], 2, "No such command"),
        (["release", "laplace", "missing.csv", "--epsilon", "1", "--out", "x.csv"], 2, "missing"),
        (["data", "export", "regional", "/nonexistent-dir/x.csv"], 2, "does not exist"),
    ],
)
def test_user_errors_are_one_line(argv, status, expected, capsys):
    assert main(argv) == status
    assert expected in _one_line(capsys)


def test_unexpected_error_is_one_line_and_debug_shows_it(monkeypatch, capsys):
    def broken():
        raise RuntimeError("boom")

    monkeypatch.setitem(data_command._DATASETS, "regional", (broken, None, "broken"))
    assert main(["data", "export", "regional", "x.csv"]) == 1
    line = _one_line(capsys)
    assert "RuntimeError: boom" in line and "--debug" in line
    with pytest.raises(RuntimeError, match="boom"):
        main(["--debug", "data", "export", "regional", "x.csv"])
