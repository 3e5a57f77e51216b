"""Long-format input and output, and the hierarchy as data (Nixtla's conventions).

Metering systems export, and forecasting tools (Nixtla's ``hierarchicalforecast``,
``statsforecast``) read, *long* frames: one row per (``unique_id``, ``ds``, ``y``). A hierarchy is
data too: a (child, parent) table, a ``{parent: [children]}`` JSON file (what ``dpstream data
export`` writes), or Nixtla's summing matrix ``S_df``. This package converts between long and
wide frames and validates the hierarchy with typed errors; :func:`read_readings` is the one
validation pass over a meter file (missing, duplicated and off-grid readings, DST days, NaN,
negative values, text) that names the first offending series and time stamp (issue 25);
:func:`dpstream.io._parquet_pass.diagnose_parquet` is the same pass over a Parquet file too
large to hold, in blocks, with the same messages (what ``--store`` runs on a Parquet INPUT).
"""

from ._diagnose import MISSING_POLICIES, Readings, diagnose_long, diagnose_wide, read_readings
from ._hierarchy import hierarchy_from_edges, hierarchy_from_s_df, read_hierarchy
from ._long import is_long, long_to_wide, read_long, read_table, wide_to_long, write_table

__all__ = [
    "MISSING_POLICIES",
    "Readings",
    "diagnose_long",
    "diagnose_wide",
    "hierarchy_from_edges",
    "hierarchy_from_s_df",
    "is_long",
    "long_to_wide",
    "read_hierarchy",
    "read_long",
    "read_readings",
    "read_table",
    "wide_to_long",
    "write_table",
]
