"""The release store: configuration, released periods, plans and the ledger in one file."""

from ._export import write_periods
from ._ledger import StoreLedger
from ._release import release_to_store
from ._source import release_parquet_to_store
from ._store import ReleaseStore, StoreBusyError

__all__ = [
    "ReleaseStore",
    "StoreBusyError",
    "StoreLedger",
    "release_parquet_to_store",
    "release_to_store",
    "write_periods",
]
