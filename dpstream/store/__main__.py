"""``python -m dpstream.store STORE``: print a store's configuration, periods and ledger."""

from __future__ import annotations

import json
import sys

import pandas as pd

from ._store import ReleaseStore


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m dpstream.store STORE", file=sys.stderr)
        return 2
    with ReleaseStore(args[0]) as store:
        print("configuration:", json.dumps(store.config, sort_keys=True))
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print("periods:")
            print(store.periods().drop(columns=["released_at"], errors="ignore").to_string())
            ledger = store.ledger
            if ledger is not None:
                print("ledger:", ledger.total, "per window; charges:")
                for charge in ledger.charges:
                    print(f"  {charge.label}  {charge.budget}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
