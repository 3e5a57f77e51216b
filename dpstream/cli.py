"""The ``dpstream`` console command.

Each command group lives in :mod:`dpstream.commands` and is registered here. Errors that are
the user's (bad options, bad data) print one line and exit with status 2; ``--debug`` shows
the traceback instead.
"""

from __future__ import annotations

import sys

import click

from mechanisms import DPStreamError

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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
    except DPStreamError as exc:
        if debug:
            raise
        click.echo(f"Error: {exc}", err=True)
        return 2
    except OSError as exc:
        if debug:
            raise
        target = f" {exc.filename!r}" if exc.filename else ""
        click.echo(f"Error: cannot read or write{target}: {exc.strerror or exc}.", err=True)
        return 2
    except Exception as exc:  # noqa: BLE001 - the last resort of a console command
        if debug:
            raise
        click.echo(
            f"Error: unexpected {type(exc).__name__}: {exc}. This is a bug in dpstream; "
            "re-run with --debug for the traceback and report it.",
            err=True,
        )
        return 1
    return 0


# -- command registration (one line per command module) --
from dpstream.commands.plan import plan  # noqa: E402

cli.add_command(plan)
from dpstream.commands.demo import demo  # noqa: E402

cli.add_command(demo)
from dpstream.commands.release import release  # noqa: E402

cli.add_command(release)
from dpstream.commands.query import query  # noqa: E402

cli.add_command(query)
from dpstream.commands.forecast import forecast  # noqa: E402

cli.add_command(forecast)
from dpstream.commands.data import data  # noqa: E402

cli.add_command(data)
