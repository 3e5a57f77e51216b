"""The ``dpstream demo`` job: every stage on bundled real data, and the report it writes."""
