""":class:`ChainSolver`: one pose goal at a time at low latency (a robot's control loop).

A prepared :class:`.solver.IKSolver` for one tip, with a short path for the host backend:
the target and the seed are copied into buffers the compiled driver already knows, one
foreign call checks, solves (the seed, then each restart seed in order until one converges),
selects and verifies, and the answer is read back; no argument is converted twice.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from ..errors import InvalidInputError, ShapeError
from ..ik.checks import apply_group, check_call_options, check_collision
from ..ik.config import IKConfig, IKResult, Status
from ..ik.objectives import check_weights
from ..kinematics.se3 import pq_to_pose
from ..model import Model, check_model
from ..validate import as_float_array, link_index
from ..backends.result import result_of
from .solver import IKSolver

__all__ = ["ChainSolver"]

_ARGS = None  # the driver's argument indices (imported with the host backend)
_CONVERGED = float(Status.CONVERGED)
_F64 = np.dtype(np.float64)


class ChainSolver:
    """Prepared IK for one problem at a time on one tip.

    Everything that does not depend on the target is done once here (the backend and its
    compiled kernels, the restart seeds, the options); :meth:`solve` then answers one goal:
    LM from the seed, then from each restart seed in order until one converges (speed mode),
    continuous joints wrapped near the seed, the answer re-checked by FK. With a planning
    ``group`` (:meth:`ros2_ik.model.Srdf.group`) only the group's joints move, and its chain tip
    is the default tip. ``backend`` as :class:`.solver.IKSolver`'s; ``compiled`` says whether
    the host backend answers. With ``config.avoid_collisions`` the answers keep clear of the
    robot itself (``collision``: its collision model, default the model's) and of the world
    given to :meth:`solve`.
    """

    def __init__(self, model: Model, tip: str | None = None, config: IKConfig | None = None,
                 weights=(1, 1, 1, 1, 1, 1), group=None, backend: str = "auto", collision=None):
        check_model(model)
        if group is not None:  # only the group's joints move; its chain tip is the default
            model, tip = apply_group(model, group, tip)
        self.model = model
        self.tip = tip if tip is not None else (model.tips[0] if model.tips else None)
        if self.tip is None:
            raise InvalidInputError("no tip link given and the model has no default tip")
        link_index(model, self.tip, "tip")
        self.config = check_call_options(config, "dls", None)
        check_collision(collision)
        self.weights = np.array(check_weights(weights, 1, np)[0], dtype=np.float64)
        self._solver = IKSolver(model, [self.tip], self.config, backend=backend,
                                collision=collision)
        self.backend = self._solver.backend
        self.compiled = self.backend == "host"
        self._nq1 = (model.nq,)
        self._neutral = model.tables.neutral_q
        timeout = self.config.timeout
        self._budget = -1 if timeout is None else int(timeout * 1e9)
        self._local = threading.local()
        global _ARGS
        if self.compiled:
            if _ARGS is None:
                from ..backends.host import ARG  # noqa: PLC0415

                _ARGS = ARG
            host = self._solver.host
            self._fn = host.driver
            self._clock0 = _ARGS["clock0"]
            self._fields = host.out_fields

    def solve(self, target, seed=None, should_stop=None, world=None,
              start_time: float | None = None) -> IKResult:
        """Solve one pose goal: ``target`` (4, 4) or (7,) [x y z qx qy qz qw] in the base frame.

        ``should_stop``: polled while the solve runs (as in :func:`.solve_pose`); returning True
        ends it (status PREEMPTED unless it had converged). ``world``: the obstacles (with
        collision avoidance on). ``start_time``: when the timeout starts
        (``time.perf_counter``'s clock; default: now), e.g. when the request arrived. Returns an
        :class:`IKResult` with one problem.
        """
        now = time.perf_counter()
        t0 = now if start_time is None else min(float(start_time), now)
        if should_stop is not None and not callable(should_stop):
            check_call_options(self.config, "dls", should_stop)  # raises its error
        if not (type(target) is np.ndarray and target.dtype is _F64):
            target = as_float_array(target, "target", "shape (4, 4) or (7,)", np).astype(
                np.float64, copy=False)
        shape = target.shape
        if shape != (4, 4) and shape != (7,):
            raise ShapeError(f"target must have shape (4, 4) or (7,) [x y z qx qy qz qw], "
                             f"got {shape}")
        if seed is not None and not (type(seed) is np.ndarray and seed.dtype is _F64
                                     and seed.shape == self._nq1):
            seed = as_float_array(seed, "seed", f"shape ({self.model.nq},)", np)
            if seed.shape != self._nq1:
                raise ShapeError(f"seed must have shape ({self.model.nq},) (coordinates "
                                 f"{list(self.model.q_names)}), got {seed.shape}")
            seed = seed.astype(np.float64)
        if not self.compiled or world is not None or self._solver.collision is not None:
            return self._solver.solve(target[None], seeds=None if seed is None else seed[None],
                                      weights=self.weights, should_stop=should_stop,
                                      start_time=t0, world=world)
        small = getattr(self._local, "small", None)
        if small is None:
            small = self._prepare_thread()
        if shape == (7,):
            target = pq_to_pose(target)
        small.tgt00[...] = target
        small.seed0[...] = self._neutral if seed is None else seed
        words = small.words
        if self._budget >= 0:  # the deadline counts from t0, on the kernels' clock
            words[self._clock0] = time.monotonic_ns() - int(1e9 * (now - t0))
        if should_stop is None:
            self._fn(small.address)
        else:
            with small.stop.arm(should_stop):
                self._fn(small.address)
            if small.stop.seen:
                words = None
        vals = small.out[0].copy()
        nq = self._nq1[0]
        if vals[nq] != _CONVERGED or words is None:  # the general reading, messages too
            r = result_of(self.model, self.config, vals[None], small.seeds[0].copy(), t0,
                          self._fields)
            r.backend = "host"
            return r
        ints = vals[nq:nq + 5].astype(np.int64)  # status, errors (unused), iterations, seed
        return IKResult(q=vals[None, :nq], success=np.array([True]),
                        position_error=vals[nq + 1:nq + 2], orientation_error=vals[nq + 2:nq + 3],
                        iterations=ints[3:4], seed_index=ints[4:5], status=ints[0:1],
                        messages=[""], solve_time=time.perf_counter() - t0, backend="host")

    @property
    def building(self) -> bool:
        """Its compiled kernels are being built in the background (see
        :attr:`.solver.IKSolver.building`); the reference answers meanwhile."""
        return self._solver.building

    def _prepare_thread(self):
        """This thread's buffers of the compiled driver, with everything but the target, the
        seed and the clock written once."""
        from ..backends.host import OneGoal  # noqa: PLC0415

        small = OneGoal(self._solver.host)  # (its own: a solver's other calls write theirs)
        small.set_field("pose_weight", self.weights, 1)
        w = small.words
        w[_ARGS["seed_stride"]] = 0
        w[_ARGS["p_end"]] = 1
        w[_ARGS["budget_ns"]] = self._budget
        small.tgt00 = small.fields["pose_target"][0].reshape(4, 4)
        self._local.small = small
        return small
