"""The release store: configuration, released periods, plans and the ledger in one file."""

from ._ledger import StoreLedger
from ._release import release_to_store
from ._store import ReleaseStore

__all__ = ["ReleaseStore", "StoreLedger", "release_to_store"]
