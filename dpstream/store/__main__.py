"""``python -m dpstream.store STORE``: an alias of ``dpstream store show STORE`` (read-only)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from dpstream.cli import main as cli_main

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m dpstream.store STORE", file=sys.stderr)
        return 2
    return cli_main(["store", "show", *args])


if __name__ == "__main__":
    sys.exit(main())
