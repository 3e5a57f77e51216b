"""The ``dpstream`` console command.

Each command group lives in :mod:`dpstream.commands` and is registered here. Errors that are
the user's (bad options, bad data) print one line and exit with status 2; ``--debug`` shows
the traceback instead.
"""

from __future__ import annotations

import importlib
import sys

import click

__all__ = ["cli", "main"]

# name -> (module, short help). The module is imported only when its command runs or shows its
# own help, so `dpstream --help`, `--version` and `dpstream data list` never load pandas'
# heavier neighbours, scipy, statsmodels, matplotlib or cvxpy (click's documented LazyGroup
# pattern; the short help lives here so the top-level help needs no import).
_COMMANDS: dict[str, tuple[str, str]] = {
    "data": ("dpstream.commands.data", "List and export the bundled real datasets."),
    "demo": ("dpstream.commands.demo", "Run the whole job on bundled data; write a report."),
    "forecast": ("dpstream.commands.forecast", "Forecast each day of a release, vs the truth."),
    "ledger": ("dpstream.commands.ledger", "Show data sets' budgets: spent per period, left."),
    "plan": ("dpstream.commands.plan", "Choose privacy parameters; predict their error."),
    "query": ("dpstream.commands.query", "Answer range sums from a written release."),
    "release": ("dpstream.commands.release", "Release streams (OptStream, baselines, ToPS, PAK)."),
    "store": ("dpstream.commands.store", "Create, show and back up release stores."),
}


class _LazyGroup(click.Group):
    """A click group whose sub-commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = _COMMANDS.get(cmd_name)
        if entry is None:
            return None
        return getattr(importlib.import_module(entry[0]), cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, _COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show full tracebacks on errors.")
@click.version_option(package_name="dpstream")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Release real-valued data streams under differential privacy.

    \b
    Examples:
      dpstream demo                          # the whole job on bundled data, a report
      dpstream demo --quick --out report     # the same, small, in well under a minute
      dpstream data export regional regional.csv
      dpstream release optstream regional.csv --epsilon 1 --alpha 50 \
          --hierarchy regional.hierarchy.json --out released.csv
      dpstream forecast released.csv --truth regional.csv --days 7 --out forecasts.csv
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status.

    Every failure is one line on stderr: what was wrong and how to fix it. Exit status 2 for
    the user's errors (bad options, bad data, files that cannot be read or written), 1 for an
    unexpected error (a bug: ``--debug`` shows its traceback).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        cli.main(args=args, prog_name="dpstream", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 1
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "dpstream"
        click.echo(f"Error: {exc.format_message()} See '{where} --help'.", err=True)
        return exc.exit_code
    except click.ClickException as exc:
        click.echo(f"Error: {exc.format_message()}", err=True)
        return exc.exit_code
    except OSError as exc:
        if debug:
            raise
        target = f" {exc.filename!r}" if exc.filename else ""
        click.echo(f"Error: cannot read or write{target}: {exc.strerror or exc}.", err=True)
        return 2
    except Exception as exc:  # noqa: BLE001 - the last resort of a console command
        if debug:
            raise
        if _is_user_error(exc):
            click.echo(f"Error: {exc}", err=True)
            return 2
        click.echo(
            f"Error: unexpected {type(exc).__name__}: {exc}. This is a bug in dpstream; "
            "re-run with --debug for the traceback and report it.",
            err=True,
        )
        return 1
    return 0


def _is_user_error(exc: Exception) -> bool:
    """A dpstream error (bad input, a budget refused): the user's, not a bug. Checked without
    importing ``mechanisms`` when nothing has (an error from click alone never needs it)."""
    errors = sys.modules.get("mechanisms.core._errors")
    return errors is not None and isinstance(exc, errors.DPStreamError)


if __name__ == "__main__":  # python -m dpstream.cli (benchmarks, tests)
    sys.exit(main())
