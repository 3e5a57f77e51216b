"""dpstream: the application layer (pipelines, bundled datasets, the ``dpstream`` command)."""

__all__: list[str] = []
__version__ = "0.1.0"
