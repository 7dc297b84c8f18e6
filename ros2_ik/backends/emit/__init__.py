"""The one compiled source, by concept (see :mod:`ros2_ik.backends.codegen` for the whole
picture): text tools, the fixed preludes, the robot's chains, FK and Jacobians, the pose goal,
the LM rows, CCD, the checks and selection, and the sources and host drivers."""

from .chain import Chain, chain_of
from .driver import CCD_BLOCK_ROWS, frames_source, solve_source, source_hash
from .prelude import (DEVICE_PRELUDE, HOST_SHIM, KERNEL_RE, PRELUDE, VECTOR_TYPES, host_variant,
                      vector_sincos)
from .text import DTYPES, LANES, SCALAR, VECTOR, Dialect

__all__ = ["Chain", "chain_of", "solve_source", "frames_source", "host_variant", "HOST_SHIM",
           "DTYPES", "source_hash", "Dialect", "SCALAR", "VECTOR", "LANES", "CCD_BLOCK_ROWS",
           "KERNEL_RE", "DEVICE_PRELUDE", "PRELUDE", "VECTOR_TYPES", "vector_sincos"]
