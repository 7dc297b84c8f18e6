"""The public IK calls: :func:`solve_pose` (pose goals) and :func:`solve_ik` (any objectives).

Both go through a prepared :class:`.solver.IKSolver` (kept per model, tips and options), which
chose its backend when it was built; objectives other than pose goals, and regularizers, are
the reference's (:func:`ros2_ik.ik.batch.reference_solve`).
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from ..backend import get_xp
from ..errors import InvalidInputError
from ..ik.batch import reference_solve
from ..ik.checks import apply_group, check_call_options, check_collision, check_start_time
from ..ik.config import IKConfig, IKResult
from ..ik.objectives import Objective, OrientationObjective, PoseObjective, PositionObjective
from ..model import Model, check_model
from ..validate import check_names, link_index
from .solver import check_targets, prepared_solver

__all__ = ["solve_pose", "solve_pose_k_best", "pose_solver", "solve_ik"]

_POSE_TYPES = (PoseObjective, PositionObjective, OrientationObjective)


def solve_pose(model: Model, targets, *, tips: Sequence[str] | str | None = None,
               weights=(1, 1, 1, 1, 1, 1), seeds=None, config: IKConfig | None = None,
               solver: str = "dls", regularizers: Sequence[Objective] = (),
               should_stop=None, group=None, backend: str = "auto", world=None,
               collision=None, terms=(), start_time: float | None = None,
               **term_args) -> IKResult:
    """Pose IK for one or several tips.

    Args:
        targets: (P, 4, 4) or (P, 7) [x y z qx qy qz qw] for one tip; for K tips (P, K, 4, 4)
            or (P, K, 7). Expressed in the model's base frame. NumPy arrays are solved on the
            CPU, CuPy arrays on their GPU.
        tips: link name(s); default ``model.tips``.
        weights: (6,) or (P, 6) per-axis weights in the target frame (x y z rx ry rz); 0 frees
            an axis.
        seeds: (P, nq) or (nq,) starting configurations; default mid-range.
        config: :class:`IKConfig` (tolerances, iterations, timeout, seeds, solve mode).
        solver: "dls", "ccd" or "ccd+dls".
        regularizers: extra objectives (posture, joint-limit avoidance; the reference solves).
        should_stop: polled while the solve runs; returning True ends it (cancel).
        group: a planning group (:class:`ros2_ik.model.Group`, from
            :meth:`ros2_ik.model.Srdf.group`): the solve moves only the group's joints (every
            other coordinate is the seed's), and its chain's tip is the default tip.
        backend: "auto" (default), "host", "cuda" or "reference" (:data:`.solver.BACKENDS`).
        world: with ``config.avoid_collisions``, the :class:`~ros2_ik.world.World` the answers
            keep clear of (None: self-collision only).
        collision: with ``config.avoid_collisions``, the robot's collision model (default:
            :func:`ros2_ik.model.collision.collision_model` of ``model``).
        terms: more terms (:mod:`ros2_ik.ik.terms`: ``Posture``, ``StepBound``, a ``GoalSet``
            in the place of the pose goal); ``term_args`` what they take per call (``rest=``,
            ``max_joint_step=`` ...).
        start_time: when the timeout starts (``time.perf_counter``'s clock; default: the
            call), e.g. when a request arrived.
    Returns:
        :class:`IKResult`; every success verified by FK against the tolerances and limits (and,
        with collision avoidance, by the exact distances of its ``clearance``).
    """
    # the timeout counts from here
    t_call = time.perf_counter() if start_time is None else float(check_start_time(start_time))
    if regularizers:
        if terms or term_args:
            raise InvalidInputError("regularizers are the reference's objectives; give terms "
                                    "(ros2_ik.ik.terms) instead of both")
        check_model(model)
        if group is not None:
            raise InvalidInputError("regularizers are built for one model; a group solve "
                                    "takes none")
        tips = check_names(model.tips if tips is None else tips, "tips")
        for tip in tips:
            link_index(model, tip, "tips")
        cfg = check_call_options(config, solver, should_stop, backend)
        check_collision(collision)
        xp = get_xp(targets)
        t = check_targets(targets, tips, xp)
        objs = [PoseObjective(model, tip, t[:, k], weights) for k, tip in enumerate(tips)]
        s = prepared_solver(model, tips, cfg, solver, "reference", xp, collision)
        return reference_solve(model, objs, seeds=seeds, config=cfg, solver=solver,
                               regularizers=regularizers, should_stop=should_stop,
                               start_time=t_call,
                               collision=s.collision_objective(s.check_world(world)))
    s, cfg, t_call = pose_solver(model, tips=tips, config=config, solver=solver,
                                 should_stop=should_stop, group=group, backend=backend,
                                 xp=get_xp(targets), collision=collision, terms=terms,
                                 start_time=t_call)
    return s.solve(targets, seeds=seeds, weights=weights, should_stop=should_stop,
                   timeout=cfg.timeout, start_time=t_call, world=world, **term_args)


def solve_pose_k_best(model: Model, targets, k: int, *, min_distance: float = 0.1,
                      tips: Sequence[str] | str | None = None, weights=(1, 1, 1, 1, 1, 1),
                      seeds=None, config: IKConfig | None = None, solver: str = "dls",
                      should_stop=None, group=None, backend: str = "auto", world=None,
                      collision=None, terms=(), distinct_branches: bool = False,
                      **term_args):
    """Up to ``k`` distinct answers a problem, best first (:meth:`ros2_ik.IKSolver.
    solve_k_best`; the arguments as :func:`solve_pose`'s). Returns a
    :class:`~ros2_ik.api.kbest.KBestResult`."""
    s, cfg, t_call = pose_solver(model, tips=tips, config=config, solver=solver,
                                 should_stop=should_stop, group=group, backend=backend,
                                 xp=get_xp(targets), collision=collision, terms=terms,
                                 start_time=time.perf_counter())
    return s.solve_k_best(targets, k, min_distance=min_distance, seeds=seeds, weights=weights,
                          should_stop=should_stop, timeout=cfg.timeout, world=world,
                          start_time=t_call, distinct_branches=distinct_branches,
                          **term_args)


def pose_solver(model: Model, *, tips=None, config: IKConfig | None = None,
                solver: str = "dls", should_stop=None, group=None, backend: str = "auto",
                xp=np, collision=None, terms=(), start_time: float | None = None):
    """The prepared :class:`~.solver.IKSolver` :func:`solve_pose` answers with (the group's
    model and tips where a group is given), the call's checked config (its ``timeout`` the
    call's: the prepared solver keeps none), and the time that timeout counts from
    (``start_time``, less the solver's preparation: a one-time build of its kernels)."""
    t_call = time.perf_counter() if start_time is None else start_time
    check_model(model)
    if group is not None:
        model, tips = apply_group(model, group, tips)
    tips = check_names(model.tips if tips is None else tips, "tips")
    for tip in tips:
        link_index(model, tip, "tips")  # UnknownLinkError listing the valid names
    cfg = check_call_options(config, solver, should_stop, backend)
    check_collision(collision)
    t_prep = time.perf_counter()
    s = prepared_solver(model, tips, cfg, solver, backend, xp, collision, terms)
    return s, cfg, t_call + (time.perf_counter() - t_prep)


def solve_ik(model: Model, objectives: Sequence[Objective], *, seeds=None,
             config: IKConfig | None = None, solver: str = "dls",
             regularizers: Sequence[Objective] = (),
             should_stop: Callable[[], bool] | None = None,
             start_time: float | None = None, backend: str = "auto") -> IKResult:
    """Solve P IK problems with any objectives.

    Pose goals (:class:`PoseObjective`, :class:`PositionObjective`,
    :class:`OrientationObjective`) without regularizers are solved as :func:`solve_pose` solves
    them (a compiled backend where it covers the request); anything else by the reference
    (:func:`ros2_ik.ik.batch.reference_solve`, whose docstring has the arguments).
    """
    t0 = time.perf_counter() if start_time is None else float(check_start_time(start_time))
    check_model(model)
    cfg = check_call_options(config, solver, should_stop, backend)
    objs = [objectives] if isinstance(objectives, Objective) else objectives
    if (isinstance(objs, (list, tuple)) and objs and not regularizers
            and all(type(o) in _POSE_TYPES for o in objs)
            and len({o.num_problems for o in objs}) == 1 and backend != "reference"):
        xp = get_xp(objs[0].targets)
        tips = [o.link_name for o in objs]
        t_prep = time.perf_counter()
        s = prepared_solver(model, tips, cfg, solver, backend, xp)
        t0 += time.perf_counter() - t_prep  # (as solve_pose: a one-time build is not timed)
        t = xp.stack([o.targets for o in objs], axis=1)
        w = objs[0].weights if len(objs) == 1 else xp.stack([o.weights for o in objs], axis=1)
        return s.solve(t, seeds=seeds, weights=w, should_stop=should_stop,
                       timeout=cfg.timeout, start_time=t0)
    return reference_solve(model, objectives, seeds=seeds, config=config, solver=solver,
                           regularizers=regularizers, should_stop=should_stop, start_time=t0)

