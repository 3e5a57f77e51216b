"""Release pipelines: frames in, frames out, composing the mechanisms with the post-processor.

``release_optstream`` ([FV19] Alg. 2 + 4 over a hierarchy) and the w-event baselines
``release_laplace``, ``release_dft`` and ``release_pegasus``; ``_frames`` holds the frame layer
they share (validation, periods, hierarchy resolution, neighbour definitions).
"""

from ._optstream_pipeline import release_optstream
from ._wevent_pipeline import release_dft, release_laplace, release_pegasus

__all__ = ["release_dft", "release_laplace", "release_optstream", "release_pegasus"]
