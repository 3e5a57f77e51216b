"""Release pipelines: frames in, frames out, composing the mechanisms with the post-processor.

``release_optstream`` ([FV19] Alg. 2 + 4 over a hierarchy), ``release_pak`` ([PAK19]
Mechanism 1 with the planner's public defaults) and the w-event baselines
``release_laplace``, ``release_dft`` and ``release_pegasus``; ``_frames`` holds the frame layer
they share (validation, periods, hierarchy resolution, neighbour definitions).
"""

from ._optstream_pipeline import release_optstream
from ._pak_pipeline import PAK_PARAMETERS, release_pak
from ._wevent_pipeline import release_dft, release_laplace, release_pegasus

__all__ = [
    "PAK_PARAMETERS",
    "release_dft",
    "release_laplace",
    "release_optstream",
    "release_pak",
    "release_pegasus",
]
