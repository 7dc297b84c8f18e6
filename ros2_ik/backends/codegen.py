"""The one compiled source: C++ generated from a chain table, rendered for every compiled backend.

Every compiled algorithm of ros2_ik (FK and the residual Jacobian along the chains, the LM step
with its damping, non-monotone phase, active-set limits and limit excursion, the CCD sweep,
selection and FK verification) is written once, here, as an emitter of C++ text with the robot
baked in: fixed transforms become literals (products with a literal 0 are dropped, with 1
become the operand), the axis case of every joint (prismatic, revolute about +-z, general
Rodrigues) is chosen, mimic multipliers and offsets, limits, which revolute joints go round by
2 pi and the structural zeros of the Jacobian are literals, and every small matrix loop is
unrolled with constant indices so that the arrays stay in registers. The readable reference of
the same steps is :mod:`ros2_ik.ik` (``lm.py``, ``ccd.py``, ``batch.py``); a solver change
touches that and this module, nothing else.

One text, three renderings:

- CUDA (:func:`solve_source`, NVRTC through CuPy: :mod:`.cuda`): one thread per row (a problem
  x seed pair);
- host scalar (:func:`solve_source` with ``host=True``, g++: :mod:`.host`): the same kernel text
  after :func:`host_variant` swaps the device prelude for :data:`HOST_SHIM`, plus a driver that
  runs a slice of problems (check, solve, select) in one call;
- host vector lanes: the LM rows rendered a second time in the :data:`VECTOR` dialect, where a
  value is 4 rows side by side in an AVX2 register and a branch is a lane-wise select.

The LM rows are emitted by ONE function (:func:`.emit.lm.emit_lm_rows`) for both dialects: a
:class:`Dialect` says how a value, a mask, a select and a lane are spelt, and every lane does
the one-row rendering's operations in the same order, so the scalar and the vector renderings
give the same rows bit for bit (``test_backends.py``). The kernels' interface (the options
struct, status codes, solve modes, argument structs) is generated from the spec's types
(:mod:`.interface`), and the robot from the model layer's typed chain table
(:func:`ros2_ik.model.chain.chain_table`).

The threads never cooperate (no shared memory, no barriers, no warp shuffles); the only memory
two rows share is a problem's ``done`` flag in speed mode (a row that converged sets it, the
problem's other seeds stop). On the host a lane runs a problem's seeds in order (the first
that converges wins, as in the reference's speed mode); on a GPU they run side by side.

The generator lives in :mod:`ros2_ik.backends.emit`, one module per concept (text tools,
preludes, the robot's chains, FK and Jacobians, the pose goal, the LM rows, CCD, checks and
selection, sources and drivers); this module is its front: what the backends and the tests
call.
"""

from .emit import (CCD_BLOCK_ROWS, DTYPES, HOST_SHIM, LANES, SCALAR, VECTOR, Chain, Dialect,
                   chain_of, frames_source, host_variant, solve_source, source_hash)

__all__ = ["Chain", "chain_of", "solve_source", "frames_source", "host_variant", "HOST_SHIM",
           "DTYPES", "source_hash", "Dialect", "SCALAR", "VECTOR", "LANES", "CCD_BLOCK_ROWS"]
