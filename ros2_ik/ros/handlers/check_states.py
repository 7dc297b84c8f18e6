"""``~/check_states`` (ros2_ik_interfaces/srv/CheckStates): is each of these states safe, and by
how much.

States come as JointState messages (joints a state leaves out: the robot's current state, the
latest joint_states) or as a compact array (``joint_names`` + state-major
``compact_positions``); with ``path_resolution`` > 0 they are a path's waypoints, checked
densely (:func:`ros2_ik.api.states.check_path`). Every state is checked against the joint
limits, the node's collision model (its meshes, spheres file, the planning scene's attached
objects, padding and allowed collisions) and the world in use when the request was taken, and
answered with its clearances, nearest pairs and the world's version
(:func:`ros2_ik.api.states.check_states`). A timeout ends the check early: TIMED_OUT, with the
states checked so far.
"""

from __future__ import annotations

import math
import types

import numpy as np
from ros2_ik_interfaces.srv import CheckStates

from ...api.states import check_path, check_states
from ...errors import IKError
from .. import codes
from ..codes import RequestError
from ..conversions import as_f64, f64_array
from ..request import Context, collisions_flag, compact_states, duration

__all__ = ["handle", "register", "INLINE_STATES", "states_of"]

INLINE_STATES = 64  # states (friendly form) + joint values (compact form) answered inline
_COLLISIONS = types.SimpleNamespace(avoid_collisions=True)


def register(w) -> None:
    def answer(ctx, req, resp):
        return w.serve("check_states", handle, ctx, req, resp, CheckStates.Response)[0]

    w.service(CheckStates, "~/check_states", answer,
              inline=lambda r: (len(r.states) + len(r.compact_positions) <= INLINE_STATES
                                and r.path_resolution == 0.0))


def states_of(ctx: Context, robot, req) -> np.ndarray:
    """The request's states (N, nq) as the model's coordinates; RequestError for bad ones."""
    model = robot.model
    n_friendly = len(req.states)
    names = list(req.joint_names)
    vals = as_f64(req.compact_positions)
    if n_friendly and (names or vals.size):
        raise RequestError(codes.INVALID_REQUEST,
                           "both `states` and `joint_names`/`compact_positions` are filled; use "
                           "exactly one form")
    if not n_friendly and not vals.size:
        raise RequestError(codes.INVALID_REQUEST,
                           "no states given; fill `states` or `joint_names` + "
                           "`compact_positions`")
    base = ctx.current_q(robot)
    if n_friendly:
        Q = np.empty((n_friendly, model.nq))
        for i, js in enumerate(req.states):
            Q[i] = robot.apply_joint_values(base, list(js.name), as_f64(js.position),
                                            what=f"states[{i}]", strict=True, clip=False)
        return Q
    if not names or vals.size % len(names):
        raise RequestError(codes.INVALID_REQUEST,
                           f"compact_positions has {vals.size} values for {len(names)} "
                           "joint_names; give N * len(joint_names) values (state-major)")
    M = vals.size // len(names)
    return compact_states(robot, base, names, vals.reshape(M, len(names)))


def handle(ctx: Context, req, resp) -> int:
    """Answer a CheckStates request into ``resp``; returns the number of states checked."""
    robot = ctx.require_robot()
    s = ctx.settings
    Q = states_of(ctx, robot, req)
    res = float(req.path_resolution)
    margin = float(req.margin)
    if not (math.isfinite(res) and res >= 0):
        raise RequestError(codes.INVALID_REQUEST, f"path_resolution = {res!r} is invalid; give "
                           "a positive resolution [rad or m], or 0 for the states as given")
    if not (math.isfinite(margin) and 0 <= margin <= 1):
        raise RequestError(codes.INVALID_REQUEST, f"margin = {margin!r} m is invalid; give a "
                           "clearance in [0, 1] m")
    self_flag = collisions_flag(req.self_collisions)
    timeout = duration(req.timeout)
    limit = s.check_states_max_states
    if res == 0 and Q.shape[0] > limit:
        raise RequestError(codes.INVALID_REQUEST,
                           f"{Q.shape[0]} states exceed the node's check_states.max_states = "
                           f"{limit}; split the request")
    cm, world = ctx.collisions(robot, _COLLISIONS)
    kw = dict(collision=cm, margin=margin,
              self_collisions=s.collision_self if self_flag is None else self_flag,
              should_stop=ctx.should_stop, timeout=timeout if timeout > 0 else None,
              start_time=ctx.arrived)
    try:
        if res > 0:
            n = _path_length(robot.model, Q, res)
            if n > limit:
                raise RequestError(codes.INVALID_REQUEST,
                                   f"the path at resolution {res:g} has {n} states, more than "
                                   f"the node's check_states.max_states = {limit}; give a "
                                   "coarser path_resolution or split the path")
            r = check_path(robot.model, Q, res, world, **kw)
        else:
            r = check_states(robot.model, Q, world, **kw)
    except IKError as exc:
        raise RequestError(codes.INVALID_REQUEST, str(exc)) from None
    # the pairs named: a table of the distinct ones
    used = np.unique(np.concatenate([r.self_pair, r.world_pair]))
    used = used[used >= 0]
    index = {int(p): k for k, p in enumerate(used.tolist())}
    names = [r.pair_names(p) for p in used.tolist()]

    def idx(pairs):
        return [index.get(int(p), -1) for p in pairs.tolist()]

    resp.valid = r.valid.tolist()
    resp.checked = r.checked.tolist()
    resp.within_limits = r.within_limits.tolist()
    resp.limit_violation = f64_array(r.limit_violation)
    resp.self_clearance = f64_array(r.self_clearance)
    resp.world_clearance = f64_array(r.world_clearance)
    resp.self_pair = idx(r.self_pair)
    resp.world_pair = idx(r.world_pair)
    resp.pair_link = [a for a, _ in names]
    resp.pair_other = [b for _, b in names]
    resp.first_invalid = int(r.first_invalid)
    resp.waypoint_index = [] if r.waypoints is None else [int(i) for i in r.waypoints]
    resp.world_version = 0 if r.world_version is None else int(r.world_version)
    resp.check_time = float(r.check_time)
    resp.backend = r.backend
    if req.return_states:
        resp.checked_joint_names = list(robot.model.q_names)
        resp.checked_positions = f64_array(r.q)
    if r.complete:
        resp.error_code.val = codes.SUCCESS
        resp.message = ""
    else:
        resp.error_code.val = codes.TIMED_OUT if r.status == "timed_out" else codes.PREEMPTED
        resp.message = (f"{r.status}: {int(r.checked.sum())} of {len(r.checked)} states "
                        "checked (`checked` says which)")
    return int(r.checked.sum())


def _path_length(model, Q: np.ndarray, res: float) -> int:
    """The number of states of the path through ``Q`` at ``res`` (before interpolating)."""
    d = np.diff(Q, axis=0)
    cont = np.asarray(model.q_continuous, dtype=bool)
    if cont.any():
        d[:, cont] = (d[:, cont] + math.pi) % (2 * math.pi) - math.pi
    with np.errstate(invalid="ignore"):
        steps = np.maximum(1, np.ceil(np.max(np.abs(d), axis=1) / res))
    return int(np.sum(steps)) + 1
