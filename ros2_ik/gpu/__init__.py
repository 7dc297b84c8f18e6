"""The GPU fast path: CUDA C++ generated from a model selection, run through CuPy.

- :mod:`.codegen` writes the kernels (robot baked in, one thread per problem-seed row);
- :mod:`.hostrun` runs the same source on the CPU with g++ (CI, tests);
- :mod:`.runtime` compiles it with NVRTC through CuPy and solves on the GPU.

Importing this package needs neither CuPy nor a GPU; only :mod:`.runtime`'s solvers do, and
they say so with :class:`~ros2_ik.errors.BackendUnavailableError`.
"""

from .codegen import Chain, chain_of, frames_source, solve_source

__all__ = ["Chain", "chain_of", "solve_source", "frames_source"]
