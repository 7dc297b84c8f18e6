"""The prepared solver API: :class:`ChainSolver`, one pose goal at a time at low latency.

It sits above the entry points: the compiled solve is :class:`.fast.PreparedChain`'s, and
where that path does not cover the model, the tip or the options, :func:`.api.solve_pose`
answers (``api`` never imports this module).
"""

from __future__ import annotations

import numpy as np

from ..model import Model
from ..validate import as_float_array
from .api import solve_pose
from .checks import apply_group
from .common import IKResult
from .fast import PreparedChain

__all__ = ["ChainSolver"]


class ChainSolver(PreparedChain):
    """Prepared low-latency IK for one problem at a time (a robot's control loop).

    Everything that does not depend on the target is done once here (chain arrays, limits, the
    random restart seeds, the solver options); :meth:`solve` then makes one compiled call that
    validates the target, runs LM from the seed and then from each restart seed in order until
    one converges (speed mode), wraps continuous joints near the seed and re-checks the answer by
    FK. Where the compiled path does not cover the model, the tips or the options (Numba missing,
    planar/floating joints on the chain, a solve mode other than ``speed``), :meth:`solve` calls
    :func:`solve_pose` instead, with the same results contract. With a planning ``group``
    (:meth:`ros2_ik.model.Srdf.group`) only the group's joints move, and its chain tip is the
    default tip.
    """

    def __init__(self, model: Model, tip: str | None = None, config=None,
                 weights=(1, 1, 1, 1, 1, 1), group=None):
        if group is not None:  # only the group's joints move; its chain tip is the default
            model, tip = apply_group(model, group, tip)
        super().__init__(model, tip, config, weights)

    def _fallback(self, target, seed, should_stop) -> IKResult:
        """Not covered by the compiled path: :func:`solve_pose` with this solver's options."""
        if seed is not None:
            seed = as_float_array(seed, "seed", f"shape ({self.model.nq},)", np)[None]
        return solve_pose(self.model, target[None], tips=self.tip, weights=self.weights,
                          config=self.config, seeds=seed, should_stop=should_stop)
